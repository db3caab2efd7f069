package hostsup

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/sandboxctl/sandboxctl/hostexec"
	"github.com/sandboxctl/sandboxctl/internal/procfs"
	"github.com/sandboxctl/sandboxctl/sandbox/supervisor"
)

// ErrLost marks a session whose supervisor died: its processes were ended
// and its end is unknown.
var ErrLost = errors.New("session lost")

// Options configure Connect.
type Options struct {
	// Dir is the supervisor's state directory: its socket, its log and one
	// directory per session. It is created with mode 0700.
	Dir string
	// Command is the argv that runs a supervisor serving Dir in the
	// foreground (Serve), e.g. sandboxctld host-supervisor --dir DIR.
	Command []string
	// Env is the supervisor process's own environment (commands get the
	// environment of their OpenSpec, not this one).
	Env []string
	// StartTimeout bounds the wait for a new supervisor's socket (default 10 s).
	StartTimeout time.Duration
	Logf         func(format string, args ...any)
}

// Supervisor is a daemon's link to its host supervisor. It starts a new
// supervisor when the one it used is gone.
type Supervisor struct {
	opts Options

	mu     sync.Mutex
	client *supervisor.Client
	lost   []Lost // sessions of a dead supervisor, until Recover takes them
}

// Lost is a session of a supervisor that died before it ended: its
// processes were ended by the sweep, its exit status is unknown (or, if the
// supervisor recorded it before dying, Exit).
type Lost struct {
	Info   supervisor.SessionInfo
	Exit   *supervisor.ExitStatus
	Reason string
	// NoRecord says that the session's record was unreadable: Info holds
	// only its tag (ID).
	NoRecord bool
}

// New returns a link to the supervisor serving opts.Dir. Nothing is started
// yet: the first Open starts a supervisor when none answers, and Sessions
// connects to one that outlived the previous daemon.
func New(opts Options) (*Supervisor, error) {
	if opts.Dir == "" || len(opts.Command) == 0 {
		return nil, errors.New("hostsup: Dir and Command are required")
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = 10 * time.Second
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	if n := len(SocketPath(opts.Dir)); n >= maxSocketPath {
		return nil, fmt.Errorf("hostsup: the socket path %s is %d bytes, over the %d a unix socket allows: use a shorter state directory", SocketPath(opts.Dir), n, maxSocketPath-1)
	}
	if err := os.MkdirAll(opts.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("hostsup: %w", err)
	}
	if err := os.Chmod(opts.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("hostsup: %w", err)
	}
	return &Supervisor{opts: opts}, nil
}

// SocketPath is where the supervisor of dir listens.
func SocketPath(dir string) string { return filepath.Join(dir, supervisor.SocketName) }

// maxSocketPath is the size of sockaddr_un's sun_path, NUL included.
const maxSocketPath = 108

// lockName is the file a live supervisor holds an exclusive flock on: the
// proof of life that a missing or refused socket is not.
const lockName = "supervisor.lock"

// alive reports whether a supervisor holds dir's lock.
func alive(dir string) (bool, error) {
	f, err := os.OpenFile(filepath.Join(dir, lockName), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return false, fmt.Errorf("hostsup: %w", err)
	}
	defer f.Close()
	switch err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); {
	case err == nil:
		return false, nil // closing f releases it
	case errors.Is(err, syscall.EWOULDBLOCK):
		return true, nil
	default:
		return false, fmt.Errorf("hostsup: lock %s: %w", f.Name(), err)
	}
}

// holdLock takes dir's lock for the life of the calling supervisor. The
// descriptor is close-on-exec: no command inherits it.
func holdLock(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, lockName), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("another host supervisor serves %s", dir)
		}
		return nil, err
	}
	return f, nil
}

