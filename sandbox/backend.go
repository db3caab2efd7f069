package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"

	"github.com/sandboxctl/sandboxctl/api"
	"github.com/sandboxctl/sandboxctl/sandbox/supervisor"
)

// Backend is a sandbox engine built outside this package (the Kubernetes
// engine of sandbox/kube) and handed to NewManager in Options.Backend by
// the composition root: the Manager then routes every call (the HTTP
// sandboxes API, the CLI, the files API, exec) to it, as it routes them
// to a DockerEngine. It is the part of an engine that differs; what every
// engine does the same way (finding a sandbox by ref, TTLs, pruning, the
// files API over the supervisor's file tool) the Manager does on top of it
// (backendEngine). What an engine cannot do is declared in Caps and
// answered with ErrNotImplemented naming it.
type Backend interface {
	// Name names the engine in Info.Engine, EngineStatus and errors
	// ("kubernetes").
	Name() string
	// Where says where it runs sandboxes (the cluster and namespace).
	Where() string
	Caps() BackendCaps
	// Ping checks that the engine answers.
	Ping(ctx context.Context) error
	// Close releases the engine's connections; its sandboxes go on.
	Close() error

	// Ensure returns scope s's running sandbox, creating it when there is
	// none.
	Ensure(ctx context.Context, s Scope) (EnsureResult, error)
	// Create makes scope s's sandbox with o (checked by the Manager); a
	// scope that has one already is a conflict.
	Create(ctx context.Context, s Scope, o CreateOptions) (Info, error)
	// List returns the engine's sandboxes, the untaken warm ones with
	// Pool PoolReady.
	List(ctx context.Context) ([]Info, error)
	// Remove removes the sandbox in (as List gave it); its commands end.
	Remove(ctx context.Context, in Info) error
	// SetExpiry records when the sandbox in is removed (zero: never).
	SetExpiry(ctx context.Context, in Info, at time.Time) error
	Explain(ctx context.Context, s Scope) (Explanation, error)
	// Pause and Resume the sandbox in (Caps.Pause), and return it as it
	// is then (a paused sandbox is still listed, in state "paused").
	Pause(ctx context.Context, in Info) (Info, error)
	Resume(ctx context.Context, in Info) (Info, error)

	// Start ensures scope s's sandbox and starts opts.Cmd there.
	Start(ctx context.Context, s Scope, opts ExecOptions) (*Started, error)
	// Supervisor is the supervisor connection of scope s's existing
	// sandbox (ErrNoSandbox when it has none): the files API runs the
	// supervisor's file tool over it. SupervisorOf is that of the sandbox
	// whose id is id (a restarted daemon re-adopts its sessions over it).
	// One connection per sandbox: a second would take the stream over.
	Supervisor(ctx context.Context, s Scope) (*supervisor.Client, error)
	SupervisorOf(ctx context.Context, id string) (*supervisor.Client, error)

	// StartPool starts filling the warm pool; Pool reports it.
	StartPool()
	Pool() PoolStatus
}

// BackendCaps is what a Backend does beyond the sandbox lifecycle and
// commands through the supervisor; the Manager answers ErrNotImplemented,
// naming the engine, for the rest.
type BackendCaps struct {
	// Pause: Pause and Resume keep the sandbox (and its workspace) while
	// it runs nothing.
	Pause bool
	// SupervisorPath is the supervisor binary in the sandbox: the files
	// API runs its file tool. "" : no files API.
	SupervisorPath string
}

// ErrNotImplemented classes what a sandbox engine cannot do (snapshots on
// Kubernetes, say); the message names the engine. HTTP answers 501.
var ErrNotImplemented = cerrdefs.ErrNotImplemented

// notImplemented is ErrNotImplemented for what on the engine named engine.
func notImplemented(engine, what string) error {
	return fmt.Errorf("%w: %s not supported by the %s sandbox engine", ErrNotImplemented, what, engine)
}

