package sandbox

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"

	"github.com/sandboxctl/sandboxctl/api"
	"github.com/sandboxctl/sandboxctl/envknob"
	"github.com/sandboxctl/sandboxctl/internal/procfs"
	"github.com/sandboxctl/sandboxctl/internal/termsize"
	"github.com/sandboxctl/sandboxctl/sessions/hostapi"
)

// ExecOptions describe one command run through the Engine's exec API (the
// plain path).
type ExecOptions struct {
	Cmd []string
	Env []string // KEY=VALUE, on top of the container's env
	// Dir, PTY and KeepStdin are hostapi.StartSpec's, by the same names:
	// the working directory in the container, a pseudo-terminal, and stdin
	// kept open so Write/CloseStdin reach the process (without it the
	// process reads EOF at once).
	Dir       string
	User      string
	PTY       bool
	KeepStdin bool
	// Cols and Rows set the initial terminal size (default 120x30). API 1.41
	// ignores the create-time size, so the command is wrapped to set it with
	// stty before it starts, and resizes are retried.
	Cols, Rows int
	// Tag identifies the process tree for Kill; empty generates one. On the
	// supervisor path it is also the durable session id.
	Tag string
	// Meta is opaque caller data the supervisor keeps with the session
	// (e.g. the sessions layer's id and name); Sessions returns it after a
	// daemon restart. The plain path ignores it.
	Meta map[string]string
	// StartWait, when > 0, bounds the wait for the supervisor to confirm
	// the start once the sandbox is up (the caller's yield window or
	// timeout): a supervisor that does not answer by then fails the start
	// with ErrSupervisorNoAnswer, and the command never runs.
	StartWait time.Duration
}

// Exec is a command running in a sandbox through the Engine's exec API.
// It is a Process.
type Exec struct {
	m           *DockerEngine
	containerID string
	execID      string
	tag         string
	tty         bool

	pidOnce sync.Once
	pid     int // in the container

	att    client.HijackedResponse
	stdout *io.PipeReader
	stderr *io.PipeReader

	writeMu sync.Mutex

	streamDone chan struct{}
	done       chan struct{}
	exitCode   int
	waitErr    error

	killMu sync.Mutex
	killed string // signal name once Kill ran
}

// ExecIn starts a command in the container id (which must be running).
func (m *DockerEngine) ExecIn(ctx context.Context, containerID string, opts ExecOptions) (*Exec, error) {
	if len(opts.Cmd) == 0 {
		return nil, errors.New("sandbox exec: empty command")
	}
	tag := opts.Tag
	if tag == "" {
		tag = newTag()
	}
	cols, rows := opts.Cols, opts.Rows
	if cols <= 0 {
		cols = termsize.DefaultCols
	}
	if rows <= 0 {
		rows = termsize.DefaultRows
	}
	cmd := opts.Cmd
	env := append(append([]string{}, opts.Env...), string(envknob.RunTag)+"="+tag)
	if opts.PTY {
		// API 1.41 starts exec TTYs at 0x0; set the size before the command runs.
		cmd = append([]string{"sh", "-c", `stty rows "$1" cols "$2" 2>/dev/null; shift 2; exec "$@"`, "sh",
			strconv.Itoa(rows), strconv.Itoa(cols)}, cmd...)
		env = append(env, "TERM=xterm-256color")
	}
	user := opts.User
	if user == "" {
		u, err := m.execUser(ctx, containerID)
		if err != nil {
			return nil, err
		}
		user = u
	}
	created, err := m.cli.ExecCreate(ctx, containerID, client.ExecCreateOptions{
		Cmd: cmd, Env: env, WorkingDir: opts.Dir, User: user, TTY: opts.PTY,
		AttachStdin: opts.KeepStdin, AttachStdout: true, AttachStderr: true,
	})
	if err != nil {
		if isNotFound(err) {
			return nil, fmt.Errorf("sandbox exec: container %s: %w", short(containerID), ErrNotFound)
		}
		if isConflict(err) {
			// The Engine's "Container … is not running": it stopped between
			// the ensure and the exec. Nothing ran.
			return nil, fmt.Errorf("sandbox exec: %w: container %s stopped while the command was starting; nothing ran, run it again (%w)",
				ErrContainerGone, short(containerID), cerrdefs.ErrConflict)
		}
		return nil, m.classify("sandbox exec create", err)
	}
	att, err := m.cli.ExecAttach(ctx, created.ID, client.ExecAttachOptions{TTY: opts.PTY})
	if err != nil {
		return nil, m.classify("sandbox exec attach", err)
	}
	e := &Exec{m: m, containerID: containerID, execID: created.ID, tag: tag, tty: opts.PTY, att: att.HijackedResponse,
		streamDone: make(chan struct{}), done: make(chan struct{})}
	outR, outW := io.Pipe()
	e.stdout = outR
	var errW *io.PipeWriter
	if !opts.PTY {
		e.stderr, errW = io.Pipe()
	}
	go func() {
		var err error
		if opts.PTY {
			_, err = io.Copy(outW, e.att.Reader)
		} else {
			_, err = stdcopy.StdCopy(outW, errW, e.att.Reader)
		}
		if err == nil {
			err = io.EOF
		}
		outW.CloseWithError(err)
		if errW != nil {
			errW.CloseWithError(err)
		}
		close(e.streamDone)
	}()
	go e.monitor()
	return e, nil
}

