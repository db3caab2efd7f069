package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/sandboxctl/sandboxctl/sandbox/supervisor"
	"github.com/sandboxctl/sandboxctl/sessions/hostapi"
	"github.com/sandboxctl/sandboxctl/workdir"
)

// LabelSupervisorNote on a container says why it runs without the
// supervisor although one was configured.
const LabelSupervisorNote = "sandboxctl.supervisorNote"

// warmWindow is how long a verified supervised sandbox is trusted without
// asking the Engine again: its live supervisor connection proves it runs
// (the connection breaks, and the client gives up, when it stops or goes;
// the event watch fails it when the container dies; the pauser forgets it).
// Long enough that round-robin use of a few hundred sandboxes stays off the
// Engine (bench/density: exec at 200 live).
const warmWindow = 30 * time.Second

// warmEnsures caches recent Ensure results of supervised sandboxes.
type warmEnsures struct {
	mu sync.Mutex
	m  map[string]warmEnsure // by scope key
}

type warmEnsure struct {
	res EnsureResult
	at  time.Time
}

// ensureForStart is Ensure with a fast path for the hot loop of commands
// into one sandbox: a supervised sandbox verified within warmWindow whose
// supervisor connection is alive is used without an Engine round trip.
func (m *DockerEngine) ensureForStart(ctx context.Context, s Scope) (EnsureResult, error) {
	scopeKey := ScopeKey(m.cfg.Scope, s)
	now := time.Now()
	m.warm.mu.Lock()
	w, ok := m.warm.m[scopeKey]
	m.warm.mu.Unlock()
	// A sandbox paused on request (by this process or another: Pause)
	// must not take a command: Ensure refuses it.
	if ok && now.Sub(w.at) < warmWindow && m.clients.alive(w.res.ID) && !m.pausedOnRequest(w.res.Name, w.res.ID) {
		res := w.res
		res.Created, res.Started, res.Recreated, res.Resumed, res.Pooled = false, false, false, false, false
		m.reg.touch(res.Name, scopeKey)
		return res, nil
	}
	res, err := m.Ensure(ctx, s)
	if err != nil {
		return res, err
	}
	m.warm.mu.Lock()
	if m.warm.m == nil {
		m.warm.m = map[string]warmEnsure{}
	}
	if res.Supervised && !res.RecreatePending && m.sup != nil {
		m.warm.m[scopeKey] = warmEnsure{res: res, at: now}
	} else {
		delete(m.warm.m, scopeKey)
	}
	m.warm.mu.Unlock()
	return res, nil
}

func (w *warmEnsures) forgetID(id string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for k, v := range w.m {
		if v.res.ID == id {
			delete(w.m, k)
		}
	}
}

// supervisorClients holds one supervisor connection per container.
type supervisorClients struct {
	mu      sync.Mutex
	entries map[string]*clientEntry
	// localBad: when a container's supervisor socket last failed a
	// handshake (see Manager.dialer).
	localBad map[string]time.Time
	// inits: the host pid of each container's init when last dialed
	// locally, to tell a dead container while the Engine does not answer.
	inits map[string]int
}

func (cs *supervisorClients) sawInit(id string, pid int) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.inits == nil {
		cs.inits = map[string]int{}
	}
	cs.inits[id] = pid
}

// initGone reports whether container id's init, as last seen, no longer
// runs in the container's cgroup (false when it was never seen).
func (cs *supervisorClients) initGone(id string) bool {
	cs.mu.Lock()
	pid, ok := cs.inits[id]
	cs.mu.Unlock()
	if !ok {
		return false
	}
	cg, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cgroup"))
	return err != nil || !strings.Contains(string(cg), id)
}

type clientEntry struct {
	mu      sync.Mutex
	c       *supervisor.Client
	created time.Time // when c was connected
}

// ids lists the containers with a connection entry.
func (cs *supervisorClients) ids() []string {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	out := make([]string, 0, len(cs.entries))
	for id := range cs.entries {
		out = append(out, id)
	}
	return out
}