// backendEngine is a Backend as the Manager's engine (engines.go).
type backendEngine struct {
	b   Backend
	cfg Config
	reg *registry
	now func() time.Time

	mu       sync.Mutex
	lastErr  error     // of the last Ping
	since    time.Time // of the current health (Ping's answer)
	status   EngineStatus
	statusAt time.Time // of status (healthStatus)
}

var _ engine = (*backendEngine)(nil)

func (e *backendEngine) unsupported(what string) error { return notImplemented(e.b.Name(), what) }

// --- sandboxEngine

func (e *backendEngine) Ensure(ctx context.Context, s Scope) (EnsureResult, error) {
	res, err := e.b.Ensure(ctx, s)
	if err == nil {
		e.reg.touch(res.Name, res.ScopeKey)
	}
	return res, err
}

func (e *backendEngine) Create(ctx context.Context, s Scope, o CreateOptions) (Info, error) {
	if err := o.check(e.cfg); err != nil {
		return Info{}, err
	}
	in, err := e.b.Create(ctx, s, o)
	if err == nil {
		e.reg.touch(in.Name, in.ScopeKey)
		in.Engine = e.b.Name()
	}
	return in, err
}

func (e *backendEngine) List(ctx context.Context) ([]Info, error) {
	list, err := e.b.List(ctx)
	for i := range list {
		list[i].Engine = e.b.Name()
		if list[i].LastUsedAt.IsZero() && list[i].Pool != PoolReady {
			list[i].LastUsedAt = e.reg.lastUsed(list[i].Name)
		}
	}
	return list, err
}

func (e *backendEngine) Get(ctx context.Context, ref string) (Info, error) {
	list, err := e.List(ctx)
	if err != nil {
		return Info{}, err
	}
	return findRef(list, ref)
}

func (e *backendEngine) remove(ctx context.Context, in Info) error {
	if err := e.b.Remove(ctx, in); err != nil {
		return err
	}
	e.reg.forget(in.Name)
	return nil
}

func (e *backendEngine) RemoveByName(ctx context.Context, name string) error {
	list, err := e.List(ctx)
	if err != nil {
		return err
	}
	for _, in := range list {
		if in.Name == name || in.ID == name {
			return e.remove(ctx, in)
		}
	}
	return fmt.Errorf("%w: no sandbox named %s", ErrNotFound, name)
}

// Delete removes the sandbox ref; its workspace is the sandbox's own
// volume on this engine and goes with it either way.
func (e *backendEngine) Delete(ctx context.Context, ref string, _ bool) (Info, error) {
	in, err := e.Get(ctx, ref)
	if err != nil {
		return in, err
	}
	return in, e.remove(ctx, in)
}

func (e *backendEngine) Pause(ctx context.Context, ref string) (Info, error) {
	return e.pauseResume(ctx, ref, "pausing a sandbox is", e.b.Pause)
}

func (e *backendEngine) Resume(ctx context.Context, ref string) (Info, error) {
	return e.pauseResume(ctx, ref, "resuming a sandbox is", e.b.Resume)
}

func (e *backendEngine) pauseResume(ctx context.Context, ref, what string, fn func(context.Context, Info) (Info, error)) (Info, error) {
	if !e.b.Caps().Pause {
		return Info{}, e.unsupported(what)
	}
	in, err := e.Get(ctx, ref)
	if err != nil {
		return in, err
	}
	if in.Pool == PoolReady {
		return in, fmt.Errorf("%w: sandbox %s is a warm-pool sandbox", errBadInput, in.Name)
	}
	out, err := fn(ctx, in)
	if err != nil {
		return in, err
	}
	out.Engine = e.b.Name()
	return out, nil
}

