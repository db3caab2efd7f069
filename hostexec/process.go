package hostexec

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/sandboxctl/sandboxctl/envguard"
	"github.com/sandboxctl/sandboxctl/envknob"
	"github.com/sandboxctl/sandboxctl/internal/termsize"
	"github.com/sandboxctl/sandboxctl/sessions/hostapi"
)

// Errors returned by Process methods; test with errors.Is.
var (
	// ErrNotPTY is returned by Resize for a process without a terminal.
	ErrNotPTY = errors.New("process has no terminal")
	// ErrNoStdin is returned by Write and CloseStdin when stdin was not kept
	// open (StartSpec.KeepStdin false) or was already closed.
	ErrNoStdin = errors.New("stdin is closed")
	// ErrExited is returned by Write and CloseStdin once the process exited.
	ErrExited = errors.New("process has exited")
)

// Process is a started command: a hostapi.Process. Callers must read Stdout (and Stderr, when not
// nil) to io.EOF: that releases the descriptors.
type Process struct {
	r       *Runner
	cmd     *exec.Cmd
	pid     int
	tag     string
	isPTY   bool
	warning string
	// confineWarning: StartSpec.Confine was not honoured (Prepared.Warning).
	confineWarning string

	ptmx   *os.File // PTY master; nil for pipes
	stdout *outputReader
	stderr *outputReader // nil for a PTY

	stdinMu sync.Mutex
	stdin   *os.File // pipe write end; nil when not kept or closed

	done     chan struct{} // closed once the process was reaped
	exitCode int
	signal   string
	waitErr  error

	killMu sync.Mutex // serialises Kill
}

// Prepared is a checked command with everything a process needs to start
// it: Start forks it itself; the host supervisor (package hostsup) forks it
// in a process that outlives the daemon.
type Prepared struct {
	// Argv is SHELL -c COMMAND.
	Argv []string
	// Env is the full environment: the Runner's BaseEnv, the request's Env
	// on top, and TERM for a terminal. The run tag is not in it.
	Env []string
	Dir string
	// Tag is the run tag (StartSpec.Tag, or a fresh one).
	Tag string
	// Cols and Rows are the terminal size (defaults applied).
	Cols, Rows int
	// Warning is non-empty when StartSpec.Confine could not be honoured (no
	// Landlock): the command runs unconfined, and this says so.
	Warning string
}

// Prepare checks spec and builds what starting it takes. Of the start spec
// a Runner uses Command (run as `SHELL -c Command`), Env (over the Runner's
// BaseEnv, checked by the caller with envguard; PATH is refused here
// regardless), Dir ("" = the daemon's own), PTY with Cols x Rows (default
// 120x30, TERM=xterm-256color; pipes and Process.Warning when no PTY can be
// had), KeepStdin (without it a pipe-run command reads EOF from /dev/null at
// once; a PTY is always writable) and Tag ([A-Za-z0-9_.-], at most 64
// bytes; "" = a random one), exported as SANDBOXCTL_RUN=Tag to every
// descendant, which Kill sweeps.
func (r *Runner) Prepare(spec hostapi.StartSpec) (Prepared, error) {
	if strings.TrimSpace(spec.Command) == "" {
		return Prepared{}, fmt.Errorf("hostexec: start: empty command: %w", os.ErrInvalid)
	}
	for k := range spec.Env {
		if k == "PATH" {
			return Prepared{}, fmt.Errorf("hostexec: start: PATH may not be overridden on the gateway: %w", os.ErrInvalid)
		}
	}
	tag := spec.Tag
	if tag == "" {
		tag = NewTag()
	} else if !ValidTag(tag) {
		return Prepared{}, fmt.Errorf("hostexec: start: invalid run tag %q: %w", tag, os.ErrInvalid)
	}
	cols, rows := spec.Cols, spec.Rows
	if cols <= 0 {
		cols = termsize.DefaultCols
	}
	if rows <= 0 {
		rows = termsize.DefaultRows
	}
	if cols > 0xffff || rows > 0xffff {
		return Prepared{}, fmt.Errorf("hostexec: start: terminal size %dx%d out of range: %w", cols, rows, os.ErrInvalid)
	}
	_, base := r.env()
	env := envguard.Merge(base, spec.Env)
	if spec.PTY {
		env = envguard.Merge(env, map[string]string{"TERM": "xterm-256color"})
	}
	pr := Prepared{Argv: []string{r.shell, "-c", spec.Command}, Env: env, Dir: spec.Dir, Tag: tag, Cols: cols, Rows: rows}
	if spec.Confine != "" && !filepath.IsAbs(spec.Confine) {
		return Prepared{}, fmt.Errorf("hostexec: start: confine directory %q is not absolute: %w", spec.Confine, os.ErrInvalid)
	}
	if r.envelope != nil {
		// Fail closed: no envelope, no command.
		abi, err := r.landlockABI()
		if err == nil && abi < envelopeMinABI {
			err = fmt.Errorf("Landlock ABI %d, need %d", abi, envelopeMinABI)
		}
		if err != nil {
			return Prepared{}, fmt.Errorf("hostexec: start: %w: %w", ErrEnvelopeUnavailable, err)
		}
		argv := append([]string{r.launcher, EnvelopeArg}, r.envelope.launcherArgs(spec.Confine)...)
		pr.Argv = append(append(argv, "--", r.shell), pr.Argv...)
		return pr, nil
	}
	if spec.Confine != "" {
		if _, err := r.landlockABI(); err != nil {
			pr.Warning = fmt.Sprintf("not confined to %s (%v): the external-directory check was advisory only for this command", spec.Confine, err)
			return pr, nil
		}
		if r.launcher == "" {
			return Prepared{}, fmt.Errorf("hostexec: start: the command must run confined to %s but the runner has no launcher: %w", spec.Confine, os.ErrInvalid)
		}
		pr.Argv = append([]string{r.launcher, ConfineArg, spec.Confine, r.shell}, pr.Argv...)
	}
	return pr, nil
}