// current returns a connected client: to the running supervisor, or, with
// start, to a new one, after the sessions of a dead one were swept. Without
// start and without a supervisor it sweeps and returns errNoSupervisor.
func (s *Supervisor) current(ctx context.Context, start bool) (*supervisor.Client, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.client != nil {
		select {
		case <-s.client.Done():
			s.client = nil
		default:
			return s.client, nil
		}
	}
	c, err := s.dial(ctx)
	if errors.Is(err, errNoSupervisor) {
		// No socket answers: dead, or alive with its socket gone (never
		// sweep a live one's sessions).
		if live, lerr := alive(s.opts.Dir); lerr != nil || live {
			if lerr != nil {
				return nil, lerr
			}
			return nil, fmt.Errorf("hostsup: the host supervisor of %s runs but its socket %s does not answer; stop it (it holds %s) and retry",
				s.opts.Dir, SocketPath(s.opts.Dir), lockName)
		}
		s.lost = append(s.lost, s.sweep()...)
		if !start {
			return nil, err
		}
		if err = s.start(); err == nil {
			c, err = s.dialUntil(ctx, time.Now().Add(s.opts.StartTimeout))
		}
	}
	if err != nil {
		return nil, err
	}
	s.client = c
	go s.watch(c)
	return c, nil
}

// watch sweeps at once what a supervisor that died under this daemon left
// running: its sessions already failed here, their processes must not run
// on untracked until the next command or daemon.
func (s *Supervisor) watch(c *supervisor.Client) {
	<-c.Done()
	if errors.Is(c.Err(), supervisor.ErrClosed) {
		return // this daemon closed the link (Stop)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.client != c {
		return
	}
	s.client = nil
	if live, err := alive(s.opts.Dir); err == nil && !live {
		s.sweep()
	}
}

var errNoSupervisor = errors.New("no host supervisor answers")

// dial connects to the supervisor on the socket, if one answers.
func (s *Supervisor) dial(ctx context.Context) (*supervisor.Client, error) {
	sock := SocketPath(s.opts.Dir)
	dialer := func(ctx context.Context) (supervisor.Conn, error) {
		var d net.Dialer
		conn, err := d.DialContext(ctx, "unix", sock)
		if err != nil {
			if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED) {
				return nil, fmt.Errorf("%w: %w", errNoSupervisor, supervisor.ErrGone)
			}
			return nil, err
		}
		uc := conn.(*net.UnixConn) // a "unix" dial always gives one
		cred, err := supervisor.PeerCred(uc)
		if err == nil && int(cred.Uid) != os.Getuid() {
			err = fmt.Errorf("host supervisor socket %s is held by uid %d, not %d", sock, cred.Uid, os.Getuid())
		}
		if err != nil {
			_ = conn.Close()
			return nil, err
		}
		return localConn{uc}, nil
	}
	c, err := supervisor.NewClient(ctx, supervisor.ClientOptions{Dial: dialer, Logf: s.opts.Logf})
	if err != nil {
		return nil, fmt.Errorf("hostsup: %w", err)
	}
	return c, nil
}