func newTag() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// monitor waits for the exec to end: the stream's end is the fast signal,
// a slow ExecInspect poll catches a command whose output stays open because
// a background child holds it. Once the exec ended, the connection is closed
// (after a short drain) so readers see EOF.
func (e *Exec) monitor() {
	ctx := context.Background()
	poll := time.NewTicker(250 * time.Millisecond)
	defer poll.Stop()
	streamDone := e.streamDone
	backoff := 5 * time.Millisecond
	for {
		if streamDone != nil {
			select {
			case <-streamDone:
				streamDone = nil
			case <-poll.C:
			}
		} else {
			// The stream ended: the exit state follows within milliseconds
			// (or the process closed its output and runs on: back off).
			time.Sleep(backoff)
			backoff = min(2*backoff, 250*time.Millisecond)
		}
		insp, err := e.m.cli.ExecInspect(ctx, e.execID, client.ExecInspectOptions{})
		if err != nil {
			if isNotFound(err) { // container gone
				e.exitCode, e.waitErr = -1, fmt.Errorf("sandbox exec: container removed while the command ran: %w", ErrNotFound)
				break
			}
			if client.IsErrConnectionFailed(err) {
				e.exitCode, e.waitErr = -1, e.m.classify("sandbox exec inspect", err)
				break
			}
			continue
		}
		if insp.Running {
			continue
		}
		e.exitCode = insp.ExitCode
		break
	}
	select {
	case <-e.streamDone:
	case <-time.After(200 * time.Millisecond):
	}
	e.att.Close()
	<-e.streamDone
	close(e.done)
}

// PID is the command's pid inside the sandbox (what ps shows there): the
// meaning PID has on every path of every host. The Engine reports the host
// pid once the process started (so the first call may ask again for a short
// while), which this host's /proc translates when the Engine is local and
// the process is still in the container; 0 means it could not be learnt
// (the command already ended, or the Engine runs on another machine).
func (e *Exec) PID() int {
	e.pidOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		for delay := time.Millisecond; ; delay = min(2*delay, 50*time.Millisecond) {
			insp, err := e.m.cli.ExecInspect(ctx, e.execID, client.ExecInspectOptions{})
			if err == nil && insp.PID != 0 {
				e.pid = e.m.containerPID(e.containerID, insp.PID)
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-e.done:
				return
			case <-time.After(delay):
			}
		}
	})
	return e.pid
}

// containerPID translates hostPID, a process of container id on the Engine's
// host, into its pid inside the container; 0 when it cannot: the Engine is
// not on this host, or the process is gone (or is not in that container).
func (m *DockerEngine) containerPID(id string, hostPID int) int {
	if !strings.HasPrefix(m.cli.DaemonHost(), "unix://") || id == "" {
		return 0
	}
	cg, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(hostPID), "cgroup"))
	if err != nil || !strings.Contains(string(cg), id) {
		return 0
	}
	pid, err := procfs.NSPid("/proc", hostPID)
	if err != nil {
		return 0
	}
	return pid
}

