package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/term"

	"github.com/sandboxctl/sandboxctl/api"
	"github.com/sandboxctl/sandboxctl/internal/apiclient"
)

// Exit codes of a waiting exec beyond the command's own (as docker exec and
// coreutils timeout use them).
const (
	ExitTimeout     = 124 // the timeout killed the command
	ExitOwnFailure  = 125 // sandboxctl itself failed, or the run failed without a code
	ExitCannotRun   = 126 // the command could not start (its workdir, environment, ...)
	ExitNotFound    = 127 // the command's program was not found
	ExitInterrupted = 130 // Ctrl-C ended the wait (and the command)
)

// stdinChunk is the most stdin one read takes; stdinBatch the most one
// write to the command carries.
const (
	stdinChunk = 64 * 1024
	stdinBatch = 1 << 20
)

// killWait bounds the wait for the exit frame after a Ctrl-C killed the
// command.
const killWait = 15 * time.Second

// waiter is one waiting exec: the command runs as a session the CLI follows
// to its end, forwarding stdin (-i) and the terminal size (-t).
type waiter struct {
	c      *CLI
	client *apiclient.Client
	p      api.ExecParams
	stdin  bool // -i
	tty    bool // -t
	id     string
	// eofAtOnce: the daemon gives the command EOF on stdin at its start
	// (a foreground run without a PTY); nothing of the CLI's stdin goes.
	eofAtOnce bool
	begun     bool // stdin and the terminal are being forwarded
	// stdinErr is why the CLI's stdin did not reach the command whole
	// (an error of *error): the exec then never exits 0.
	stdinErr atomic.Pointer[error]
	// listed: the session outlived the exec's yield window (or waits for
	// approval) and so is listed until it is removed.
	listed bool
	// restore puts the terminal back (startTerminal).
	restore func()
}

// runWaiting runs p and follows its output to the end: stdout to the
// CLI's stdout, stderr to its stderr, exit with the command's code. It is
// one streamed exec (POST /v1/tools/exec with "stream" and "raw"): the
// frames of the command's exact bytes and its exit, then the tool's
// result. A command that outlives the stream's yield window (or waits for
// approval) is followed on as its session, and removed once it ended.
// Stdin, resize and Ctrl-C (kill) reach the session through the process
// tool. Ctrl-C kills the remote tree and exits 130; a second Ctrl-C leaves
// at once.
func runWaiting(ctx context.Context, c *CLI, client *apiclient.Client, p api.ExecParams, stdin, tty bool) error {
	// The whole output, byte for byte: a slow stdout holds the command
	// back instead of losing output.
	p.Raw = true
	p.PTY = p.PTY || tty
	if tty {
		// Start at the terminal's size: a command may read it at once.
		if in, ok := c.In.(*os.File); ok && term.IsTerminal(in.Fd()) {
			if ws, err := term.GetWinsize(in.Fd()); err == nil && ws.Width > 0 && ws.Height > 0 {
				p.Cols, p.Rows = int(ws.Width), int(ws.Height)
			}
		}
	}
	if stdin && !p.PTY && isDevNull(c.In) {
		stdin = false // nothing to forward but its EOF, which the daemon gives
	}
	w := &waiter{c: c, client: client, stdin: stdin, tty: tty, eofAtOnce: !stdin && !p.PTY, restore: func() {}}
	if !w.eofAtOnce && p.YieldMs == nil {
		// An explicit window keeps the command's stdin open for the CLI
		// to forward (or close) and waits as long as the tool lets one
		// call wait.
		y := float64(api.MaxYieldMs)
		p.YieldMs = &y
	}
	w.p = p
	// The stream and the helpers outlive a Ctrl-C: after it, the kill's
	// exit frame is still read.
	life, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	defer func() { w.restore() }()
	// The first exec of a sandbox may build its image and create its
	// container before it answers.
	end := c.stepProgress().step("starting the command")
	stopSteps := followSteps(ctx, c, client, p)
	fs, err := w.startStream(ctx, life, cancel)
	stopSteps()
	end()
	if err != nil {
		return startError(ctx, err)
	}
	err = w.follow(ctx, life, cancel, fs)
	if se := w.stdinErr.Load(); se != nil && err == nil {
		return &ExitError{Code: ExitOwnFailure, Err: fmt.Errorf("exec: the command did not get all of its stdin: %w", *se)}
	}
	return err
}