// Start starts spec.Command. ctx bounds the start only: the process outlives
// it and ends by itself or through Kill. The returned Process must be waited
// on (Wait) and its output read to EOF.
func (r *Runner) Start(ctx context.Context, spec hostapi.StartSpec) (_ *Process, err error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("hostexec: start: %w", err)
	}
	pr, err := r.Prepare(spec)
	if err != nil {
		return nil, err
	}
	tag, cols, rows := pr.Tag, pr.Cols, pr.Rows
	cmd := exec.Command(pr.Argv[0], pr.Argv[1:]...)
	cmd.Dir = pr.Dir
	_, base := r.env()
	env := envguard.Merge(base, spec.Env) // TERM only where a PTY is had
	own := map[string]string{string(envknob.RunTag): tag}

	p := &Process{r: r, cmd: cmd, tag: tag, done: make(chan struct{}), confineWarning: pr.Warning}
	if spec.PTY {
		ptmx, tty, perr := r.openPTY()
		if perr == nil {
			if ptmx, perr = pollableFile(ptmx); perr == nil {
				perr = termsize.Set(ptmx, cols, rows)
			}
			if perr != nil {
				if ptmx != nil {
					_ = ptmx.Close()
				}
				_ = tty.Close()
			}
		}
		if perr == nil {
			own["TERM"] = "xterm-256color"
			cmd.Env = envguard.Merge(env, own)
			cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
			// A new session with the terminal as its controlling tty (fd 0
			// in the child): the shell is session and group leader, so its
			// pgid is its pid, as with Setpgid on the pipe path.
			cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
			serr := cmd.Start()
			_ = tty.Close()
			if serr != nil {
				_ = ptmx.Close()
				return nil, fmt.Errorf("hostexec: start %s: %w", r.shell, serr)
			}
			p.isPTY = true
			p.ptmx = ptmx
			p.stdout = newOutputReader(ptmx)
			p.started()
			return p, nil
		}
		p.warning = fmt.Sprintf("PTY unavailable (%v); running without a terminal (pipes)", perr)
		r.logf("hostexec: %s", p.warning)
	}

	cmd.Env = envguard.Merge(env, own)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var childEnds []*os.File
	defer func() {
		for _, f := range childEnds {
			_ = f.Close()
		}
	}()
	var parentEnds []*os.File
	defer func() {
		if err != nil {
			for _, f := range parentEnds {
				_ = f.Close()
			}
		}
	}()
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("hostexec: stdout pipe: %w", err)
	}
	parentEnds, childEnds = append(parentEnds, outR), append(childEnds, outW)
	errR, errW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("hostexec: stderr pipe: %w", err)
	}
	parentEnds, childEnds = append(parentEnds, errR), append(childEnds, errW)
	cmd.Stdout, cmd.Stderr = outW, errW
	if spec.KeepStdin {
		inR, inW, perr := os.Pipe()
		if perr != nil {
			return nil, fmt.Errorf("hostexec: stdin pipe: %w", perr)
		}
		parentEnds, childEnds = append(parentEnds, inW), append(childEnds, inR)
		cmd.Stdin = inR
		p.stdin = inW
	} // else cmd.Stdin nil: os/exec connects /dev/null.
	if err = cmd.Start(); err != nil {
		return nil, fmt.Errorf("hostexec: start %s: %w", r.shell, err)
	}
	p.stdout = newOutputReader(outR)
	p.stderr = newOutputReader(errR)
	p.started()
	return p, nil
}