// ID is the Engine's exec id.
func (e *Exec) ID() string { return e.execID }

// Tag is the value of SANDBOXCTL_RUN shared by the command's process tree.
func (e *Exec) Tag() string { return e.tag }

// Stdout is the output stream (stdout and stderr merged for a TTY).
func (e *Exec) Stdout() io.Reader { return e.stdout }

// Stderr is the error stream, nil for a TTY.
func (e *Exec) Stderr() io.Reader {
	if e.stderr == nil {
		return nil
	}
	return e.stderr
}

// Write sends p to the command's stdin.
func (e *Exec) Write(p []byte) (int, error) {
	e.writeMu.Lock()
	defer e.writeMu.Unlock()
	select {
	case <-e.done:
		return 0, errors.New("sandbox exec: process has exited")
	default:
	}
	return e.att.Conn.Write(p)
}

// CloseStdin sends EOF: a half-close of the stream, or ^D on a TTY.
func (e *Exec) CloseStdin() error {
	if e.tty {
		_, err := e.Write([]byte{0x04})
		return err
	}
	e.writeMu.Lock()
	defer e.writeMu.Unlock()
	return e.att.CloseWrite()
}

// Resize sets the terminal size. API 1.41 can lose a resize that races the
// process start, so it is retried a few times; the last error is returned.
func (e *Exec) Resize(ctx context.Context, cols, rows int) error {
	if !e.tty {
		return errors.New("sandbox exec: resize needs a TTY")
	}
	if cols <= 0 || rows <= 0 {
		return fmt.Errorf("sandbox exec: bad terminal size %dx%d", cols, rows)
	}
	var err error
	for i := 0; i < 5; i++ {
		_, err = e.m.cli.ExecResize(ctx, e.execID, client.ExecResizeOptions{Height: uint(rows), Width: uint(cols)})
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(10*(i+1)) * time.Millisecond):
		}
	}
	return fmt.Errorf("sandbox exec resize: %w", err)
}

// Wait blocks until the command ended. A command ended by Kill reports code
// -1 and the signal name.
func (e *Exec) Wait(ctx context.Context) (int, string, error) {
	select {
	case <-ctx.Done():
		return 0, "", ctx.Err()
	case <-e.done:
	}
	e.killMu.Lock()
	killed := e.killed
	e.killMu.Unlock()
	if e.waitErr != nil {
		return -1, "", e.waitErr
	}
	if killed != "" && (e.exitCode == 137 || e.exitCode == 143) {
		if e.exitCode == 143 {
			return -1, "SIGTERM", nil
		}
		return -1, "SIGKILL", nil
	}
	return e.exitCode, "", nil
}

// Done is closed when the command has ended.
func (e *Exec) Done() <-chan struct{} { return e.done }

// InputWait is always false on the plain path: the Engine gives no view of
// the process's kernel state.
func (e *Exec) InputWait() bool { return false }

// InputWaitChanged never fires on the plain path (a nil channel).
func (e *Exec) InputWaitChanged() <-chan struct{} { return nil }

// Kill ends the command's whole process tree inside the container: SIGTERM
// to every process tagged with this command's SANDBOXCTL_RUN, SIGKILL after
// KillGrace. Closing the client side alone would leave the tree running.
func (e *Exec) Kill(ctx context.Context) error {
	e.killMu.Lock()
	if e.killed == "" {
		e.killed = "SIGKILL"
	}
	e.killMu.Unlock()
	return e.m.KillTagged(ctx, e.containerID, e.tag, api.KillGrace)
}

// Signal delivers sig to every process of the command's tree (tagged
// with its SANDBOXCTL_RUN) inside the container.
func (e *Exec) Signal(ctx context.Context, sig syscall.Signal) error {
	if sig == syscall.SIGKILL || sig == syscall.SIGTERM {
		e.killMu.Lock()
		if e.killed == "" {
			e.killed = "SIGKILL"
		}
		e.killMu.Unlock()
	}
	out, code, err := e.m.run(ctx, e.containerID, []string{"sh", "-c", signalScript, "sh", e.tag, strconv.Itoa(int(sig))})
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return nil
		}
		return fmt.Errorf("sandbox signal %s: %w", e.tag, err)
	}
	if code != 0 {
		return fmt.Errorf("sandbox signal %s: exit %d: %s", e.tag, code, lastN(out, 300))
	}
	return nil
}