// startStream sends the streamed exec on life; a Ctrl-C before the daemon
// answered ends the request (the command, if it started, goes on in the
// background, as the daemon keeps the run of a caller that went away).
func (w *waiter) startStream(ctx, life context.Context, cancel context.CancelFunc) (*apiclient.FrameStream, error) {
	// On this goroutine, not one of its own: the request's encoding would
	// grow a fresh goroutine's stack, and handing the answer over costs a
	// switch. A Ctrl-C cancels life, which ends the request.
	stop := context.AfterFunc(ctx, cancel)
	fs, err := w.client.ExecStream(life, w.p)
	if !stop() {
		if fs != nil {
			_ = fs.Close()
		}
		return nil, fmt.Errorf("exec: %w", ctx.Err())
	}
	return fs, err
}

// begin starts forwarding, once the session id is known: the terminal
// (raw mode, its size), and stdin (-i) or its EOF.
func (w *waiter) begin(life context.Context) error {
	if w.begun {
		return nil
	}
	w.begun = true
	if w.tty {
		restore, err := w.startTerminal(life)
		if err != nil {
			return err
		}
		w.restore = restore
	}
	switch {
	case w.stdin:
		go w.pumpStdin(life)
	case !w.eofAtOnce:
		return w.closeStdin(life)
	}
	return nil
}

func (w *waiter) follow(ctx, life context.Context, cancel context.CancelFunc, fs *apiclient.FrameStream) error {
	var (
		off      int64
		exit     *api.StreamFrame
		res      *api.Result
		killedAt time.Time
		killing  bool
	)
	kill := func() {
		if !killing && w.id != "" {
			killing = true
			go w.kill(life)
		}
	}
	for {
		streamCtx, endStream := context.WithCancel(life)
		frames := make(chan frameOrErr)
		go readFrames(streamCtx, fs, frames)
	read:
		for {
			var (
				fe frameOrErr
				ok = true
			)
			select {
			case fe, ok = <-frames:
			case <-ctx.Done():
				if killedAt.IsZero() {
					killedAt = time.Now()
					fmt.Fprintf(w.c.Err, "sandboxctl: interrupted; killing session %s (Ctrl-C again to leave it)\n", w.id)
					kill()
					go func() {
						time.Sleep(killWait)
						cancel()
					}()
				}
				ctx = context.Background() // report once
				continue
			}
			if !ok || fe.err != nil {
				if life.Err() != nil {
					endStream()
					_ = fs.Close()
					return &ExitError{Code: ExitInterrupted, Err: fmt.Errorf("the command did not end within %s of the kill; it may still run as session %s", killWait, w.id)}
				}
				if fe.err != nil && !errors.Is(fe.err, io.EOF) {
					endStream()
					_ = fs.Close()
					return &ExitError{Code: ExitOwnFailure, Err: fmt.Errorf("exec: session %s: %w", w.id, fe.err)}
				}
				break read // the daemon ended the stream early: resume from off
			}
			f := fe.f
			switch f.Type {
			case api.FrameStart:
				if w.id == "" {
					w.id = f.SessionID
					if !killedAt.IsZero() {
						kill()
					}
					if err := w.begin(life); err != nil {
						endStream()
						_ = fs.Close()
						return err
					}
				}
			case api.FrameStdout:
				_, _ = w.c.Out.Write(f.Bytes)
			case api.FrameStderr:
				_, _ = w.c.Err.Write(f.Bytes)
			case api.FrameDropped:
				fmt.Fprintf(w.c.Err, "sandboxctl: [... %d bytes of output dropped: more than the session keeps ...]\n", f.Lost)
			case api.FrameExit:
				exit = &f
				if w.listed {
					break read // a session stream ends with the exit
				}
			case api.FrameResult:
				res = f.Result
				break read
			case api.FrameError:
				endStream()
				_ = fs.Close()
				return &ExitError{Code: ExitOwnFailure, Err: fmt.Errorf("exec: %s", f.Error)}
			}
			if f.Offset != nil {
				off = *f.Offset + int64(len(f.Bytes)) + f.Lost
			}
		}
		endStream()
		_ = fs.Close()
		if res != nil {
			printWarnings(w.c.Err, *res)
			if done, err := w.settle(life, *res, exit); done {
				return err
			}
			res = nil
		}
		if exit != nil {
			break
		}
		if w.id == "" {
			return &ExitError{Code: ExitOwnFailure, Err: errors.New("exec: the daemon answered without a session id")}
		}
		if !killedAt.IsZero() {
			kill()
		}
		w.listed = true // the daemon keeps a run it no longer streams
		var err error
		fs, err = w.client.SessionStream(life, w.p.AgentID, w.p.SessionKey, w.id, off, true)
		if err != nil {
			return &ExitError{Code: ExitOwnFailure, Err: fmt.Errorf("exec: follow session %s: %w", w.id, err)}
		}
	}
	if w.listed {
		w.remove(life)
	}
	if !killedAt.IsZero() {
		return &ExitError{Code: ExitInterrupted}
	}
	return exitFrameError(w.c.Err, *exit)
}