// fail ends container id's supervisor connection with reason when it was
// made before at; every command it follows fails with reason. It reports
// whether a live connection ended.
func (cs *supervisorClients) fail(id string, at time.Time, reason error) bool {
	cs.mu.Lock()
	e := cs.entries[id]
	cs.mu.Unlock()
	if e == nil {
		return false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.c == nil || e.c.Err() != nil || e.created.After(at) {
		return false
	}
	e.c.Fail(reason)
	return true
}

func (cs *supervisorClients) entry(id string) *clientEntry {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.entries == nil {
		cs.entries = map[string]*clientEntry{}
	}
	e := cs.entries[id]
	if e == nil {
		e = &clientEntry{}
		cs.entries[id] = e
	}
	return e
}

// alive reports whether container id has a working supervisor connection.
func (cs *supervisorClients) alive(id string) bool {
	cs.mu.Lock()
	e := cs.entries[id]
	cs.mu.Unlock()
	if e == nil {
		return false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.c != nil && e.c.Err() == nil && e.c.Connected()
}

// localFailed records that container id's supervisor socket accepted a
// connection but did not complete the handshake.
func (cs *supervisorClients) localFailed(id string, now time.Time) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.localBad == nil {
		cs.localBad = map[string]time.Time{}
	}
	cs.localBad[id] = now
}

func (cs *supervisorClients) localFailedRecently(id string, now time.Time) bool {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	at, ok := cs.localBad[id]
	return ok && now.Sub(at) < localRetryAfter
}

func (cs *supervisorClients) drop(id string) {
	cs.mu.Lock()
	e := cs.entries[id]
	delete(cs.entries, id)
	cs.mu.Unlock()
	if e != nil {
		e.mu.Lock()
		if e.c != nil {
			_ = e.c.Close()
		}
		e.mu.Unlock()
	}
}

func (cs *supervisorClients) closeAll() {
	cs.mu.Lock()
	ids := make([]string, 0, len(cs.entries))
	for id := range cs.entries {
		ids = append(ids, id)
	}
	cs.mu.Unlock()
	for _, id := range ids {
		cs.drop(id)
	}
}

// attachConn is the container's attach stream as a supervisor.Conn.
type attachConn struct {
	*supervisor.Demux
	att client.HijackedResponse
}

func (a *attachConn) Write(p []byte) (int, error) { return a.att.Conn.Write(p) }
func (a *attachConn) Close() error                { a.att.Close(); return nil }

// localRetryAfter is how long a container whose supervisor socket failed a
// handshake is reached over the attach stream instead.
const localRetryAfter = time.Minute

// dialer connects to the supervisor of container id: its local socket when
// this host can reach it (dialLocal) and it has not recently failed a
// handshake, else the attach stream.
func (m *DockerEngine) dialer(id string) supervisor.Dialer {
	attach := m.attachDialer(id)
	if !m.localSupervisor {
		return attach
	}
	return func(ctx context.Context) (supervisor.Conn, error) {
		if m.clients.localFailedRecently(id, time.Now()) {
			return attach(ctx)
		}
		conn, err := m.dialLocal(ctx, id)
		if err == nil {
			return conn, nil
		}
		if errors.Is(err, errNoLocalPath) {
			return attach(ctx)
		}
		if errors.Is(err, ErrDockerUnreachable) || errors.Is(err, supervisor.ErrGone) || ctx.Err() != nil {
			return nil, err
		}
		if errors.Is(err, errInitGone) {
			// The container is stopping (removed, or its supervisor
			// exited): the Engine's event says how it ended.
			m.logf("debug: sandbox %s: supervisor socket gone with its container's init (%v); using the attach stream", short(id), err)
		} else {
			m.logf("sandbox %s: supervisor socket: %v; using the attach stream", short(id), err)
		}
		return attach(ctx)
	}
}

// attachDialer attaches to the main process of container id (stdin +
// stdout + stderr, no TTY: the Engine multiplexes stdout and stderr, Demux
// splits them; the supervisor's stderr is its log).
func (m *DockerEngine) attachDialer(id string) supervisor.Dialer {
	return func(ctx context.Context) (supervisor.Conn, error) {
		att, err := m.cli.ContainerAttach(ctx, id, client.ContainerAttachOptions{Stream: true, Stdin: true, Stdout: true, Stderr: true})
		if err != nil {
			if isNotFound(err) || isConflict(err) {
				return nil, fmt.Errorf("attach to sandbox %s: %w: %w", short(id), supervisor.ErrGone, err)
			}
			return nil, m.classify("attach to sandbox "+short(id), err)
		}
		logStderr := func(b []byte) {
			for _, line := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
				m.logf("sandbox %s: %s", short(id), line)
			}
		}
		return &attachConn{Demux: supervisor.NewDemux(att.Reader, logStderr), att: att.HijackedResponse}, nil
	}
}

