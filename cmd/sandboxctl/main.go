// Command sandboxctl is the CLI of sandboxctl. It is deliberately light: the
// client commands (exec, process, approvals, version) talk to the daemon
// over its socket and link nothing of the runtime, so `sandboxctl exec`
// costs a few milliseconds of process start-up on top of the daemon's
// answer. The runtime's own commands (serve, sandbox, mcp, node) are
// handed over to sandboxctld, installed beside it. Build it static
// (CGO_ENABLED=0) so no dynamic loader runs at start.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/sandboxctl/sandboxctl/internal/cli"
)

// version is set at build time: -ldflags "-X main.version=v1.2.3".
var version = "dev"

func main() {
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