func (e *backendEngine) Extend(ctx context.Context, ref string, ttl time.Duration) (Info, error) {
	if ttl <= 0 || ttl > MaxTTL {
		return Info{}, fmt.Errorf("%w: ttl %s: want more than 0 and at most %s", errBadInput, ttl, MaxTTL)
	}
	in, err := e.Get(ctx, ref)
	if err != nil {
		return in, err
	}
	if in.Pool == PoolReady {
		return in, fmt.Errorf("%w: sandbox %s is a warm-pool sandbox: it has no TTL", errBadInput, in.Name)
	}
	if err := e.b.SetExpiry(ctx, in, e.now().Add(ttl)); err != nil {
		return in, err
	}
	return e.Get(ctx, in.ID)
}

// Prune removes the sandboxes idle or old beyond sandbox.prune's rules,
// and warm ones of another config or not running (DockerEngine.Prune's
// rules).
func (e *backendEngine) Prune(ctx context.Context, dryRun bool) ([]Info, error) {
	list, err := e.List(ctx)
	if err != nil {
		return nil, err
	}
	now := e.now()
	var pruned []Info
	var errs []error
	for _, c := range list {
		if c.Pool == PoolReady {
			if c.Current && c.State == "running" {
				continue
			}
		} else {
			last := c.LastUsedAt
			if last.IsZero() {
				last = c.CreatedAt
			}
			idle := e.cfg.Prune.IdleHours > 0 && now.Sub(last) > time.Duration(e.cfg.Prune.IdleHours*float64(time.Hour))
			old := e.cfg.Prune.MaxAgeDays > 0 && now.Sub(c.CreatedAt) > time.Duration(e.cfg.Prune.MaxAgeDays*24*float64(time.Hour))
			if !idle && !old {
				continue
			}
		}
		if !dryRun {
			if err := e.remove(ctx, c); err != nil {
				errs = append(errs, fmt.Errorf("sandbox %s: %w", c.Name, err))
				continue
			}
		}
		pruned = append(pruned, c)
	}
	return pruned, errors.Join(errs...)
}

// PauseIdle pauses nothing: idle sandboxes are not paused on this engine
// (sandbox.pauseIdleMinutes is a Docker Engine setting).
func (e *backendEngine) PauseIdle(context.Context) (int, error) { return 0, nil }

func (e *backendEngine) ExpireDue(ctx context.Context) ([]Info, error) {
	list, err := e.List(ctx)
	if err != nil {
		return nil, err
	}
	now := e.now()
	var gone []Info
	var errs []error
	for _, in := range list {
		if in.ExpiresAt.IsZero() || now.Before(in.ExpiresAt) {
			continue
		}
		if err := e.remove(ctx, in); err != nil && !errors.Is(err, ErrNotFound) {
			errs = append(errs, fmt.Errorf("sandbox %s: %w", in.Name, err))
			continue
		}
		gone = append(gone, in)
	}
	return gone, errors.Join(errs...)
}

func (e *backendEngine) Explain(ctx context.Context, s Scope) (Explanation, error) {
	ex, err := e.b.Explain(ctx, s)
	ex.Engine = e.b.Name()
	return ex, err
}

// PruneSupervisedImages removes nothing: the engine derives no images
// (the supervisor is copied into each sandbox).
func (e *backendEngine) PruneSupervisedImages(context.Context) ([]string, error) { return nil, nil }

func (e *backendEngine) Snapshot(context.Context, Scope, string) (SnapshotInfo, error) {
	return SnapshotInfo{}, e.unsupported("snapshots are")
}

func (e *backendEngine) Rollback(context.Context, Scope, string) (Info, error) {
	return Info{}, e.unsupported("snapshots (rollback) are")
}

func (e *backendEngine) Fork(context.Context, Scope, string, Scope) (Info, error) {
	return Info{}, e.unsupported("snapshots (fork) are")
}

func (e *backendEngine) Pool() PoolStatus { return e.b.Pool() }
func (e *backendEngine) startPool()       { e.b.StartPool() }

// --- processEngine

func (e *backendEngine) Start(ctx context.Context, s Scope, opts ExecOptions) (*Started, error) {
	st, err := e.b.Start(ctx, s, opts)
	if err == nil {
		e.reg.touch(st.Ensure.Name, st.Ensure.ScopeKey)
		st.Ensure.Engine = e.b.Name()
	}
	return st, err
}

