package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/moby/term"
	"github.com/sandboxctl/sandboxctl/api"
	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/sandboxctl/sandboxctl/internal/shellword"
)

// ExecOptions are the flags of `sandboxctl exec`.
type ExecOptions struct {
	Host       string
	Workdir    string
	Env        []string // KEY=VALUE
	YieldMs    *float64 // nil = not given
	Background bool
	Timeout    *float64 // seconds; nil = not given
	PTY        bool
	Elevated   bool
	Security   string
	Ask        string
	Node       string
	AgentID    string
	SessionKey string
	// Stdin (-i) forwards the CLI's stdin to the command (also the default
	// when stdin is not a terminal, see forwardsStdin); TTY (-t) runs it
	// in a PTY with the user's terminal in raw mode (with -i) and its size.
	Stdin, TTY bool
	// Command is what to run: one argument is a shell command line; several
	// are an argv, each word quoted so that exactly those words run.
	Command []string
}

func newExecCommand(c *CLI) *cobra.Command {
	var (
		opts    ExecOptions
		yieldMs int
		timeout float64
	)
	cmd := &cobra.Command{
		Use:   "exec [flags] -- COMMAND...",
		Short: "Run a command through the exec tool and print its output",
		Long: `Run a command through the daemon's exec tool (docs/tools.md) and print its output,
or the running / approval-pending notice. One argument after the flags is a
shell command line ('echo $HOME | wc -c'); several are the words of one
command, each passed as it is (sh -c 'echo hello' runs sh with two
arguments), as with docker exec.

Without --json, --yield-ms or -d, exec waits for the command like docker
exec: its stdout and stderr stream live to sandboxctl's stdout and stderr
(a PTY merges them), and sandboxctl exits with the command's exit code.
Stdin is forwarded to the command, then EOF when it ends: always with -i,
and by default when stdin is not a terminal (a pipe, a file, /dev/null), so
'echo data | sandboxctl exec -- cat' prints data; a terminal stdin is
forwarded only with -i. -t allocates a PTY (stdin then only with -i) and,
with -i on a terminal, puts the terminal in raw mode and follows its size. Ctrl-C kills the command's whole tree (a second Ctrl-C leaves at once).
-d prints the session id alone and leaves the command running.

With --json or --yield-ms, exec answers as the exec tool does (docs/tools.md).

Exit code: the command's own exit code when it completed; 124 when its
timeout killed it; 128+N when signal N ended it; 125 when it failed for
another reason or sandboxctl failed; 130 after Ctrl-C; 1 when it was
denied; 2 for bad input. With --json or --yield-ms, 0 when it is still
running in the background or waits for approval.

Without --workdir, a command for the gateway host runs in the current
directory (unless the config sets exec.cwd).`,
		Example: `  sandboxctl exec -- ls -la
  sandboxctl exec -d -- make test
  echo data | sandboxctl exec -- cat
  sandboxctl exec -i -- cat
  sandboxctl exec -it -- bash
  sandboxctl exec --host gateway --env FOO=bar -- 'echo $FOO'`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.Flags().Changed("yield-ms") {
				v := float64(yieldMs)
				opts.YieldMs = &v
			}
			if cmd.Flags().Changed("timeout") {
				opts.Timeout = &timeout
			}
			opts.Command = args
			return RunExec(cmd.Context(), c, opts)
		},
	}
	f := cmd.Flags()
	// Flags after the first word belong to the command: `exec ls -la`.
	f.SetInterspersed(false)
	f.StringVar(&opts.Host, "host", "", "where to run: sandbox|gateway|node (default: the config's exec.host)")
	f.StringVarP(&opts.Workdir, "workdir", "w", "", "working directory")
	f.StringArrayVarP(&opts.Env, "env", "e", nil, "extra environment variable KEY=VALUE (repeatable)")
	f.IntVar(&yieldMs, "yield-ms", 0, fmt.Sprintf("wait this many ms, then background the run (%d..%d); answers as the exec tool", api.MinYieldMs, api.MaxYieldMs))
	f.BoolVarP(&opts.Background, "detach", "d", false, "background the run at once and print its session id")
	f.BoolVar(&opts.Background, "background", false, "same as --detach")
	f.BoolVarP(&opts.Stdin, "interactive", "i", false, "forward stdin to the command (then EOF); the default when stdin is not a terminal")
	f.BoolVarP(&opts.TTY, "tty", "t", false, "allocate a pseudo-terminal (raw mode and window size with -i on a terminal)")
	f.Float64Var(&timeout, "timeout", 0, "kill the whole process tree after this many seconds")
	f.BoolVar(&opts.PTY, "pty", false, "run in a pseudo-terminal (120x30)")
	f.BoolVar(&opts.Elevated, "elevated", false, "run on the gateway host with elevated rights (where configured)")
	f.StringVar(&opts.Security, "security", "", "deny|allowlist|full (can only lower the configured mode)")
	f.StringVar(&opts.Ask, "ask", "", "off|on-miss|always (can only raise the configured mode)")
	f.StringVar(&opts.Node, "node", "", "node id or name for --host node")
	f.StringVar(&opts.AgentID, "agent", "", "agent id (scopes sandboxes, sessions and approvals)")
	f.StringVar(&opts.SessionKey, "session", "", "session key (scopes sandboxes and sessions)")
	return cmd
}

