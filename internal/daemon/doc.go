// Package daemon is the HTTP/JSON face of sandboxctl (README, "Using it"): the server
// that `sandboxctl serve` runs on a unix socket in the state directory (and
// optionally on TCP behind a bearer token and TLS). Package apiclient is
// its client (the CLI's, over the socket, without net/http), and
// apiclient/tcpclient the client of the TCP listener.
//
// Endpoints:
//
//	POST /v1/tools/exec     body sessions.ExecParams    → sessions.Result
//	POST /v1/tools/process  body sessions.ProcessParams → sessions.Result
//	GET  /v1/events         NDJSON stream of sessions.Event, one per line,
//	                        flushed as they happen; ends when the client
//	                        goes away or the daemon stops
//	GET  /v1/sandboxes      JSON array of sandbox.Info
//	GET  /healthz           {"ok":true,"pid":N,"version":"…"}
//	POST /v1/shutdown       graceful shutdown (unix socket only) → 202
//
// The server does no tool logic itself. It decodes request bodies strictly
// (at most 1 MiB → else 413; unknown fields, wrong types, trailing data →
// 400 naming the problem), hands them to a Tools implementation (in
// production a *sessions.Manager), and maps error classes to status codes:
// invalid input → 400, not found → 404, a backend that is down (Docker) →
// 503, anything else → 500, always as {"error": message}. An unknown process
// session is not an error: it is an ordinary result whose text is
// "No session found for ID".
//
// On TCP every request needs "Authorization: Bearer <token>" (compared in
// constant time; 401 otherwise), and /v1/shutdown does not exist there.
//
// Approval decisions (Options.Approvals) are for humans only. On the
// socket the daemon reads the peer's pid and uid from the kernel
// (SO_PEERCRED) and refuses (403) a peer in another pid namespace, one
// that descends from the daemon, or one with SANDBOXCTL_RUN in its own or
// an ancestor's environment (approverCheck); AdoptOrphans makes the daemon
// the child subreaper of its commands so that no descendant can leave its
// tree. On TCP they need a separate approver token; the tool token gets
// 401.
//
// The web console (internal/console) is served at /ui/ on both listeners,
// outside the bearer check: it logs browsers in itself. On the socket its
// one-time login codes (POST /v1/ui/login) are minted only for an approver
// peer, and every code login and session request is vetted against the
// peer and the browser processes `sandboxctl ui` names (consoleVet). On
// TCP the approver token logs in with decisions, the tool token without.
//
// Files in the state directory: sandboxctl.sock (mode 0600, bound in a
// private directory and moved into place so it is never reachable with wider
// permissions), daemon.pid, daemon.lock (an flock held for the daemon's
// lifetime so that two daemons can never serve one state directory), token
// (for the TCP listener, mode 0600), daemon.log (output of a daemon
// started in the background by apiclient.Connect or EnsureRunning) and
// daemon-config.json (the configuration the daemon serves, written by
// serve: apiclient.DaemonConfig), besides workspaces/ (the agents'
// workspaces unless sandbox.workspaceRoot names another directory).
package daemon
