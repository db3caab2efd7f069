// Command sandboxctl is the CLI of sandboxctl. It is deliberately light: the
// client commands (exec, process, approvals, version) talk to the daemon
// over its socket and link nothing of the runtime, so `sandboxctl exec`
// costs a few milliseconds of process start-up on top of the daemon's
// answer. The runtime's own commands (serve, sandbox, mcp, node) are
// handed over to sandboxctld, installed beside it. Build it static
// (CGO_ENABLED=0) so no dynamic loader runs at start.
//
// It is one request and an answer: it neither needs parallelism nor should
// pay for it, so it runs on one P and does not follow the cgroup's CPU
// quota (the runtime still reads the cgroup files once at start, whatever
// containermaxprocs says). docs/architecture.md says where the rest of its
// time goes; bench's BenchmarkCLIProcess measures it.
//
//go:debug containermaxprocs=0
//go:debug updatemaxprocs=0
package main

import (
	"os"
	"runtime"

	"github.com/sandboxctl/sandboxctl/internal/cli"
)

// version is set at build time: -ldflags "-X main.version=v1.2.3".
var version = "dev"

func main() {
	runtime.GOMAXPROCS(1)
	os.Exit(cli.Main(version, "", cli.ForwardingCommands))
}