// releaseIdleLoop closes supervisor connections idle for m.idleClose, until
// ctx ends (part of the Manager's one watch goroutine pair).
func (m *DockerEngine) releaseIdleLoop(ctx context.Context) {
	if m.idleClose < 0 {
		return
	}
	t := time.NewTicker(max(m.idleClose/4, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			if n := m.clients.releaseIdle(now, m.idleClose); n > 0 {
				m.logf("sandbox: closed %d idle supervisor connections", n)
			}
		}
	}
}

// releaseIdle closes the connections idle for at least d and returns how
// many it closed. The entry's lock is held, so no caller gets a client
// being closed from supervisorClient.
func (cs *supervisorClients) releaseIdle(now time.Time, d time.Duration) int {
	n := 0
	for _, id := range cs.ids() {
		cs.mu.Lock()
		e := cs.entries[id]
		cs.mu.Unlock()
		if e == nil {
			continue
		}
		e.mu.Lock()
		if e.c != nil && e.c.Err() == nil && e.c.IdleFor(now) >= d {
			_ = e.c.Close()
			e.c = nil
			n++
		}
		e.mu.Unlock()
	}
	return n
}

// supervisorClient returns the live connection to container id's
// supervisor, connecting (one connection per container) when needed.
func (m *DockerEngine) supervisorClient(ctx context.Context, id string) (*supervisor.Client, error) {
	e := m.clients.entry(id)
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.c != nil && e.c.Err() == nil {
		e.c.Touch() // not idle: the caller is about to use it
		return e.c, nil
	}
	m.startWatch()
	created := time.Now()
	opts := supervisor.ClientOptions{
		Dial: m.dialer(id),
		HandshakeFailed: func(conn supervisor.Conn, err error) {
			if _, local := conn.(localConn); local {
				m.logf("sandbox %s: supervisor socket: %v; using the attach stream for %s", short(id), err, localRetryAfter)
				m.clients.localFailed(id, time.Now())
			}
		},
		Logf: func(format string, args ...any) {
			// The level prefix (debug:, warning:, error:; see the daemon's
			// log) stays in front of the sandbox's name.
			level := ""
			for _, p := range []string{"debug: ", "warning: ", "error: "} {
				if rest, ok := strings.CutPrefix(format, p); ok {
					level, format = p, rest
					break
				}
			}
			m.logf(level+"sandbox %s: "+format, append([]any{short(id)}, args...)...)
		},
	}
	c, err := supervisor.NewClient(ctx, opts)
	if err != nil && m.clients.localFailedRecently(id, time.Now()) {
		// The socket took the connection but not the Hello: once more, now
		// over the attach stream.
		c, err = supervisor.NewClient(ctx, opts)
	}
	if err != nil {
		return nil, fmt.Errorf("connect to the supervisor of sandbox %s: %w", short(id), err)
	}
	m.logf("sandbox %s: supervisor client %s connected (local socket: %v)", short(id), c.Nonce(), c.Local())
	for _, l := range c.Limits() {
		m.logf("sandbox %s: supervisor: %s", short(id), l)
	}
	e.c, e.created = c, created
	return c, nil
}

// checkSupervisor connects to a freshly started supervised container.
func (m *DockerEngine) checkSupervisor(ctx context.Context, id string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	c, err := m.supervisorClient(ctx, id)
	if err != nil {
		return err
	}
	return c.Ping(ctx)
}

// SupervisedExec is a command run by a sandbox's supervisor. Its method set
// includes sessions.Process (and Process) plus InputWait.
type SupervisedExec struct {
	*supervisor.Proc
	m           *DockerEngine      // nil for a Backend's (NewSupervisedExec)
	client      *supervisor.Client // the connection that follows it
	containerID string
	noInputWait bool
	// forget drops the finished session (a Backend's; m's ForgetSession
	// when nil).
	forget func(ctx context.Context) error
}

func (m *DockerEngine) supervisedExec(c *supervisor.Client, p *supervisor.Proc, containerID string) *SupervisedExec {
	return &SupervisedExec{Proc: p, m: m, client: c, containerID: containerID, noInputWait: c.NoInputWait()}
}