// Run runs cmd in scope s's sandbox through Start and returns its output
// (stdout then stderr) and exit code.
func (e *backendEngine) Run(ctx context.Context, s Scope, cmd []string) (string, int, error) {
	st, err := e.Start(ctx, s, ExecOptions{Cmd: cmd})
	if err != nil {
		return "", -1, err
	}
	defer func() {
		if fn := st.HostStarted().Forget; fn != nil {
			_ = fn(context.WithoutCancel(ctx))
		}
	}()
	var out, errOut bytes.Buffer
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if r := st.Stderr(); r != nil {
			_, _ = io.Copy(&errOut, r)
		}
	}()
	_, _ = io.Copy(&out, st.Stdout())
	wg.Wait()
	code, sig, err := st.Wait(ctx)
	if err != nil {
		return out.String() + errOut.String(), -1, err
	}
	if sig != "" {
		return out.String() + errOut.String(), -1, fmt.Errorf("sandbox run: killed by %s", sig)
	}
	return out.String() + errOut.String(), code, nil
}

func (e *backendEngine) Attach(context.Context, Scope, ExecOptions) (*Exec, EnsureResult, error) {
	return nil, EnsureResult{}, e.unsupported("the plain Engine exec path is")
}

func (e *backendEngine) ExecIn(context.Context, string, ExecOptions) (*Exec, error) {
	return nil, e.unsupported("the plain Engine exec path is")
}

func (e *backendEngine) KillTagged(context.Context, string, string, time.Duration) error {
	return e.unsupported("killing by run tag is")
}

// Sessions lists the sessions the supervisors of the running sandboxes
// hold, as DockerEngine.Sessions does: the file tool's runs are ended and
// dropped, a session whose metadata names another owner than its sandbox
// is refused (sessionOwner).
func (e *backendEngine) Sessions(ctx context.Context) ([]RecoveredSession, error) {
	list, err := e.List(ctx)
	if err != nil {
		return nil, err
	}
	var out []RecoveredSession
	var errs []error
	for _, in := range list {
		if in.State != "running" || in.Pool == PoolReady {
			continue
		}
		rs, err := e.sandboxSessions(ctx, in)
		if err != nil {
			errs = append(errs, err)
		}
		out = append(out, rs...)
	}
	slices.SortStableFunc(out, func(a, b RecoveredSession) int { return a.StartedAt.Compare(b.StartedAt) })
	return out, errors.Join(errs...)
}

func (e *backendEngine) sandboxSessions(ctx context.Context, in Info) ([]RecoveredSession, error) {
	c, err := e.b.SupervisorOf(ctx, in.ID)
	if err != nil {
		return nil, err
	}
	infos, err := c.List(ctx)
	if err != nil {
		return nil, fmt.Errorf("sandbox %s: list sessions: %w", in.Name, err)
	}
	owner := map[string]string{LabelScopeKey: in.ScopeKey, LabelAgentID: in.AgentID, LabelSessionKey: in.SessionKey}
	var out []RecoveredSession
	var refused []error
	for _, si := range infos {
		if si.Meta[MetaFiles] != "" || si.Meta[MetaRelay] != "" {
			if si.Running {
				_ = c.KillTree(ctx, si.ID, time.Second)
			}
			_ = c.Forget(ctx, si.ID)
			continue
		}
		agentID, sessionKey, err := sessionOwner(owner, si.Meta)
		if err != nil {
			refused = append(refused, fmt.Errorf("sandbox %s: session %s not adopted: %w", in.Name, si.ID, err))
			continue
		}
		rs := RecoveredSession{
			ContainerID: in.ID, ContainerName: in.Name, ScopeKey: in.ScopeKey, Engine: e.b.Name(),
			ID: si.ID, Argv: si.Argv, Dir: si.Dir, PTY: si.PTY, KeepStdin: si.KeepStdin,
			AgentID: agentID, SessionKey: sessionKey, Meta: si.Meta,
			PID: si.PID, StartedAt: time.UnixMilli(si.StartedAt), Running: si.Running, InputWait: si.InputWait,
			Dropped: si.Dropped, StdoutOffset: si.Stdout, StderrOffset: si.Stderr, info: si,
		}
		if si.Exit != nil {
			code := si.Exit.Code
			rs.ExitCode, rs.Signal, rs.EndedAt = &code, si.Exit.Signal, time.UnixMilli(si.Exit.EndedAt)
		}
		// One read for the output and the offsets: Reattach neither
		// repeats nor skips a byte.
		if rs.Output, rs.StdoutOffset, rs.StderrOffset, err = c.Read(ctx, si.ID); err != nil {
			return out, fmt.Errorf("sandbox %s: read session %s: %w", in.Name, si.ID, err)
		}
		out = append(out, rs)
	}
	return out, errors.Join(refused...)
}

