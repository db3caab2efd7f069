// Command sandboxctld is sandboxctl's runtime: the daemon (serve) with its
// hosts, guard and node registry, and the commands that talk to the Docker
// Engine directly or serve a protocol (sandbox, mcp, node). It also has the
// client commands of sandboxctl, which hands the runtime commands over to
// it; people normally run sandboxctl.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/sandboxctl/sandboxctl/internal/cli"
	"github.com/sandboxctl/sandboxctl/internal/runtimecli"
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
	// Auto-start (exec) runs this very binary as the daemon.
	if exe, err := os.Executable(); err == nil {
		c.DaemonBinary = exe
	}
	return cli.Report(cli.NewRootCommand(c, runtimecli.Commands(c)...).ExecuteContext(ctx), os.Stderr)
}