// NewSupervisedExec is a command a Backend's sandbox sandboxID runs
// through its supervisor, followed by c; forget drops the finished
// session from the supervisor (it is the sessions layer's Forget).
func NewSupervisedExec(c *supervisor.Client, p *supervisor.Proc, sandboxID string, forget func(ctx context.Context) error) *SupervisedExec {
	return &SupervisedExec{Proc: p, client: c, containerID: sandboxID, noInputWait: c.NoInputWait(), forget: forget}
}

// InputWaitChanged is the supervisor's, or nil (never ready) when its
// sandbox cannot detect input waits (gVisor): callers that would keep stdin
// open for a command that may wait for input then close it instead, as on
// the plain path.
func (p *SupervisedExec) InputWaitChanged() <-chan struct{} {
	if p.noInputWait {
		return nil
	}
	return p.Proc.InputWaitChanged()
}

// HostStarted implements Process: on the supervisor path the command can
// be signalled, may be in doubt while its Engine stalls (Doubt), and
// Forget drops the finished session from the supervisor, which would
// otherwise offer it to a restarted daemon; it reports input waits, but
// not under gVisor, whose /proc cannot tell (a foreground command gets EOF
// at once there instead).
func (p *SupervisedExec) HostStarted() hostapi.Started {
	out := hostapi.Started{Process: p, Forget: p.Forget, Signal: p.Signal, Doubt: p.Doubt}
	if p.DetectsInputWait() {
		out.InputWait = p
	}
	return out
}

// DetectsInputWait reports whether the sandbox's supervisor can tell when
// the command waits for input (false under gVisor).
func (p *SupervisedExec) DetectsInputWait() bool { return !p.noInputWait }

// ContainerID is the sandbox the command runs in.
func (p *SupervisedExec) ContainerID() string { return p.containerID }

// Forget drops the finished session from the supervisor's state (its output
// and exit files); the sessions layer calls it on clear/remove.
func (p *SupervisedExec) Forget(ctx context.Context) error {
	if p.forget != nil {
		return p.forget(ctx)
	}
	return p.m.ForgetSession(ctx, p.containerID, p.ID())
}

// startSupervised runs opts through the supervisor of res's container. It
// returns nil and a warning (empty when the plain path was chosen on
// purpose) when the plain path must be used; the process and a warning when
// the supervisor cannot do all it should for the command (a limit of its
// runtime, such as no input-wait detection under gVisor); an error when it cannot
// tell whether the supervisor started the command (the plain path would
// then risk running it twice).
func (m *DockerEngine) startSupervised(ctx context.Context, s Scope, res EnsureResult, opts ExecOptions) (*SupervisedExec, string, error) {
	if m.sup == nil {
		return nil, m.supWarn, nil
	}
	if !res.Supervised {
		note := res.SupervisorNote
		if note == "" {
			note = "it was created without it (recreate pending or older sandboxctl)"
		}
		return nil, fmt.Sprintf("sandbox %s runs without the supervisor (%s); using the plain Engine exec path", res.Name, note), nil
	}
	if opts.User != "" {
		return nil, "a per-command user needs the plain Engine exec path", nil
	}
	if len(opts.Cmd) == 0 {
		return nil, "", nil
	}
	c, err := m.supervisorClient(ctx, res.ID)
	if err != nil {
		m.supervisorFallback("exec")
		return nil, fmt.Sprintf("sandbox supervisor unreachable (%v); using the plain Engine exec path", err), nil
	}
	meta := map[string]string{"agentId": s.AgentID, "sessionKey": s.SessionKey, "scopeKey": res.ScopeKey}
	for k, v := range opts.Meta {
		meta[k] = v
	}
	// The working directory is named, never inherited from the
	// supervisor: the container's working directory resolved when the
	// command starts, so a workspace mounted over the one the container
	// was made with (a fork's, taken from the warm pool) is the one it
	// runs in.
	dir := opts.Dir
	if dir == "" {
		dir = workdir.ContainerWorkspace
	}
	spec := supervisor.OpenSpec{
		ID: opts.Tag, Argv: opts.Cmd, Env: opts.Env, Dir: dir,
		PTY: opts.PTY, Cols: opts.Cols, Rows: opts.Rows, KeepStdin: opts.KeepStdin, Meta: meta,
	}
	octx, cancel := ctx, context.CancelFunc(func() {})
	if opts.StartWait > 0 {
		octx, cancel = context.WithTimeout(ctx, opts.StartWait)
	}
	defer cancel()
	sentAt := time.Now()
	p, err := c.Open(octx, spec)
	if errors.Is(err, supervisor.ErrNotSent) && errors.Is(err, supervisor.ErrClosed) {
		// The idle connection was closed just as this command took it
		// (nothing was sent): once more on a new one.
		if c, err = m.supervisorClient(ctx, res.ID); err != nil {
			return nil, fmt.Sprintf("sandbox supervisor unreachable (%v); using the plain Engine exec path", err), nil
		}
		sentAt = time.Now()
		p, err = c.Open(octx, spec)
	}
	if errors.Is(err, supervisor.ErrNoAnswer) {
		return nil, "", fmt.Errorf("sandbox %s: %w: %w", res.Name, ErrSupervisorNoAnswer, err)
	}
	if err == nil {
		warn := ""
		if res.Created && len(c.Limits()) > 0 {
			// Said with the first command of a new sandbox (and by
			// `sandbox explain`): a foreground command that reads its
			// stdin gets EOF here instead of "waiting for input".
			warn = "this sandbox's supervisor: " + strings.Join(c.Limits(), "; ")
		}
		return m.supervisedExec(c, p, res.ID), warn, nil
	}
	if errors.Is(err, supervisor.ErrRefused) {
		// The supervisor looked at the command and could not start it (a
		// workdir that is not a directory, a program not on PATH, an
		// environment too large): that is the command's own failure, and
		// the plain path would only hide it behind another message.
		return nil, "", &CommandRefusedError{Err: err}
	}
	if errors.Is(err, supervisor.ErrNotSent) {
		// The supervisor never saw it: the plain path may run it.
		return nil, fmt.Sprintf("sandbox supervisor could not start the command (%v); using the plain Engine exec path", err), nil
	}
	return m.adoptUncertainStart(ctx, res, opts.Tag, sentAt, err)
}