// started records the pid and reaps the process in the background: Wait and
// Kill only read what this goroutine publishes by closing p.done.
func (p *Process) started() {
	p.pid = p.cmd.Process.Pid
	go func() {
		err := p.cmd.Wait()
		p.exitCode, p.signal, p.waitErr = exitStatus(p.cmd.ProcessState, err)
		p.stdinMu.Lock()
		if p.stdin != nil {
			_ = p.stdin.Close()
			p.stdin = nil
		}
		p.stdinMu.Unlock()
		p.stdout.exited(p.r.outputDrain)
		if p.stderr != nil {
			p.stderr.exited(p.r.outputDrain)
		}
		close(p.done)
	}()
}

// exitStatus turns a reaped process's state into (code, signal name).
func exitStatus(st *os.ProcessState, waitErr error) (int, string, error) {
	if st == nil {
		return -1, "", fmt.Errorf("hostexec: wait: %w", waitErr)
	}
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		name := unix.SignalName(ws.Signal())
		if name == "" {
			name = fmt.Sprintf("SIG%d", int(ws.Signal()))
		}
		return -1, name, nil
	}
	return st.ExitCode(), "", nil
}

// PID is the shell's pid; it is also the id of the process group (and, for
// a PTY, of the session) the command runs in.
func (p *Process) PID() int { return p.pid }

// Tag is the run tag exported as SANDBOXCTL_RUN.
func (p *Process) Tag() string { return p.tag }

// IsPTY reports whether the process runs in a pseudo-terminal.
func (p *Process) IsPTY() bool { return p.isPTY }

// Warning is non-empty when a PTY was asked for but the command runs with
// pipes; it says why.
func (p *Process) Warning() string { return p.warning }

// Warnings is Warning as a list (empty when there is none), the shape the
// sessions layer shows in a result.
func (p *Process) Warnings() []string {
	var out []string
	for _, w := range []string{p.confineWarning, p.warning} {
		if w != "" {
			out = append(out, w)
		}
	}
	return out
}

// Stdout is the output stream (stdout and stderr merged for a PTY). It
// returns io.EOF once the command exited and every writer closed it (a PTY's
// EIO at exit is reported as io.EOF). If something the command left running
// in the background still holds the stream open, the reader keeps delivering
// output for Options.OutputDrain after the exit, then returns what is
// already buffered and io.EOF, so a leftover such as `nohup sleep 600 &`
// cannot wedge the caller. Call Kill to end such leftovers.
func (p *Process) Stdout() io.Reader { return p.stdout }

// Stderr is the error stream with the same EOF rules as Stdout, or nil for a
// PTY.
func (p *Process) Stderr() io.Reader {
	if p.stderr == nil {
		return nil
	}
	return p.stderr
}