// signalScript sends signal number $2 to the processes tagged $1 (see
// killScript).
const signalScript = `t="` + string(envknob.RunTag) + `=$1"
p=$(for d in /proc/[0-9]*; do tr '\0' '\n' < "$d/environ" 2>/dev/null | grep -qxF "$t" && echo "${d#/proc/}"; done)
[ -z "$p" ] && exit 0
kill -"$2" $p 2>/dev/null; exit 0`

// killScript finds processes by their tag in /proc/PID/environ (busybox and
// coreutils alike), sends TERM, waits up to the grace, then KILLs what is
// left, twice to catch processes forked meanwhile. The tag is an argument,
// not an environment variable, so the script never matches itself.
const killScript = `t="` + string(envknob.RunTag) + `=$1"; n=$2
pids() { for d in /proc/[0-9]*; do tr '\0' '\n' < "$d/environ" 2>/dev/null | grep -qxF "$t" && echo "${d#/proc/}"; done; }
p=$(pids); [ -z "$p" ] && exit 0
kill -TERM $p 2>/dev/null
i=0; while [ "$i" -lt "$n" ]; do sleep 0.1; p=$(pids); [ -z "$p" ] && exit 0; i=$((i+1)); done
for r in 1 2 3; do p=$(pids); [ -z "$p" ] && exit 0; kill -KILL $p 2>/dev/null; sleep 0.05; done
p=$(pids); [ -z "$p" ] && exit 0; echo "still alive: $p"; exit 1`

// KillTagged kills every process in the container whose environment carries
// SANDBOXCTL_RUN=tag (see killScript).
func (m *DockerEngine) KillTagged(ctx context.Context, containerID, tag string, grace time.Duration) error {
	steps := int(grace / (100 * time.Millisecond))
	out, code, err := m.run(ctx, containerID, []string{"sh", "-c", killScript, "sh", tag, strconv.Itoa(steps)})
	if err != nil {
		if errors.Is(err, ErrNotFound) || errors.Is(err, ErrContainerGone) || m.stopped(ctx, containerID) {
			return nil // the container is gone or stopped, and the tree with it
		}
		return fmt.Errorf("sandbox kill %s: %w", tag, err)
	}
	switch code {
	case 0:
		return nil
	case 128 + int(syscall.SIGKILL):
		// The script itself was killed: only the container stopping (or
		// being removed) does that, and the tree ends with it.
		return nil
	}
	if m.stopped(ctx, containerID) {
		// The Engine refused the exec because the container stopped (or
		// was removed) meanwhile: the tree ended with it.
		return nil
	}
	return fmt.Errorf("sandbox kill %s: exit %d: %s", tag, code, lastN(out, 300))
}