// CommandRefusedError is a command the sandbox's supervisor could not
// start for a reason of the command's own (its workdir, its program, its
// environment): the caller's input, nothing ran (errdefs invalid argument).
type CommandRefusedError struct{ Err error }

func (e *CommandRefusedError) Error() string {
	return "the command could not start: " + e.Err.Error()
}

func (e *CommandRefusedError) Unwrap() error { return e.Err }

// InvalidParameter classifies the error for containerd/errdefs.
func (e *CommandRefusedError) InvalidParameter() {}

// ErrSupervisorNoAnswer means a sandbox's supervisor did not confirm a
// start in time (it is stopped or overloaded); the command did not run and
// will not (see supervisor.Client.Open). Unavailable class.
var ErrSupervisorNoAnswer = fmt.Errorf("%w: the sandbox's supervisor did not confirm the start (the command did not start, and is ended at once should the supervisor start it when it answers again)", cerrdefs.ErrUnavailable)

// ErrStartUncertain means the supervisor may or may not have started a
// command (the connection broke before it answered) and the daemon cannot
// find out; it does not run the command again. The agent should check the
// command's effects before it runs it again.
var ErrStartUncertain = errors.New("the command may or may not have started (sandboxctl did not run it a second time; check its effects before running it again)")

// adoptUncertainStart settles an Open whose answer was lost (the connection
// broke or was taken over after the request went out): the supervisor may
// or may not have started the command. A session with the command's id is
// followed from its first byte; no session means the plain path may run it;
// not knowing is an error, never a second run. A container (re)started
// after the request went out may have run it and died since: its new
// supervisor cannot know, so that is not knowing either.
func (m *DockerEngine) adoptUncertainStart(ctx context.Context, res EnsureResult, id string, sentAt time.Time, openErr error) (*SupervisedExec, string, error) {
	if id == "" || ctx.Err() != nil {
		return nil, "", fmt.Errorf("sandbox %s: %w (its answer was lost: %w)", res.Name, ErrStartUncertain, openErr)
	}
	insp, err := m.cli.ContainerInspect(ctx, res.ID, client.ContainerInspectOptions{})
	if err != nil {
		return nil, "", fmt.Errorf("sandbox %s: %w (%v) and the sandbox cannot be inspected: %w", res.Name, ErrStartUncertain, openErr, m.classify("inspect sandbox", err))
	}
	if st := insp.Container.State; st == nil || !st.Running {
		return nil, "", fmt.Errorf("sandbox %s: %w (%v) and the sandbox stopped since", res.Name, ErrStartUncertain, openErr)
	} else if started, perr := time.Parse(time.RFC3339Nano, st.StartedAt); perr != nil || !started.Before(sentAt) {
		return nil, "", fmt.Errorf("sandbox %s: %w (%v) and the sandbox restarted since", res.Name, ErrStartUncertain, openErr)
	}
	c, err := m.supervisorClient(ctx, res.ID)
	if err == nil {
		var infos []supervisor.SessionInfo
		if infos, err = c.List(ctx); err == nil {
			for _, in := range infos {
				if in.ID != id {
					continue
				}
				p, aerr := c.Attach(ctx, in, 0, 0)
				if aerr != nil {
					return nil, "", fmt.Errorf("sandbox %s: follow the command the supervisor started: %w", res.Name, aerr)
				}
				return m.supervisedExec(c, p, res.ID), "", nil
			}
			return nil, fmt.Sprintf("sandbox supervisor lost the request (%v); using the plain Engine exec path", openErr), nil
		}
	}
	return nil, "", fmt.Errorf("sandbox %s: %w (%v) and the supervisor cannot be asked: %w", res.Name, ErrStartUncertain, openErr, err)
}