// settle takes the streamed exec's result: done with the CLI's answer when
// the command will not run on (denied, or ended without an exit frame), else
// the session to follow on (it outlived the yield window, or waits for
// approval).
func (w *waiter) settle(life context.Context, res api.Result, exit *api.StreamFrame) (done bool, err error) {
	id := res.Details.SessionID
	switch status(res) {
	case api.StatusDenied:
		_ = printText(w.c.Err, res)
		return true, &ExitError{Code: 1}
	case api.StatusApprovalPending:
		_ = printText(w.c.Err, res)
		if id == "" {
			return true, nil // nothing will run it by itself
		}
	case api.StatusRunning:
	default:
		if exit != nil {
			return false, nil
		}
		_ = printText(w.c.Err, res)
		return true, &ExitError{Code: ExecExitCode(res)}
	}
	if id == "" {
		return true, &ExitError{Code: ExitOwnFailure, Err: errors.New("exec: the daemon answered without a session id")}
	}
	w.id, w.listed = id, true
	if w.eofAtOnce {
		// A host that watches for input waits kept stdin open: close it,
		// as a foreground run's.
		if err := w.closeStdin(life); err != nil {
			return true, err
		}
	}
	if err := w.begin(life); err != nil {
		return true, err
	}
	return false, nil
}

// isDevNull reports whether in is /dev/null (`</dev/null`, or the stdin
// of a process started without one).
func isDevNull(in io.Reader) bool {
	f, ok := in.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	if err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		return false
	}
	null, err := os.Stat(os.DevNull)
	return err == nil && os.SameFile(fi, null)
}

type frameOrErr struct {
	f   api.StreamFrame
	err error
}

// readFrames sends fs's frames to out until an error, then the error, or
// until ctx ends.
func readFrames(ctx context.Context, fs *apiclient.FrameStream, out chan<- frameOrErr) {
	for {
		f, err := fs.Next()
		select {
		case out <- frameOrErr{f: f, err: err}:
		case <-ctx.Done():
			return
		}
		if err != nil {
			return
		}
	}
}

