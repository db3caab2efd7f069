package runtimecli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/moby/term"
	"github.com/spf13/cobra"

	"github.com/sandboxctl/sandboxctl/internal/cli"
	"github.com/sandboxctl/sandboxctl/internal/termsize"
	"github.com/sandboxctl/sandboxctl/sandbox"
)

// defaultShell prefers a login bash and falls back to sh (busybox images).
func defaultShell() []string {
	return []string{"/bin/sh", "-c", "if command -v bash >/dev/null 2>&1; then exec bash -l; else exec sh -l; fi"}
}

// ShellOptions are the flags of `sandbox shell`.
type ShellOptions struct {
	SandboxOptions
	// Cmd replaces the login shell (arguments after --).
	Cmd []string
}

func newSandboxShellCommand(c *cli.CLI) *cobra.Command {
	var opts ShellOptions
	cmd := &cobra.Command{
		Use:   "shell [--agent ID] [--session KEY] [-- COMMAND...]",
		Short: "Open an interactive terminal in a scope's sandbox",
		Long: `Open an interactive terminal in the sandbox of a scope (created when missing).
Stdin must be a terminal; it is put in raw mode for the session and restored on
every exit, and the sandbox's terminal follows the window's size. The exit code
is the shell's.`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Cmd = args
			return RunSandboxShell(cmd.Context(), c, opts)
		},
	}
	addScopeFlags(cmd, &opts.SandboxOptions)
	return cmd
}

// RunSandboxShell attaches the terminal to a shell in the scope's sandbox and
// returns an *cli.ExitError with the shell's exit code when it is not 0.
func RunSandboxShell(ctx context.Context, c *cli.CLI, opts ShellOptions) (err error) {
	in, ok := c.In.(*os.File)
	if !ok || !term.IsTerminal(in.Fd()) {
		return cli.UsageErrorf("sandbox shell: stdin is not a terminal; use 'sandboxctl exec' for non-interactive commands")
	}
	fd := in.Fd()
	cols, rows := termsize.DefaultCols, termsize.DefaultRows
	if ws, werr := term.GetWinsize(fd); werr == nil && ws.Width > 0 && ws.Height > 0 {
		cols, rows = int(ws.Width), int(ws.Height)
	}
	cmdline := opts.Cmd
	if len(cmdline) == 0 {
		cmdline = defaultShell()
	}
	env := []string{"TERM=xterm-256color"}
	if t := c.Getenv("TERM"); t != "" {
		env[0] = "TERM=" + t
	}

	m, err := newSandboxManager(ctx, c)
	if err != nil {
		return err
	}
	defer m.Close()
	// Check the terminal before Attach: a failure after it would leave an
	// exec running in the container with nobody to talk to.
	exec, _, err := m.Attach(ctx, opts.scope(), sandbox.ExecOptions{
		Cmd: cmdline, Env: env, PTY: true, KeepStdin: true, Cols: cols, Rows: rows,
	})
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			killCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = exec.Kill(killCtx)
		}
	}()

	state, err := term.SetRawTerminal(fd)
	if err != nil {
		return fmt.Errorf("sandbox shell: raw mode: %w", err)
	}
	// Deferred, so panics and every return restore the terminal; the
	// signals below turn into returns through ctx.
	defer term.RestoreTerminal(fd, state)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGWINCH, syscall.SIGHUP, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case s := <-sigs:
				if s != syscall.SIGWINCH {
					cancel()
					return
				}
				if ws, werr := term.GetWinsize(fd); werr == nil {
					_ = exec.Resize(ctx, int(ws.Width), int(ws.Height))
				}
			}
		}
	}()

	// stdin → shell. The read blocks until a key arrives, so this goroutine
	// may outlive the shell; the process ends right after anyway.
	go func() {
		_, _ = io.Copy(execWriter{exec}, in)
		_ = exec.CloseStdin()
	}()
	outDone := make(chan struct{})
	go func() {
		defer close(outDone)
		_, _ = io.Copy(c.Out, exec.Stdout())
	}()

	code, sig, werr := exec.Wait(ctx)
	select {
	case <-outDone:
	case <-time.After(2 * time.Second):
	}
	switch {
	case werr != nil && errors.Is(werr, context.Canceled):
		return &cli.ExitError{Code: 130, Err: errors.New("sandbox shell: interrupted; the shell was killed")}
	case werr != nil:
		return fmt.Errorf("sandbox shell: %w", werr)
	case sig != "" && cli.SignalNumber(sig) > 0:
		return &cli.ExitError{Code: 128 + cli.SignalNumber(sig)}
	case code != 0:
		return &cli.ExitError{Code: code}
	}
	return nil
}

// execWriter gives the exec's Write method an io.Writer of its own.
type execWriter struct{ e *sandbox.Exec }

func (w execWriter) Write(p []byte) (int, error) { return w.e.Write(p) }
