package cli

import (
	"context"
	"fmt"
	"io"
	"net"
	"os/exec"
	"sync"

	"github.com/spf13/cobra"

	"github.com/sandboxctl/sandboxctl/internal/apiclient"
)

// UIOptions are the flags of `sandboxctl ui`.
type UIOptions struct {
	// Listen is the loopback address of the local port (default
	// 127.0.0.1:0, a free port).
	Listen string
	// NoOpen prints the link without trying xdg-open.
	NoOpen bool
}

func newUICommand(c *CLI) *cobra.Command {
	var opts UIOptions
	cmd := &cobra.Command{
		Use:   "ui",
		Short: "Open the web console (approvals, sessions, sandboxes, nodes) in a browser",
		Long: `Open the daemon's web console. sandboxctl forwards a local port on 127.0.0.1
to the daemon's unix socket and prints a one-time login link to it (valid once,
for a minute), which it also opens with xdg-open when that is installed. It
keeps forwarding until interrupted (Ctrl-C).

Only a person may log in this way: like 'approvals resolve', the daemon
refuses the link to any process it started (and their descendants). Over
'serve --listen' the console is at /ui/ too and asks for a token instead.`,
		Args: ExactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return RunUI(cmd.Context(), c, opts)
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.Listen, "listen", "127.0.0.1:0", "loopback address of the local port")
	f.BoolVar(&opts.NoOpen, "no-open", false, "print the link only; do not run xdg-open")
	return cmd
}

// RunUI forwards a loopback port to the daemon's socket until ctx is done.
func RunUI(ctx context.Context, c *CLI, opts UIOptions) error {
	host, _, err := net.SplitHostPort(opts.Listen)
	if err != nil {
		return UsageErrorf("ui: --listen %q: %v", opts.Listen, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return UsageErrorf("ui: --listen %q is not a loopback address: the console's port must not be reachable from other machines (use 'serve --listen' with TLS for that)", opts.Listen)
	}
	cfg, err := c.LoadConfig()
	if err != nil {
		return err
	}
	state, err := c.StateDir(cfg)
	if err != nil {
		return err
	}
	client, err := c.Client(cfg)
	if err != nil {
		return err
	}
	path, err := client.ConsoleLogin(ctx)
	if err != nil {
		return fmt.Errorf("ui: %w", err)
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", opts.Listen)
	if err != nil {
		return fmt.Errorf("ui: %w", err)
	}
	defer ln.Close()
	link := "http://" + ln.Addr().String() + path
	if _, err := fmt.Fprintf(c.Out, "console: %s\n(the link logs in once, within a minute; this command forwards the console until you stop it with Ctrl-C)\n", link); err != nil {
		return err
	}
	if !opts.NoOpen {
		openBrowser(c, link)
	}
	return forwardConsole(ctx, ln, apiclient.SocketPath(state))
}

// openBrowser runs xdg-open on link when it is installed; without it the
// printed link is all there is.
func openBrowser(c *CLI, link string) {
	bin, err := exec.LookPath("xdg-open")
	if err != nil {
		return
	}
	cmd := exec.Command(bin, link)
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(c.Err, "sandboxctl: ui: xdg-open: %v\n", err)
		return
	}
	go func() { _ = cmd.Wait() }()
}

// forwardConsole copies every connection on ln to a new connection to the
// daemon's socket, both ways, until ctx is done.
func forwardConsole(ctx context.Context, ln net.Listener, sock string) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	stop := context.AfterFunc(ctx, func() { _ = ln.Close() })
	defer stop()
	for {
		conn, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("ui: accept: %w", err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			splice(ctx, conn, sock)
		}()
	}
}

func splice(ctx context.Context, conn net.Conn, sock string) {
	defer conn.Close()
	var d net.Dialer
	up, err := d.DialContext(ctx, "unix", sock)
	if err != nil {
		msg := "the sandboxctl daemon is not running: " + err.Error() + "\n"
		_, _ = fmt.Fprintf(conn, "HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(msg), msg)
		return
	}
	defer up.Close()
	stop := context.AfterFunc(ctx, func() { _ = conn.Close(); _ = up.Close() })
	defer stop()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = io.Copy(up, conn)
		if uc, ok := up.(*net.UnixConn); ok {
			_ = uc.CloseWrite()
		}
	}()
	_, _ = io.Copy(conn, up)
	// The daemon is done with the connection: so is the browser.
	_ = conn.Close()
	<-done
}
