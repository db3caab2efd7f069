// Command testnode is a node agent for nodeexec's multi-process tests: it
// runs nodeexec.RunAgent with flags and prints "CONNECTED <id> <name>" each
// time its link comes up. It is not part of the product (that is
// `sandboxctl node run`).
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/sandboxctl/sandboxctl/hostexec/hostsup"
	"github.com/sandboxctl/sandboxctl/nodeexec"
	"github.com/sandboxctl/sandboxctl/vocab"
)

func main() {
	var o nodeexec.AgentOptions
	flag.StringVar(&o.GatewayURL, "gateway", "", "gateway URL")
	flag.StringVar(&o.Token, "token", "", "node token")
	flag.StringVar(&o.Name, "name", "", "node name")
	flag.StringVar(&o.TLSFingerprint, "tls-fingerprint", "", "pinned SHA-256 of the gateway certificate")
	flag.StringVar(&o.StateDir, "state", "", "state directory")
	flag.StringVar(&o.Workdir, "workdir", "", "default working directory")
	flag.Func("security", "deny|allowlist|full", func(s string) (err error) {
		o.Config.Security, err = vocab.ParseSecurity(s)
		return err
	})
	flag.Func("ask", "off|on-miss|always", func(s string) (err error) {
		o.Config.Ask, err = vocab.ParseAsk(s)
		return err
	})
	flag.DurationVar(&o.LinkGrace, "link-grace", 0, "grace before runs of a lost link are killed")
	flag.DurationVar(&o.PingInterval, "ping", 0, "ping interval")
	flag.DurationVar(&o.MinBackoff, "min-backoff", 100*time.Millisecond, "first reconnect delay")
	flag.DurationVar(&o.MaxBackoff, "max-backoff", time.Second, "longest reconnect delay")
	flag.DurationVar(&o.KillGrace, "kill-grace", 0, "TERM to KILL delay")
	supervise := flag.Bool("supervise", false, "run commands in a host supervisor (this program with -host-supervisor)")
	serveDir := flag.String("host-supervisor", "", "serve the host supervisor of this directory (started by the agent)")
	flag.Parse()
	logger := log.New(os.Stderr, "testnode: ", log.Lmicroseconds)
	if *serveDir != "" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		if err := hostsup.Serve(ctx, *serveDir, logger.Printf); err != nil {
			logger.Printf("%v", err)
			os.Exit(2)
		}
		return
	}
	if *supervise {
		exe, err := os.Executable()
		if err != nil {
			logger.Fatal(err)
		}
		dir := nodeexec.SupervisorDir(o.StateDir)
		if o.Supervisor, err = hostsup.New(hostsup.Options{Dir: dir, Command: []string{exe, "-host-supervisor", dir},
			Env: []string{"PATH=/usr/bin:/bin"}, Logf: logger.Printf}); err != nil {
			logger.Fatal(err)
		}
	}
	o.Logf = logger.Printf
	o.Shell = "/bin/sh"
	o.Environ = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + os.TempDir(), "LANG=C.UTF-8"}
	o.OnConnect = func(id, name string) { fmt.Printf("CONNECTED %s %s\n", id, name) }
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := nodeexec.RunAgent(ctx, o); err != nil {
		fmt.Printf("ERROR %v\n", err)
		logger.Printf("%v", err)
		os.Exit(2)
	}
	fmt.Println("STOPPED")
}