// startError maps a failed start to the exit code a shell (and docker
// exec) gives: 127 for a program that is not found, 126 for another
// refusal of the command's input (a workdir that cannot be used, an
// environment too large), 2 for other bad input, 125 when sandboxctl
// itself failed.
func startError(ctx context.Context, err error) error {
	if err = interrupted(ctx, err); errors.As(err, new(*ExitError)) {
		return err
	}
	var apiErr *apiclient.APIError
	switch {
	case !errors.As(err, &apiErr) || !cerrdefs.IsInvalidArgument(err):
		return &ExitError{Code: ExitOwnFailure, Err: err}
	case errors.Is(err, api.ErrCommandNotFound):
		return &ExitError{Code: ExitNotFound, Err: err}
	case apiErr.Field == "start" || apiErr.Field == "workdir":
		return &ExitError{Code: ExitCannotRun, Err: err}
	default:
		return &ExitError{Code: 2, Err: err} // bad usage
	}
}

// exitFrameError maps the exit frame to the CLI's exit (api.Exit): the
// command's code, 124 for a timeout, 128+N for signal N, 125 for another
// failure (its reason on stderr).
func exitFrameError(stderr io.Writer, f api.StreamFrame) error {
	exit, _ := f.Exit()
	code := ExitOwnFailure
	switch exit.Reason {
	case api.ExitExited:
		if exit.Code == 0 {
			return nil
		}
		return &ExitError{Code: exit.Code}
	case api.ExitTimeout:
		code = ExitTimeout
	case api.ExitKilled, api.ExitSignaled:
		if n := SignalNumber(exit.Signal); n > 0 {
			code = 128 + n
		}
	}
	if f.Reason != "" {
		fmt.Fprintf(stderr, "sandboxctl: %s\n", f.Reason)
	}
	return &ExitError{Code: code}
}

func (w *waiter) process(ctx context.Context, p api.ProcessParams) (api.Result, error) {
	p.SessionID, p.AgentID, p.SessionKey = w.id, w.p.AgentID, w.p.SessionKey
	res, err := w.client.Process(ctx, p)
	if err == nil {
		err = res.Err()
	}
	return res, err
}

// forwardsStdin reports whether a waiting exec forwards in, the CLI's
// stdin (issue 15): always with -i; without it, when in is not a terminal
// (a pipe, a file, /dev/null: its EOF reaches the command) unless -t asks
// for a PTY, where an end of input is not an EOF; a terminal only with -i.
func forwardsStdin(in io.Reader, interactive, tty bool) bool {
	if interactive {
		return true
	}
	if tty || in == nil {
		return false
	}
	f, ok := in.(*os.File)
	return !ok || !term.IsTerminal(f.Fd())
}

// closeStdin gives the command EOF on stdin (a terminal stdin without -i).
func (w *waiter) closeStdin(ctx context.Context) error {
	_, err := w.process(ctx, api.ProcessParams{Action: "write", EOF: true})
	if err == nil || cerrdefs.IsInvalidArgument(err) {
		return nil // a command that already ended has no stdin to close
	}
	// It may have ended while stdin was being closed: only a command that
	// still runs with its stdin open is a failure.
	if res, perr := w.process(ctx, api.ProcessParams{Action: "poll"}); perr == nil && status(res) != api.StatusRunning {
		return nil
	}
	return &ExitError{Code: ExitOwnFailure, Err: fmt.Errorf("exec: close stdin of session %s: %w", w.id, err)}
}