// Reattach follows a session listed by Sessions after its offsets.
func (e *backendEngine) Reattach(ctx context.Context, rs RecoveredSession) (*SupervisedExec, error) {
	c, err := e.b.SupervisorOf(ctx, rs.ContainerID)
	if err != nil {
		return nil, err
	}
	info := rs.info
	if info.ID == "" {
		info = supervisor.SessionInfo{ID: rs.ID, PTY: rs.PTY, KeepStdin: rs.KeepStdin}
	}
	p, err := c.Attach(ctx, info, rs.StdoutOffset, rs.StderrOffset)
	if err != nil {
		return nil, fmt.Errorf("sandbox %s: reattach %s: %w", rs.ContainerName, rs.ID, err)
	}
	id, sid := rs.ContainerID, rs.ID
	return NewSupervisedExec(c, p, id, func(ctx context.Context) error { return e.ForgetSession(ctx, id, sid) }), nil
}

// ForgetSession drops a finished session from its sandbox's supervisor.
func (e *backendEngine) ForgetSession(ctx context.Context, sandboxID, id string) error {
	c, err := e.b.SupervisorOf(ctx, sandboxID)
	if err != nil {
		return err
	}
	return c.Forget(ctx, id)
}

func (e *backendEngine) DialPort(context.Context, Scope, int) (net.Conn, error) {
	return nil, e.unsupported("reaching a sandbox's ports (previews) is")
}

// --- fileEngine: the supervisor's file tool, as on a supervised Docker
// sandbox (files.go).

func (e *backendEngine) fileClient(ctx context.Context, s Scope, p string) (*supervisor.Client, string, error) {
	if err := CheckFilePath(p); err != nil {
		return nil, "", err
	}
	tool := e.b.Caps().SupervisorPath
	if tool == "" {
		return nil, "", e.unsupported("the files API is")
	}
	c, err := e.b.Supervisor(ctx, s)
	return c, tool, err
}

func (e *backendEngine) StatFile(ctx context.Context, s Scope, p string) (api.FileInfo, error) {
	c, tool, err := e.fileClient(ctx, s, p)
	if err != nil {
		return api.FileInfo{}, err
	}
	var out bytes.Buffer
	if err := runFileTool(ctx, c, tool, []string{"stat", p}, nil, &out); err != nil {
		return api.FileInfo{}, err
	}
	var fi api.FileInfo
	return fi, decodeToolJSON(out.Bytes(), &fi)
}

func (e *backendEngine) ListFiles(ctx context.Context, s Scope, p string) (api.FileList, error) {
	c, tool, err := e.fileClient(ctx, s, p)
	if err != nil {
		return api.FileList{}, err
	}
	var out bytes.Buffer
	if err := runFileTool(ctx, c, tool, []string{"list", strconv.Itoa(maxListEntries), p}, nil, &out); err != nil {
		return api.FileList{}, err
	}
	var l api.FileList
	return l, decodeToolJSON(out.Bytes(), &l)
}