// Params validates the options that can be checked locally and builds the
// exec tool's input.
func (o ExecOptions) Params() (api.ExecParams, error) {
	if len(o.Command) > 0 && strings.TrimSpace(strings.Join(o.Command, "")) == "" {
		return api.ExecParams{}, UsageErrorf("exec: Provide a command to start.")
	}
	command, err := commandLine(o.Command)
	if err != nil {
		return api.ExecParams{}, err
	}
	p := api.ExecParams{
		Command:    command,
		Workdir:    o.Workdir,
		YieldMs:    o.YieldMs,
		Background: o.Background,
		Timeout:    o.Timeout,
		PTY:        o.PTY,
		Elevated:   o.Elevated,
		Host:       o.Host,
		Security:   o.Security,
		Ask:        o.Ask,
		Node:       o.Node,
		AgentID:    o.AgentID,
		SessionKey: o.SessionKey,
	}
	if len(o.Command) == 0 {
		return p, UsageErrorf("exec: missing COMMAND (e.g. sandboxctl exec -- ls -la)")
	}
	if strings.TrimSpace(p.Command) == "" {
		return p, UsageErrorf("exec: Provide a command to start.")
	}
	if o.YieldMs != nil && (*o.YieldMs < api.MinYieldMs || *o.YieldMs > api.MaxYieldMs) {
		return p, UsageErrorf("exec: --yield-ms %v is out of range: allowed %d..%d", *o.YieldMs, api.MinYieldMs, api.MaxYieldMs)
	}
	if o.Timeout != nil && *o.Timeout <= 0 {
		return p, UsageErrorf("exec: --timeout %v is out of range: it must be more than 0 seconds", *o.Timeout)
	}
	for _, kv := range o.Env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return p, UsageErrorf("exec: invalid --env %q: variables must be in KEY=VALUE format", kv)
		}
		if k == "" {
			return p, UsageErrorf("exec: invalid --env %q: the key is empty", kv)
		}
		if p.Env == nil {
			p.Env = map[string]string{}
		}
		if _, dup := p.Env[k]; dup {
			return p, UsageErrorf("exec: --env %s given twice", k)
		}
		p.Env[k] = v
	}
	return p, nil
}

// commandLine turns exec's arguments into the tool's command line: one
// argument is a shell command line as it is; several are an argv, each
// word quoted for a POSIX shell (shellword.Quote, the one quoting of argv
// words every front door and the guard use).
func commandLine(args []string) (string, error) {
	if len(args) <= 1 {
		return strings.Join(args, ""), nil
	}
	words := make([]string, len(args))
	for i, a := range args {
		q, err := shellword.Quote(a)
		if err == nil && strings.ContainsAny(a, "\n\t") {
			// shellword writes them in double quotes; the CLI keeps to
			// words a single-quoted POSIX word carries, as it always did.
			err = fmt.Errorf("%q: a newline or tab", a)
		}
		if err != nil {
			return "", UsageErrorf("exec: argument %d (%q) cannot be passed as a word of its own (%v); pass the whole command as one shell command line instead", i+1, a, err)
		}
		words[i] = q
	}
	return strings.Join(words, " "), nil
}