// pumpStdin forwards the CLI's stdin to the command byte for byte, then
// EOF (not on a PTY, where an end of input is not an EOF). What was read
// while a write was under way goes with the next one (up to stdinBatch),
// so a fast stdin costs few requests and a terminal's keys go at once.
func (w *waiter) pumpStdin(ctx context.Context) {
	chunks := make(chan []byte, stdinBatch/stdinChunk)
	go func() {
		defer close(chunks)
		for {
			buf := make([]byte, stdinChunk)
			n, err := w.c.In.Read(buf)
			if n > 0 {
				select {
				case chunks <- buf[:n]:
				case <-ctx.Done():
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	for {
		data, open := <-chunks
		for open && len(data) < stdinBatch {
			select {
			case more, ok := <-chunks:
				data, open = append(data, more...), ok
				continue
			default:
			}
			break
		}
		eof := !open && !w.tty
		if len(data) > 0 || eof {
			if err := w.writeStdin(ctx, data, eof); err != nil {
				w.stdinFailed(ctx, err)
				return
			}
		}
		if !open {
			return
		}
	}
}

// writeStdin sends data (and EOF) to the command. The daemon holds a
// write back while the command has not taken its earlier input; after a
// while it answers 504 with nothing of data written, and the same data is
// sent again: a command that reads late waits for its input, as under
// docker exec -i.
func (w *waiter) writeStdin(ctx context.Context, data []byte, eof bool) error {
	for {
		_, err := w.client.WriteStdin(ctx, w.p.AgentID, w.p.SessionKey, w.id, data, eof)
		if err == nil || !cerrdefs.IsDeadlineExceeded(err) || ctx.Err() != nil {
			return err
		}
	}
}

// stdinFailed handles input that could not be written. A command that
// ended or closed its stdin (400, 404: the session's answer) takes no more,
// as a pipe whose reader is gone. Any other failure is said on stderr, the
// command's stdin is closed so that it can end, and the exec will not exit
// 0: input was lost.
func (w *waiter) stdinFailed(ctx context.Context, err error) {
	if cerrdefs.IsInvalidArgument(err) || cerrdefs.IsNotFound(err) || ctx.Err() != nil {
		return
	}
	w.stdinErr.Store(&err)
	fmt.Fprintf(w.c.Err, "sandboxctl: stdin: %v; closing the command's stdin\n", err)
	_, _ = w.client.WriteStdin(ctx, w.p.AgentID, w.p.SessionKey, w.id, nil, true)
}

// kill ends the command's whole tree (Ctrl-C).
func (w *waiter) kill(ctx context.Context) {
	if _, err := w.process(ctx, api.ProcessParams{Action: "kill"}); err != nil {
		fmt.Fprintf(w.c.Err, "sandboxctl: kill session %s: %v\n", w.id, err)
	}
}

// remove forgets the ended session: a waiting exec leaves nothing listed.
func (w *waiter) remove(ctx context.Context) {
	_, _ = w.process(ctx, api.ProcessParams{Action: "remove"})
}

// startTerminal puts a terminal stdin in raw mode (with -i) and makes the
// session's PTY follow the window's size; the returned func restores it.
func (w *waiter) startTerminal(ctx context.Context) (func(), error) {
	in, ok := w.c.In.(*os.File)
	if !ok || !term.IsTerminal(in.Fd()) {
		return func() {}, nil
	}
	fd := in.Fd()
	restore := func() {}
	if w.stdin {
		st, err := term.SetRawTerminal(fd)
		if err != nil {
			return nil, &ExitError{Code: ExitOwnFailure, Err: fmt.Errorf("exec: raw terminal: %w", err)}
		}
		restore = func() { _ = term.RestoreTerminal(fd, st) }
	}
	resize := func() {
		ws, err := term.GetWinsize(fd)
		if err != nil || ws.Width == 0 || ws.Height == 0 {
			return
		}
		cols, rows := int(ws.Width), int(ws.Height)
		_, _ = w.process(ctx, api.ProcessParams{Action: "resize", Cols: &cols, Rows: &rows})
	}
	resize()
	winch := make(chan os.Signal, 1)
	signal.Notify(winch, syscall.SIGWINCH)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-winch:
				resize()
			}
		}
	}()
	return func() {
		signal.Stop(winch)
		restore()
	}, nil
}

// printWarnings writes a result's warnings to stderr.
func printWarnings(stderr io.Writer, res api.Result) {
	for _, w := range res.Details.Warnings {
		fmt.Fprintf(stderr, "sandboxctl: warning: %v\n", w)
	}
}