// dialUntil waits for a freshly started supervisor's socket.
func (s *Supervisor) dialUntil(ctx context.Context, deadline time.Time) (*supervisor.Client, error) {
	for {
		c, err := s.dial(ctx)
		if err == nil || !errors.Is(err, errNoSupervisor) || time.Now().After(deadline) {
			if err != nil {
				return nil, fmt.Errorf("hostsup: the host supervisor did not come up (log: %s): %w", s.logPath(), err)
			}
			return c, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (s *Supervisor) logPath() string { return filepath.Join(s.opts.Dir, "supervisor.log") }

// start runs a new supervisor in a session of its own, so that it outlives
// this process; its diagnostics go to its log in Dir.
func (s *Supervisor) start() error {
	logf, err := os.OpenFile(s.logPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("hostsup: %w", err)
	}
	defer logf.Close()
	cmd := exec.Command(s.opts.Command[0], s.opts.Command[1:]...)
	cmd.Env = s.opts.Env
	cmd.Dir = "/"
	cmd.Stderr = logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("hostsup: start the host supervisor: %w", err)
	}
	s.opts.Logf("hostsup: started the host supervisor (pid %d, state %s)", cmd.Process.Pid, s.opts.Dir)
	go func() { _ = cmd.Wait() }() // reaped here if it ends while this process lives
	return nil
}

// sweep ends what a dead supervisor's sessions left running, removes their
// directories and returns them. A directory named like a run tag is swept
// even without a meta.json (the supervisor died before writing it): such a
// session cannot be reported, but nothing of it runs on. One whose meta.json
// is corrupt is returned under its tag, with NoRecord and the reason.
func (s *Supervisor) sweep() []Lost {
	entries, err := os.ReadDir(s.opts.Dir)
	if err != nil {
		return nil
	}
	var lost []Lost
	for _, e := range entries {
		if !e.IsDir() || !hostexec.ValidTag(e.Name()) || e.Name() == supervisor.SpareLogName {
			continue // the spare output log is no session (the next supervisor removes it)
		}
		dir := filepath.Join(s.opts.Dir, e.Name())
		n, serr := hostexec.SweepTag(e.Name())
		var info supervisor.SessionInfo
		b, err := os.ReadFile(filepath.Join(dir, "meta.json"))
		if err != nil {
			// Died between fork and writing the record: the daemon never
			// got the session; nothing of it runs on.
			s.opts.Logf("hostsup: session %s of a dead host supervisor has no record; %d process(es) of it ended (%v)", e.Name(), n, serr)
			_ = os.RemoveAll(dir)
			continue
		}
		if json.Unmarshal(b, &info) != nil || info.ID != e.Name() {
			// A corrupt record: reported all the same, under its tag
			// (issue 32 item 5), though what named its daemon session
			// and agent is gone.
			reason := fmt.Sprintf("its host supervisor died and its record (meta.json) is unreadable: its command, agent and output are unknown; %d process(es) it left were ended", n)
			if serr != nil {
				reason = fmt.Sprintf("its host supervisor died and its record (meta.json) is unreadable; ending what it left running failed: %v", serr)
			}
			s.opts.Logf("hostsup: session %s: %s", e.Name(), reason)
			lost = append(lost, Lost{Info: supervisor.SessionInfo{ID: e.Name()}, Reason: reason, NoRecord: true})
			_ = os.RemoveAll(dir)
			continue
		}
		l := Lost{Info: info}
		if b, err := os.ReadFile(filepath.Join(dir, "exit")); err == nil {
			var st supervisor.ExitStatus
			if json.Unmarshal(b, &st) == nil {
				l.Exit = &st
			}
		}
		switch {
		case serr != nil:
			l.Reason = fmt.Sprintf("its host supervisor died; ending what it left running failed: %v", serr)
		case l.Exit != nil:
			l.Reason = "its host supervisor ended after the command did; its output was not kept"
		default:
			l.Reason = fmt.Sprintf("its host supervisor died while it ran; %d process(es) it left were ended", n)
		}
		s.opts.Logf("hostsup: session %s: %s", info.ID, l.Reason)
		lost = append(lost, l)
		_ = os.RemoveAll(dir)
	}
	return lost
}

// Open starts a command in the supervisor.
func (s *Supervisor) Open(ctx context.Context, spec supervisor.OpenSpec) (*supervisor.Proc, error) {
	c, err := s.current(ctx, true)
	if err != nil {
		return nil, err
	}
	return c.Open(ctx, spec)
}

// Recovered is a session found in the supervisor by Sessions: running or
// finished, with the output it kept.
type Recovered struct {
	Info   supervisor.SessionInfo
	Output []byte
	// StdoutOffset and StderrOffset are the byte counts per stream that
	// Output ends at.
	StdoutOffset, StderrOffset int64
	// Proc follows the session from the end of Output (a finished one
	// reports its exit at once).
	Proc *supervisor.Proc
}

// Sessions lists the sessions of a supervisor that outlived the previous
// daemon, with their kept output, each re-attached from where that output
// ends (oldest first), and takes the lost sessions of a dead supervisor. It
// starts no supervisor.
func (s *Supervisor) Sessions(ctx context.Context) ([]Recovered, []Lost, error) {
	c, infos, lost, err := s.list(ctx)
	if c == nil || err != nil {
		return nil, lost, err
	}
	out := make([]Recovered, 0, len(infos))
	var errs []error
	for _, in := range infos {
		// Output and the resume offsets come from one read, so the
		// re-attached stream neither repeats nor skips a byte.
		data, so, se, err := c.Read(ctx, in.ID)
		if err == nil {
			var p *supervisor.Proc
			if p, err = c.Attach(ctx, in, so, se); err == nil {
				out = append(out, Recovered{Info: in, Output: data, StdoutOffset: so, StderrOffset: se, Proc: p})
				continue
			}
		}
		errs = append(errs, fmt.Errorf("hostsup: session %s: %w", in.ID, err))
	}
	return out, lost, errors.Join(errs...)
}

// Forget drops a finished session's kept output and exit status.
func (s *Supervisor) Forget(ctx context.Context, id string) error {
	c, err := s.current(ctx, false)
	if err != nil {
		return err
	}
	return c.Forget(ctx, id)
}

// Stop ends the supervisor, if one runs and none of its sessions is running
// (a graceful daemon shutdown has ended them), and waits until it is gone;
// it closes the link.
func (s *Supervisor) Stop(ctx context.Context) error {
	c, err := s.current(ctx, false)
	if errors.Is(err, errNoSupervisor) {
		return nil
	}
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.client = nil
	s.mu.Unlock()
	defer c.Close()
	infos, err := c.List(ctx)
	if err != nil {
		return fmt.Errorf("hostsup: list: %w", err)
	}
	for _, in := range infos {
		if in.Running {
			return nil // kept for the next daemon
		}
	}
	pid := c.ServerPID()
	if pid <= 0 {
		return errors.New("hostsup: stop: the host supervisor did not say its pid")
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		if errors.Is(err, syscall.ESRCH) {
			return nil
		}
		return fmt.Errorf("hostsup: stop the host supervisor: %w", err)
	}
	for {
		if procfs.Exited("/proc", pid) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("hostsup: the host supervisor (pid %d) did not stop: %w", pid, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// localConn marks the socket as local: output goes uncompressed.
type localConn struct{ *net.UnixConn }

func (localConn) Local() bool { return true }

// List lists the sessions of a supervisor that outlived its previous
// client (running and finished, oldest first) without reading or attaching
// them, and takes the lost sessions of a dead supervisor. It starts no
// supervisor. A node agent uses it with Read and Attach to resume each
// session from the offsets its gateway asks for.
func (s *Supervisor) List(ctx context.Context) ([]supervisor.SessionInfo, []Lost, error) {
	_, infos, lost, err := s.list(ctx)
	return infos, lost, err
}

// list takes the lost sessions of a dead supervisor and lists the sessions of
// the running one (oldest first) with the client that reached it; the client
// is nil when no supervisor runs.
func (s *Supervisor) list(ctx context.Context) (*supervisor.Client, []supervisor.SessionInfo, []Lost, error) {
	c, err := s.current(ctx, false)
	s.mu.Lock()
	lost := s.lost
	s.lost = nil
	s.mu.Unlock()
	if errors.Is(err, errNoSupervisor) {
		return nil, nil, lost, nil
	}
	if err != nil {
		return nil, nil, lost, err
	}
	infos, err := c.List(ctx)
	if err != nil {
		return nil, nil, lost, fmt.Errorf("hostsup: list: %w", err)
	}
	sort.Slice(infos, func(i, j int) bool { return infos[i].StartedAt < infos[j].StartedAt })
	return c, infos, lost, nil
}

// Read returns a session's kept output (streams interleaved) and the
// per-stream byte counts it ends at.
func (s *Supervisor) Read(ctx context.Context, id string) ([]byte, int64, int64, error) {
	c, err := s.current(ctx, false)
	if err != nil {
		return nil, 0, 0, err
	}
	return c.Read(ctx, id)
}

// Attach follows a session listed by List from the given per-stream
// offsets on (output after them, then live, then its exit).
func (s *Supervisor) Attach(ctx context.Context, info supervisor.SessionInfo, stdoutOff, stderrOff int64) (*supervisor.Proc, error) {
	c, err := s.current(ctx, false)
	if err != nil {
		return nil, err
	}
	return c.Attach(ctx, info, stdoutOff, stderrOff)
}
