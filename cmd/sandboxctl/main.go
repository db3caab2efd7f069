// Command sandboxctl is the CLI of sandboxctl. It is deliberately light: the
// client commands (exec, process, approvals, version) talk to the daemon
// over its socket and link nothing of the runtime, so `sandboxctl exec`
// costs a few milliseconds of process start-up on top of the daemon's
// answer. The runtime's own commands (serve, sandbox, mcp, node) are
// handed over to sandboxctld, installed beside it. Build it static
// (CGO_ENABLED=0) so no dynamic loader runs at start.
//
// It is one request and an answer, so it does not follow the cgroup's CPU
// quota (the runtime still reads the cgroup files once at start, whatever
// containermaxprocs says). It keeps the runtime's GOMAXPROCS: setting it
// stops the world, which cost a quarter of a millisecond per run, more
// than it saved. docs/architecture.md says where the rest of its time
// goes; bench's BenchmarkCLIProcess measures it.
//
//go:debug containermaxprocs=0
//go:debug updatemaxprocs=0
package main

import (
	"os"

	"github.com/sandboxctl/sandboxctl/internal/cli"
)

// version is set at build time: -ldflags "-X main.version=v1.2.3".
var version = "dev"

func main() {
	os.Exit(cli.Main(version, "", cli.ForwardingCommands))
}