// RecoveredSession is a command the supervisor of a sandbox knows about,
// running or finished, as a restarted daemon finds it.
type RecoveredSession struct {
	ContainerID   string `json:"containerId"`
	ContainerName string `json:"containerName"`
	ScopeKey      string `json:"scopeKey"`
	// Engine names the Engine of the sandbox.
	Engine string `json:"engine"`
	// ID is the durable session id (= the SANDBOXCTL_RUN tag, = ExecOptions.Tag).
	ID         string            `json:"id"`
	Argv       []string          `json:"argv"`
	Dir        string            `json:"dir,omitempty"`
	PTY        bool              `json:"tty,omitempty"`
	KeepStdin  bool              `json:"stdin,omitempty"`
	AgentID    string            `json:"agentId,omitempty"`
	SessionKey string            `json:"sessionKey,omitempty"`
	Meta       map[string]string `json:"meta,omitempty"` // ExecOptions.Meta as given
	PID        int               `json:"pid"`
	StartedAt  time.Time         `json:"startedAt"`
	Running    bool              `json:"running"`
	// ExitCode and Signal are set once it ended (Signal with ExitCode -1).
	ExitCode  *int      `json:"exitCode,omitempty"`
	Signal    string    `json:"signal,omitempty"`
	EndedAt   time.Time `json:"endedAt,omitzero"`
	InputWait bool      `json:"inputWait,omitempty"`
	// Output is what the supervisor kept (stdout and stderr interleaved:
	// all output up to supervisor.DefaultLogCap bytes, then the last
	// DefaultLogCap to twice that); Dropped counts older bytes no longer
	// kept.
	Output  []byte `json:"-"`
	Dropped int64  `json:"dropped,omitempty"`
	// StdoutOffset and StderrOffset are the byte counts covered by Output;
	// Reattach resumes streaming after them.
	StdoutOffset int64 `json:"stdoutOffset"`
	StderrOffset int64 `json:"stderrOffset"`

	info supervisor.SessionInfo
}

// Sessions lists every session of every running supervised sandbox of this
// Manager, oldest first, with its output so far. A restarted daemon calls it
// once to re-adopt them; Reattach resumes a running one.
func (m *DockerEngine) Sessions(ctx context.Context) ([]RecoveredSession, error) {
	list, err := m.List(ctx)
	if err != nil {
		return nil, err
	}
	var out []RecoveredSession
	var errs []error
	for _, c := range list {
		// A paused sandbox is included (issue 32 item 5): paused idle by
		// the previous daemon, it holds finished sessions; paused behind
		// the daemon's back, running ones. containerSessions resumes it:
		// its supervisor answers only then.
		if (c.State != "running" && c.State != "paused") || c.Pool == PoolReady {
			continue
		}
		rs, err := m.containerSessions(ctx, c)
		if err != nil {
			errs = append(errs, err)
		}
		out = append(out, rs...) // what was found, even beside an error
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].StartedAt.Before(out[j].StartedAt) })
	return out, errors.Join(errs...)
}

