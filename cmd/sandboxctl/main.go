// Command sandboxctl is the CLI of sandboxctl. It is deliberately light: the
// client commands (exec, process, approvals, version) talk to the daemon
// over its socket and link nothing of the runtime, so `sandboxctl exec`
// costs a few milliseconds of process start-up on top of the daemon's
// answer. The runtime's own commands (serve, sandbox, mcp, node) are
// handed over to sandboxctld, installed beside it. Build it static
// (CGO_ENABLED=0) so no dynamic loader runs at start.
//
// It is one request and an answer: it neither needs parallelism nor should
// pay for it, so it runs on one P and skips the runtime's cgroup probing
// for a CPU quota (both measurable at this size: ~1.5 ms of ~18 ms).
//
//go:debug containermaxprocs=0
//go:debug updatemaxprocs=0
package main

import (
	"context"
	"os"
	"os/signal"
	"runtime"
	"syscall"

	"github.com/sandboxctl/sandboxctl/internal/cli"
)

// version is set at build time: -ldflags "-X main.version=v1.2.3".
var version = "dev"

func main() {
	runtime.GOMAXPROCS(1)
	os.Exit(run())
}

func run() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		// After the first signal, a second one kills at once.
		<-ctx.Done()
		stop()
	}()
	c := &cli.CLI{In: os.Stdin, Out: os.Stdout, Err: os.Stderr, Version: version, Argv: os.Args}
	return cli.Report(cli.NewRootCommand(c, cli.ForwardingCommands(c)...).ExecuteContext(ctx), os.Stderr)
}