// RunExec runs opts.Command through the daemon's exec tool, prints the
// result and returns an *ExitError carrying the command's exit code when it
// is not 0.
func RunExec(ctx context.Context, c *CLI, opts ExecOptions) error {
	p, err := opts.Params()
	if err != nil {
		return err
	}
	settings, cfg, err := c.execSettings()
	if err != nil {
		return err
	}
	host := p.Host
	if host == "" && !p.Elevated {
		host = settings.Host
	}
	if (host == "gateway" || p.Elevated) && settings.Cwd == "" {
		// The daemon's cwd is wherever it was first started; a user at a
		// shell means the directory they are in.
		if p.Workdir == "" {
			if wd, err := os.Getwd(); err == nil {
				p.Workdir = wd
			}
		} else if !filepath.IsAbs(p.Workdir) {
			if abs, err := filepath.Abs(p.Workdir); err == nil {
				p.Workdir = abs
			}
		}
	}
	client, err := c.Client(cfg)
	if err != nil {
		return err
	}
	waiting := !c.JSON && opts.YieldMs == nil && !opts.Background
	if !waiting && (opts.Stdin || opts.TTY) {
		return UsageErrorf("exec: -i and -t need a waiting exec: they cannot be combined with --json, --yield-ms or -d")
	}
	if !c.JSON && opts.YieldMs == nil {
		// For people and scripts a workdir that cannot be used is an
		// error, not the tool's warning and fallback.
		p.StrictWorkdir = true
	}
	if waiting && opts.Stdin && opts.TTY && !isTerminal(c.In) {
		// As docker exec -it: raw mode and a window size need a terminal;
		// a pipe under -it would leave the command waiting for ever.
		return &ExitError{Code: 1, Err: errors.New("the input device is not a TTY")}
	}
	if waiting {
		if p.Timeout == nil && settings.TimeoutSec > 0 {
			// The run is a session the CLI follows; the foreground timeout
			// still applies to it.
			t := float64(settings.TimeoutSec)
			p.Timeout = &t
		}
		return runWaiting(ctx, c, client, p, forwardsStdin(c.In, opts.Stdin, opts.TTY), opts.TTY)
	}
	raw, err := client.ExecRaw(ctx, p)
	if err != nil {
		if p.StrictWorkdir {
			return startError(ctx, err)
		}
		return interrupted(ctx, err)
	}
	var res api.Result
	if err := json.Unmarshal(raw, &res); err != nil {
		return fmt.Errorf("exec: decode the daemon's answer: %w", err)
	}
	if c.JSON {
		if err := writeRaw(c.Out, raw); err != nil {
			return err
		}
	} else {
		switch {
		case opts.Background && status(res) == api.StatusRunning:
			// -d: the session id alone, for scripts.
			id := res.Details.SessionID
			printWarnings(c.Err, res)
			if _, err := fmt.Fprintln(c.Out, id); err != nil {
				return err
			}
		case status(res) == api.StatusDenied:
			if err := printText(c.Err, res); err != nil {
				return err
			}
		default:
			if err := printText(c.Out, res); err != nil {
				return err
			}
		}
	}
	if code := ExecExitCode(res); code != 0 {
		return &ExitError{Code: code}
	}
	return nil
}

// isTerminal reports whether in is a terminal.
func isTerminal(in io.Reader) bool {
	f, ok := in.(*os.File)
	return ok && term.IsTerminal(f.Fd())
}

// interrupted turns the error of a request that the user interrupted
// (Ctrl-C) into exit code 130 with what became of the command: the daemon
// keeps a run whose caller went away in the background.
func interrupted(ctx context.Context, err error) error {
	if ctx.Err() == nil || !errors.Is(err, context.Canceled) {
		return err
	}
	return &ExitError{Code: 130, Err: errors.New("interrupted; the command may go on in the background: see 'sandboxctl process list'")}
}

// ExecExitCode maps an exec result to a process exit code, from how its
// command ended (api.Details.Exit):
//   - exited: its exit code;
//   - still running, approval-pending: 0 (the run goes on, or waits for a human);
//   - denied: 1;
//   - timeout: 124 (as coreutils timeout); killed, signaled: 128+N for
//     signal N (as a shell reports it); lost: 1.
func ExecExitCode(res api.Result) int {
	exit, ok := res.Details.Exit()
	if !ok {
		switch res.Details.Status {
		case api.StatusRunning, api.StatusCompleted:
			return 0
		}
		return 1
	}
	switch exit.Reason {
	case api.ExitExited:
		return exit.Code
	case api.ExitApprovalPending:
		return 0
	case api.ExitTimeout:
		return 124
	case api.ExitKilled, api.ExitSignaled:
		if n := SignalNumber(exit.Signal); n > 0 {
			return 128 + n
		}
	}
	return 1
}

func status(res api.Result) string { return res.Details.Status }

// printText writes the result's text, ending with a newline.
func printText(w io.Writer, res api.Result) error {
	var b strings.Builder
	for i, ct := range res.Content {
		if i > 0 {
			b.WriteString("\n")
		}
		b.WriteString(ct.Text)
	}
	text := b.String()
	if text != "" && !strings.HasSuffix(text, "\n") {
		text += "\n"
	}
	_, err := io.WriteString(w, text)
	return err
}

func writeRaw(w io.Writer, raw []byte) error {
	if _, err := w.Write(raw); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}

// SignalNumber is the number of a signal name like "SIGKILL" (0 if unknown).
func SignalNumber(name string) int {
	name = strings.ToUpper(strings.TrimSpace(name))
	if name != "" && !strings.HasPrefix(name, "SIG") {
		name = "SIG" + name
	}
	return int(unix.SignalNum(name))
}