// Write sends data to stdin: the PTY master, or the stdin pipe when the StartSpec
// kept it.
func (p *Process) Write(b []byte) (int, error) {
	if p.exited() {
		return 0, ErrExited
	}
	if p.isPTY {
		n, err := p.ptmx.Write(b)
		if err != nil {
			return n, fmt.Errorf("hostexec: write to terminal: %w", err)
		}
		return n, nil
	}
	p.stdinMu.Lock()
	in := p.stdin
	p.stdinMu.Unlock()
	if in == nil {
		return 0, ErrNoStdin
	}
	// The write may block while the pipe is full; it is not done under the
	// lock so that CloseStdin (and exit) can close the pipe and end it.
	n, err := in.Write(b)
	if err != nil {
		return n, fmt.Errorf("hostexec: write to stdin: %w", err)
	}
	return n, nil
}

// CloseStdin sends end-of-file: ^D (0x04) on a PTY, which the terminal's line
// discipline turns into EOF for a reader at the start of a line; on pipes it
// closes the stdin pipe.
func (p *Process) CloseStdin() error {
	if p.exited() {
		return ErrExited
	}
	if p.isPTY {
		if _, err := p.ptmx.Write([]byte{0x04}); err != nil {
			return fmt.Errorf("hostexec: send EOF to terminal: %w", err)
		}
		return nil
	}
	p.stdinMu.Lock()
	defer p.stdinMu.Unlock()
	if p.stdin == nil {
		return ErrNoStdin
	}
	err := p.stdin.Close()
	p.stdin = nil
	if err != nil {
		return fmt.Errorf("hostexec: close stdin: %w", err)
	}
	return nil
}

// Resize sets the terminal size; the child gets SIGWINCH.
func (p *Process) Resize(ctx context.Context, cols, rows int) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("hostexec: resize: %w", err)
	}
	if !p.isPTY {
		return fmt.Errorf("hostexec: resize: %w", ErrNotPTY)
	}
	if cols <= 0 || rows <= 0 || cols > 0xffff || rows > 0xffff {
		return fmt.Errorf("hostexec: resize: size %dx%d out of range: %w", cols, rows, os.ErrInvalid)
	}
	if err := termsize.Set(p.ptmx, cols, rows); err != nil {
		return fmt.Errorf("hostexec: resize: %w", err)
	}
	return nil
}

// pollableFile returns a non-blocking duplicate of f, registered with the
// runtime poller, and closes f. creack/pty hands out a PTY master that its
// own ioctls (through File.Fd) switched to blocking mode, where read
// deadlines do nothing; the output cut-off (see outputReader) needs them.
// On failure f is closed too.
func pollableFile(f *os.File) (*os.File, error) {
	defer func() { _ = f.Close() }()
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("pty master: %w", err)
	}
	nfd := -1
	var derr error
	if err := rc.Control(func(fd uintptr) {
		nfd, derr = unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0)
	}); err != nil {
		return nil, fmt.Errorf("pty master: %w", err)
	}
	if derr != nil {
		return nil, fmt.Errorf("pty master: dup: %w", derr)
	}
	if err := unix.SetNonblock(nfd, true); err != nil {
		_ = unix.Close(nfd)
		return nil, fmt.Errorf("pty master: set non-blocking: %w", err)
	}
	// os.NewFile sees O_NONBLOCK and registers the descriptor with the poller.
	return os.NewFile(uintptr(nfd), f.Name()), nil
}

// Wait blocks until the shell exited and returns its exit code, or -1 and
// the signal's name ("SIGKILL", "SIGTERM") when a signal ended it. It can be
// called any number of times; ctx only bounds this call.
func (p *Process) Wait(ctx context.Context) (exitCode int, signal string, err error) {
	select {
	case <-p.done:
		return p.exitCode, p.signal, p.waitErr
	case <-ctx.Done():
		return -1, "", fmt.Errorf("hostexec: wait: %w", ctx.Err())
	}
}

// Done is closed once the process exited and was reaped.
func (p *Process) Done() <-chan struct{} { return p.done }

func (p *Process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// NewTag returns a random run tag (16 hex digits).
func NewTag() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on Linux
	return hex.EncodeToString(b[:])
}

// ValidTag reports whether tag can be a run tag: [A-Za-z0-9_.-], 1 to 64 bytes.
func ValidTag(tag string) bool {
	if len(tag) == 0 || len(tag) > 64 {
		return false
	}
	for _, c := range []byte(tag) {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '.', c == '-':
		default:
			return false
		}
	}
	return true
}
