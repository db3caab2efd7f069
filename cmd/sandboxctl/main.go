// Command sandboxctl is the CLI and daemon of sandboxctl: exec and process
// (through the daemon), sandbox (Docker directly), serve (the daemon) and
// version. The commands live in internal/cli; this file only wires the
// process to them.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/sandboxctl/sandboxctl/cmd/sandboxctl/internal/cli"
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
	c := &cli.CLI{In: os.Stdin, Out: os.Stdout, Err: os.Stderr, Version: version}
	return cli.Report(cli.NewRootCommand(c).ExecuteContext(ctx), os.Stderr)
}
