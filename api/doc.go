// Package api is sandboxctl's contract: the types that cross the daemon's
// HTTP API (openapi.yaml, beside this file) and the tools' JSON
// (docs/tools.md), owned by neither the daemon nor its clients, as moby's
// api/types. The daemon (internal/daemon), the sessions hub, the Go client
// (internal/apiclient), the CLI, the MCP server and the testcontainers
// module all speak these types; the JSON they encode to is what clients in
// other languages see.
//
// It imports the standard library and package vocab only, so the light
// CLI and an embedder link it without the runtime; it imports no net/http.
package api