func (m *DockerEngine) containerSessions(ctx context.Context, c Info) ([]RecoveredSession, error) {
	insp, err := m.cli.ContainerInspect(ctx, c.ID, client.ContainerInspectOptions{})
	if err != nil {
		return nil, m.classify("inspect sandbox "+c.Name, err)
	}
	if insp.Container.Config == nil || insp.Container.Config.Labels[LabelSupervisor] == "" {
		return nil, nil // plain sandbox: nothing survives a restart
	}
	if st := insp.Container.State; st != nil && st.Paused {
		// Paused while idle, or behind the daemon's back: its supervisor
		// answers once resumed, and a command that runs there is seen
		// again rather than going on unseen once someone resumes it.
		if err := m.resume(ctx, c.ID, c.Name); err != nil {
			return nil, err
		}
		m.logf("sandbox %s: was paused when the daemon started; resumed to re-adopt its sessions", c.Name)
	}
	cl, err := m.supervisorClient(ctx, c.ID)
	if err != nil {
		return nil, err
	}
	infos, err := cl.List(ctx)
	if err != nil {
		return nil, fmt.Errorf("sandbox %s: list sessions: %w", c.Name, err)
	}
	out := make([]RecoveredSession, 0, len(infos))
	var refused []error
	for _, in := range infos {
		if in.Meta[MetaFiles] != "" || in.Meta[MetaRelay] != "" {
			// A run of the file tool (the files API) or a preview's
			// relay, not a command: its request or connection is gone
			// with the daemon that made it.
			if in.Running {
				_ = cl.KillTree(ctx, in.ID, time.Second)
			}
			_ = cl.Forget(ctx, in.ID)
			continue
		}
		agentID, sessionKey, err := sessionOwner(m.ownerLabels(c.ID, insp.Container.Config.Labels), in.Meta)
		if err != nil {
			refused = append(refused, fmt.Errorf("sandbox %s: session %s not adopted: %w", c.Name, in.ID, err))
			continue
		}
		rs := RecoveredSession{
			ContainerID: c.ID, ContainerName: c.Name, ScopeKey: c.ScopeKey, Engine: m.engine.Name,
			ID: in.ID, Argv: in.Argv, Dir: in.Dir, PTY: in.PTY, KeepStdin: in.KeepStdin,
			AgentID: agentID, SessionKey: sessionKey, Meta: in.Meta,
			PID: in.PID, StartedAt: time.UnixMilli(in.StartedAt), Running: in.Running, InputWait: in.InputWait,
			Dropped: in.Dropped, StdoutOffset: in.Stdout, StderrOffset: in.Stderr, info: in,
		}
		if in.Exit != nil {
			code := in.Exit.Code
			rs.ExitCode, rs.Signal, rs.EndedAt = &code, in.Exit.Signal, time.UnixMilli(in.Exit.EndedAt)
		}
		// Output and the resume offsets come from one read, so Reattach
		// neither repeats nor skips a byte.
		if rs.Output, rs.StdoutOffset, rs.StderrOffset, err = cl.Read(ctx, in.ID); err != nil {
			return nil, fmt.Errorf("sandbox %s: read session %s: %w", c.Name, in.ID, err)
		}
		out = append(out, rs)
	}
	return out, errors.Join(refused...)
}

// Reattach follows a session listed by Sessions: its output after
// StdoutOffset/StderrOffset, live, then its exit (at once for a finished
// one). The result is a Process.
func (m *DockerEngine) Reattach(ctx context.Context, rs RecoveredSession) (*SupervisedExec, error) {
	cl, err := m.supervisorClient(ctx, rs.ContainerID)
	if err != nil {
		return nil, err
	}
	info := rs.info
	if info.ID == "" {
		info = supervisor.SessionInfo{ID: rs.ID, PTY: rs.PTY, KeepStdin: rs.KeepStdin}
	}
	p, err := cl.Attach(ctx, info, rs.StdoutOffset, rs.StderrOffset)
	if err != nil {
		return nil, fmt.Errorf("sandbox %s: reattach %s: %w", rs.ContainerName, rs.ID, err)
	}
	return m.supervisedExec(cl, p, rs.ContainerID), nil
}

// ForgetSession drops a finished session from its sandbox's supervisor.
func (m *DockerEngine) ForgetSession(ctx context.Context, containerID, id string) error {
	cl, err := m.supervisorClient(ctx, containerID)
	if err != nil {
		return err
	}
	return cl.Forget(ctx, id)
}

// supervisorFallback reports that a supervised sandbox was reached without
// its supervisor.
func (m *DockerEngine) supervisorFallback(op string) {
	if m.obs != nil {
		m.obs.SupervisorFallback(op)
	}
}
