package runtimecli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sandboxctl/sandboxctl/api"
	"github.com/sandboxctl/sandboxctl/internal/cli"
	"github.com/sandboxctl/sandboxctl/internal/console"
	"github.com/sandboxctl/sandboxctl/internal/procfs"
)

// UIOptions are the flags of `sandboxctl ui`.
type UIOptions struct {
	// Listen is the loopback address of the local port (default
	// 127.0.0.1:0, a free port).
	Listen string
	// NoOpen prints the link without trying xdg-open.
	NoOpen bool
}

func newUICommand(c *cli.CLI) *cobra.Command {
	var opts UIOptions
	cmd := &cobra.Command{
		Use:   "ui",
		Short: cli.RuntimeShort("ui"),
		Long: `Open the daemon's web console. sandboxctl forwards a local port on 127.0.0.1
to the daemon's unix socket and prints a one-time login link to it (valid once,
for a minute), which it also opens with xdg-open when that is installed. It
keeps forwarding until interrupted (Ctrl-C).

Only a person may log in this way: like 'approvals resolve', the daemon
refuses the link to any process it started (and their descendants). Over
'serve --listen' the console is at /ui/ too and asks for a token instead.`,
		Args: cli.ExactArgs(0),
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
func RunUI(ctx context.Context, c *cli.CLI, opts UIOptions) error {
	host, _, err := net.SplitHostPort(opts.Listen)
	if err != nil {
		return cli.UsageErrorf("ui: --listen %q: %v", opts.Listen, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return cli.UsageErrorf("ui: --listen %q is not a loopback address: the console's port must not be reachable from other machines (use 'serve --listen' with TLS for that)", opts.Listen)
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
	return forwardConsole(ctx, ln, api.SocketPath(state))
}

// openBrowser runs xdg-open on link when it is installed; without it the
// printed link is all there is.
func openBrowser(c *cli.CLI, link string) {
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

// forwardConsole serves ln with a reverse proxy to the daemon's socket
// until ctx is done. Every request it forwards names, in
// api.ConsoleClientPIDsHeader, the processes that hold the other end
// of its connection: the daemon refuses a login or a decision when one of
// them is a process sandboxctl started, as if it had asked itself.
func forwardConsole(ctx context.Context, ln net.Listener, sock string) error {
	target := &url.URL{Scheme: "http", Host: "sandboxctl"}
	var d net.Dialer
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Host = pr.In.Host // the console compares Origin with it
			pids, _ := pr.In.Context().Value(clientPIDsKey{}).(string)
			pr.Out.Header.Set(api.ConsoleClientPIDsHeader, pids)
		},
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				return d.DialContext(ctx, "unix", sock)
			},
		},
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			http.Error(w, "the sandboxctl daemon does not answer: "+err.Error(), http.StatusBadGateway)
		},
	}
	srv := &http.Server{
		Handler:           consoleOnly(proxy),
		ReadHeaderTimeout: 10 * time.Second,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, clientPIDsKey{}, clientPIDs(c))
		},
	}
	stop := context.AfterFunc(ctx, func() {
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	})
	defer stop()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("ui: %w", err)
	}
	return nil
}

// consoleOnly passes on only requests for the console's own pages: the
// port stands for the person's socket connection, and the rest of the
// daemon's API there (deciding approvals, minting login codes, running
// commands) would take any local process's request as the person's.
func consoleOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		if !strings.HasPrefix(p, console.Prefix) || path.Clean(p) != strings.TrimSuffix(p, "/") {
			http.Error(w, fmt.Sprintf("sandboxctl ui forwards the web console (%s) only, not %q", console.Prefix, p), http.StatusNotFound)
			return
		}
		next.ServeHTTP(w, r)
	})
}

type clientPIDsKey struct{}

// clientPIDs names the processes of this uid that hold the other end of
// c, or "" when they cannot be told.
func clientPIDs(c net.Conn) string {
	remote, ok1 := c.RemoteAddr().(*net.TCPAddr)
	local, ok2 := c.LocalAddr().(*net.TCPAddr)
	if !ok1 || !ok2 {
		return ""
	}
	owner, err := procfs.TCPSocketOwner("/proc", remote.AddrPort(), local.AddrPort())
	if err != nil || owner.UID != os.Geteuid() || len(owner.PIDs) == 0 {
		return ""
	}
	ids := make([]string, len(owner.PIDs))
	for i, pid := range owner.PIDs {
		ids[i] = strconv.Itoa(pid)
	}
	return strings.Join(ids, ",")
}