func (e *backendEngine) ReadFiles(ctx context.Context, s Scope, p string, limit int64, w io.Writer) error {
	c, tool, err := e.fileClient(ctx, s, p)
	if err != nil {
		return err
	}
	return runFileTool(ctx, c, tool, []string{"get", strconv.FormatInt(limit, 10), p}, nil, &cappedWriter{w: w, left: limit + tarOverhead(limit)})
}

func (e *backendEngine) WriteFiles(ctx context.Context, s Scope, dir string, limit int64, r io.Reader) error {
	c, tool, err := e.fileClient(ctx, s, dir)
	if err != nil {
		return err
	}
	return runFileTool(ctx, c, tool, []string{"put", strconv.FormatInt(limit, 10), dir}, r, nil)
}

func (e *backendEngine) WriteFile(ctx context.Context, s Scope, p string, mode fs.FileMode, limit int64, r io.Reader) error {
	c, tool, err := e.fileClient(ctx, s, p)
	if err != nil {
		return err
	}
	return runFileTool(ctx, c, tool, []string{"write", strconv.FormatInt(limit, 10), strconv.FormatUint(uint64(mode.Perm()), 10), p}, r, nil)
}

func (e *backendEngine) RemoveFile(ctx context.Context, s Scope, p string) error {
	c, tool, err := e.fileClient(ctx, s, p)
	if err != nil {
		return err
	}
	return runFileTool(ctx, c, tool, []string{"rm", p}, nil, nil)
}

// --- engineProbe (a Manager over a Backend is a fleet of one: no
// placement, and the engine checks its own health).

func (e *backendEngine) Ping(ctx context.Context) error {
	err := e.b.Ping(ctx)
	e.mu.Lock()
	if (err == nil) != (e.lastErr == nil) || e.since.IsZero() {
		e.since = time.Now()
	}
	e.lastErr = err
	e.mu.Unlock()
	return err
}

func (e *backendEngine) probe(ctx context.Context) error { return e.b.Ping(ctx) }
func (e *backendEngine) host() string                    { return e.b.Where() }
func (e *backendEngine) facts(context.Context) (engineFacts, error) {
	return engineFacts{}, nil
}
func (e *backendEngine) hasImage(context.Context) bool { return true }

func (e *backendEngine) has(ctx context.Context, ref string) (string, bool) {
	in, err := e.Get(ctx, ref)
	return in.ID, err == nil
}

func (e *backendEngine) holds(ctx context.Context, name string) (string, bool) {
	return e.has(ctx, name)
}

func (e *backendEngine) stalled(error)              {}
func (e *backendEngine) answering()                 {}
func (e *backendEngine) failAll(error) int          { return 0 }
func (e *backendEngine) onEventsBroken(func(error)) {}
func (e *backendEngine) Close() error               { return e.b.Close() }

// healthStatusTTL is how long a health check answers for (the metrics
// ask for it twice a scrape).
const healthStatusTTL = time.Second

// healthStatus pings the engine (bounded) and reports it, with its
// sandboxes; a check less than healthStatusTTL old answers for it.
func (e *backendEngine) healthStatus() EngineStatus {
	e.mu.Lock()
	if st, at := e.status, e.statusAt; !at.IsZero() && time.Since(at) < healthStatusTTL {
		e.mu.Unlock()
		return st
	}
	e.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := e.Ping(ctx)
	st := EngineStatus{Name: e.b.Name(), Host: e.b.Where(), Healthy: err == nil}
	if err != nil {
		st.Error = err.Error()
	}
	if list, lerr := e.b.List(ctx); lerr == nil {
		for _, in := range list {
			if in.Pool != PoolReady {
				st.Sandboxes++
			}
		}
	}
	e.mu.Lock()
	st.Since = e.since
	e.status, e.statusAt = st, time.Now()
	e.mu.Unlock()
	return st
}