// stopped reports whether container id stopped or was removed. A runtime
// that refused an exec because the container stopped may answer before
// the Engine's state says so: it asks for up to stopSettle.
func (m *DockerEngine) stopped(ctx context.Context, id string) bool {
	deadline := time.Now().Add(stopSettle)
	for {
		insp, err := m.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
		switch {
		case isNotFound(err):
			return true
		case err == nil && (insp.Container.State == nil || !insp.Container.State.Running):
			return true
		case err != nil || time.Now().After(deadline):
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// stopSettle is how long stopped waits for the Engine to see a container
// stop that its runtime already reported.
const stopSettle = 3 * time.Second

// run executes cmd in the container without stdin and returns its combined
// output and exit code.
func (m *DockerEngine) run(ctx context.Context, containerID string, cmd []string) (string, int, error) {
	e, err := m.ExecIn(ctx, containerID, ExecOptions{Cmd: cmd})
	if err != nil {
		return "", -1, err
	}
	var buf bytes.Buffer
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _, _ = io.Copy(&buf, e.stderr) }()
	var out bytes.Buffer
	_, _ = io.Copy(&out, e.stdout)
	wg.Wait()
	code, _, err := e.Wait(ctx)
	if err != nil {
		return out.String() + buf.String(), code, err
	}
	return out.String() + buf.String(), code, nil
}

// Run is a convenience for tests and tools: run cmd in scope s's sandbox and
// return the combined output and exit code.
func (m *DockerEngine) Run(ctx context.Context, s Scope, cmd []string) (string, int, error) {
	res, err := m.Ensure(ctx, s)
	if err != nil {
		return "", -1, err
	}
	return m.run(ctx, res.ID, cmd)
}

// Attach ensures the scope's sandbox and starts a command in it; used by
// `sandboxctl sandbox shell` and the sandbox host.
func (m *DockerEngine) Attach(ctx context.Context, s Scope, opts ExecOptions) (*Exec, EnsureResult, error) {
	res, err := m.Ensure(ctx, s)
	if err != nil {
		return nil, res, err
	}
	e, err := m.ExecIn(ctx, res.ID, opts)
	if err != nil {
		return nil, res, err
	}
	return e, res, nil
}

// Process is a command started in a sandbox, on either path: *Exec (plain
// Engine exec) or *SupervisedExec (the in-container supervisor): the one
// host Process, and what a sandbox adds to it.
type Process interface {
	hostapi.Process
	// Signal delivers one signal to the command's tree.
	Signal(ctx context.Context, sig syscall.Signal) error
	// Tag is the SANDBOXCTL_RUN value of the command's tree.
	Tag() string
	// Done is closed when the command has ended.
	Done() <-chan struct{}
	// InputWait reports whether the command sits blocked reading a stdin
	// nobody has written (supervisor path only; always false on the plain
	// path).
	InputWait() bool
	// InputWaitChanged is closed at the next change of InputWait (a new
	// channel after each change; nil, never ready, on the plain path).
	InputWaitChanged() <-chan struct{}
	// HostStarted is the process as a host hands it to the session
	// manager, with what it can do (input waits, Forget, Signal, Doubt).
	HostStarted() hostapi.Started
}

// HostStarted implements Process: a plain Engine exec can be signalled,
// and reports no input waits.
func (e *Exec) HostStarted() hostapi.Started {
	return hostapi.Started{Process: e, Signal: e.Signal}
}

// Started is a command started by Start: the process plus any warnings the
// caller should show (a pending recreate, a fallback from the supervisor).
type Started struct {
	Process
	Ensure   EnsureResult
	Warnings []string
}

// Start ensures scope s's sandbox and starts opts.Cmd in it. It is the one
// entry point the sandbox host uses, so the choice of exec path stays here:
// the supervisor when the sandbox runs it, else the plain Engine exec path
// with a warning saying why.
func (m *DockerEngine) Start(ctx context.Context, s Scope, opts ExecOptions) (*Started, error) {
	if err := m.engineDown(); err != nil {
		// Fail with the reason now rather than wait on a stalled Engine.
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	// A call already waiting on the Engine when it stalls ends as soon as
	// the health check finds it not answering, naming it.
	bctx, release := m.whileEngineAnswers(ctx)
	defer release()
	st, err := m.start(bctx, s, opts)
	return st, engineErr(bctx, err)
}

// start is Start once the Engine is known to answer.
func (m *DockerEngine) start(ctx context.Context, s Scope, opts ExecOptions) (*Started, error) {
	res, err := m.ensureForStart(ctx, s)
	if err != nil {
		return nil, err
	}
	st := &Started{Ensure: res}
	if res.RecreatePending {
		st.Warnings = append(st.Warnings, "sandbox recreate pending: "+res.PendingReason)
	}
	p, warn, err := m.startSupervised(ctx, s, res, opts)
	if err != nil {
		return nil, err
	}
	if warn != "" {
		st.Warnings = append(st.Warnings, warn)
	}
	if p != nil {
		st.Process = p
		return st, nil
	}
	e, err := m.ExecIn(ctx, res.ID, opts)
	if err != nil {
		return nil, err
	}
	// What the command leaves behind (tagged with its SANDBOXCTL_RUN)
	// ends with it, as on the supervisor path.
	go func() {
		<-e.Done()
		kctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := m.KillTagged(kctx, res.ID, e.Tag(), api.KillGrace); err != nil {
			m.logf("warning: sandbox %s: end what %s left behind: %v", res.Name, e.Tag(), err)
		}
	}()
	st.Process = e
	return st, nil
}
