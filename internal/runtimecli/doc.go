// Package runtimecli holds sandboxctld's own commands, the ones that link
// the runtime: serve (the daemon with its hosts, guard, node registry and
// metrics), sandbox (the Docker Engine directly), mcp (an MCP server over
// stdio), node (a node agent, and the node list) and ui (a local port to
// the web console: an HTTP server and reverse proxy). The client commands
// (exec, process, approvals, version) live in package cli and are shared
// with the light sandboxctl binary, which hands these over to sandboxctld.
package runtimecli

import (
	"github.com/spf13/cobra"

	"github.com/sandboxctl/sandboxctl/internal/cli"
)

// Commands are the runtime commands bound to c, in the order of
// cli.RuntimeCommands.
func Commands(c *cli.CLI) []*cobra.Command {
	return []*cobra.Command{newServeCommand(c), newSandboxCommand(c), newMCPCommand(c), newNodeCommand(c), newUICommand(c), newAuditCommand(c)}
}
