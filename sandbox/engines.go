package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/cli/cli/connhelper"
	"github.com/moby/moby/client"

	"github.com/sandboxctl/sandboxctl/api"
	"github.com/sandboxctl/sandboxctl/sandbox/sandboxconfig"
)

// Engine is a parsed entry of sandbox.engines.
type Engine = sandboxconfig.Engine

// ErrEngineDown means the Engine that holds a sandbox (or every Engine)
// does not answer; the message names it. It is of the Unavailable class.
var ErrEngineDown = fmt.Errorf("%w: sandbox Engine down", cerrdefs.ErrUnavailable)

// DefaultEngineHealthInterval is how often each Engine of a multi-Engine
// Manager is pinged (its event stream breaking triggers a ping at once).
const DefaultEngineHealthInterval = time.Second

// engineDownError names the Engine that went away and why.
type engineDownError struct {
	name, host string
	err        error
}

func (e *engineDownError) Error() string {
	if errors.Is(e.err, context.DeadlineExceeded) {
		return fmt.Sprintf("sandbox Engine %q at %s is not answering (%v)", e.name, e.host, e.err)
	}
	return fmt.Sprintf("sandbox Engine %q at %s is down (%v)", e.name, e.host, e.err)
}
func (e *engineDownError) Is(target error) bool {
	return target == ErrEngineDown || target == cerrdefs.ErrUnavailable
}
func (e *engineDownError) Unwrap() error { return e.err }

// newEngineClient connects to e: the environment's Engine when e has no
// address, else its unix socket, its TCP port with TLS client
// certificates (docker/go-connections tlsconfig, through the client), or
// over ssh (docker/cli's connection helper: each connection is an ssh
// process running `docker system dial-stdio` on the Engine's host).
func newEngineClient(e Engine) (*client.Client, error) {
	opts := []client.Opt{client.FromEnv}
	switch e.Scheme {
	case "unix":
		opts = []client.Opt{client.WithHost(e.Address)}
	case "tcp":
		opts = []client.Opt{client.WithHost(e.Address), client.WithTLSClientConfig(e.TLS.CA, e.TLS.Cert, e.TLS.Key)}
	case "ssh":
		if _, err := exec.LookPath("ssh"); err != nil {
			return nil, fmt.Errorf("sandbox: Engine %q at %s needs the ssh client: %w", e.Name, e.Address, err)
		}
		var flags []string
		if e.SSHConfig != "" {
			flags = append(flags, "-F", e.SSHConfig)
		}
		h, err := connhelper.GetConnectionHelperWithSSHOpts(e.Address, flags)
		if err != nil {
			return nil, fmt.Errorf("sandbox: Engine %q: %w", e.Name, err)
		}
		opts = []client.Opt{client.WithHost(h.Host), client.WithDialContext(h.Dialer)}
	}
	cli, err := client.New(opts...)
	if err != nil {
		return nil, fmt.Errorf("sandbox: Engine %q client: %w", e.Name, err)
	}
	return cli, nil
}

// EngineName is the name of the Engine of a single-Engine Manager ("" for
// a Manager over several).
func (m *Manager) EngineName() string {
	if mb := m.fleet.one(); mb != nil {
		return mb.eng.Name
	}
	return ""
}

// Manager creates, reuses, recreates and removes sandboxes on the one or
// more Engines of sandbox.engines. Each Engine is a DockerEngine of its
// own (its client, derived images, supervisor connections, warm pool and
// event follower); the Manager places a new sandbox on one, routes the
// calls about a sandbox to the Engine that holds it and fans the rest out
// (manager_api.go). Which Engine serves a scope is learnt from the Engines
// themselves (their container labels), never from a local file.
//
// A Manager of one Engine routes everything to it, and that Engine checks
// its own health (health.go); a Manager of several checks each (check),
// places by load (placement.go) and refuses work for an Engine that is
// down with ErrEngineDown.
type Manager struct {
	cfg   Config
	reg   *registry
	logf  func(format string, args ...any)
	fleet *fleet
	// local is the first Engine's DockerEngine: it answers for what every
	// Engine of the Manager shares on this host (the workspace layout, the
	// state directory's snapshots, the supervisor binary). It is nil for a
	// Manager over a Backend, which is set instead.
	local   *DockerEngine
	backend Backend

	scopeLocks scopeLocks
}

// NewManager validates the config and prepares a Manager with one
// DockerEngine per configured Engine; they share the registry of
// last-used times. It does not contact an Engine, so a daemon can start
// while Docker is down; the first call that needs the Engine reports
// ErrDockerUnreachable.
func NewManager(ctx context.Context, opts Options) (*Manager, error) {
	if err := opts.Config.Validate(); err != nil {
		return nil, err
	}
	if opts.StateDir == "" {
		return nil, errors.New("sandbox: Options.StateDir is required")
	}
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	m := &Manager{cfg: opts.Config, logf: opts.Logf,
		reg: newRegistry(filepath.Join(opts.StateDir, "sandboxes.json"), now)}
	if m.logf == nil {
		m.logf = func(string, ...any) {}
	}
	f := &fleet{interval: opts.EngineHealthInterval, logf: m.logf, placed: map[string]*member{}, ids: map[string]*member{}}
	if f.interval <= 0 {
		f.interval = DefaultEngineHealthInterval
	}
	m.fleet = f
	if b := opts.Backend; b != nil {
		// One engine built outside (Kubernetes): everything goes to it.
		m.backend = b
		be := &backendEngine{b: b, cfg: opts.Config, reg: m.reg, now: now}
		f.members = []*member{{eng: Engine{Name: b.Name()}, m: be, kick: make(chan struct{}, 1)}}
		return m, nil
	}
	engines, err := sandboxconfig.ParseEngines(opts.Config.Engines)
	if err != nil {
		return nil, err
	}
	if len(engines) == 1 {
		d, err := newDockerEngine(opts, engines[0], m.reg)
		if err != nil {
			return nil, err
		}
		f.members = []*member{{eng: engines[0], m: d, kick: make(chan struct{}, 1)}}
		m.local = d
		d.startHealth(opts.EngineHealthInterval)
		return m, nil
	}
	for i, e := range engines {
		mo := opts
		mo.Config.Engines = []sandboxconfig.EngineConfig{opts.Config.Engines[i]}
		cli, err := newEngineClient(e)
		if err != nil {
			f.close()
			return nil, err
		}
		mo.Client = cli
		d, err := newDockerEngine(mo, e, m.reg)
		if err != nil {
			_ = cli.Close()
			f.close()
			return nil, err
		}
		d.ownsClient = true
		mb := &member{eng: e, m: d, kick: make(chan struct{}, 1)}
		d.onEventsBroken(func(error) {
			select {
			case mb.kick <- struct{}{}:
			default:
			}
		})
		f.members = append(f.members, mb)
		if m.local == nil {
			m.local = d
		}
	}
	f.startHealth()
	return m, nil
}

// fleet is the Engine set of a Manager: its members, where scopes and
// containers live, and (with several Engines) their health.
type fleet struct {
	members  []*member
	interval time.Duration
	logf     func(format string, args ...any)

	// placeMu makes choosing an Engine and counting the new sandbox on it
	// one step, so concurrent placements spread.
	placeMu sync.Mutex
	mu      sync.Mutex
	placed  map[string]*member // scope key -> the Engine serving it
	ids     map[string]*member // container id -> Engine

	firstCheck sync.Once
	bg         sync.WaitGroup // re-adoptions under way
	cancel     context.CancelFunc
	done       chan struct{}
}

// member is one Engine of a fleet and its health.
type member struct {
	eng  Engine
	m    engine
	kick chan struct{} // ping now (its event stream broke)

	mu       sync.Mutex
	checked  bool // a health check finished
	healthy  bool
	since    time.Time // of the current state
	lastErr  error
	memTotal int64
	count    int // sandboxes of this Manager on the Engine
	imageOK  bool
	// noRuntime is the configured runtime (sandbox.docker.runtime) when
	// the Engine does not list it, else "": such an Engine takes no new
	// sandboxes until it registers the runtime.
	noRuntime string
	stopped   int // sandboxes found stopped when it last (re)joined
	readopted int // of those, started again
}

func (mb *member) state() (checked, healthy bool, err error) {
	mb.mu.Lock()
	defer mb.mu.Unlock()
	return mb.checked, mb.healthy, mb.lastErr
}

func (mb *member) downErr() error {
	_, _, err := mb.state()
	if err == nil {
		err = errors.New("no answer yet")
	}
	return &engineDownError{name: mb.eng.Name, host: mb.m.host(), err: err}
}

// startHealth checks every Engine every interval until close.
func (f *fleet) startHealth() {
	hctx, cancel := context.WithCancel(context.Background())
	f.cancel, f.done = cancel, make(chan struct{})
	var wg sync.WaitGroup
	for _, mb := range f.members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f.watchHealth(hctx, mb)
		}()
	}
	go func() {
		wg.Wait()
		close(f.done)
	}()
}

// one is the Engine of a fleet of one (nil for several): everything goes
// to it, and it checks its own health.
func (f *fleet) one() *member {
	if len(f.members) == 1 {
		return f.members[0]
	}
	return nil
}

func (f *fleet) close() error {
	if f.cancel != nil {
		f.cancel()
		<-f.done
		f.bg.Wait()
	}
	var errs []error
	for _, mb := range f.members {
		errs = append(errs, mb.m.Close())
	}
	return errors.Join(errs...)
}

// watchHealth pings mb every interval, and at once when its event stream
// breaks, until ctx ends.
func (f *fleet) watchHealth(ctx context.Context, mb *member) {
	t := time.NewTicker(f.interval)
	defer t.Stop()
	for {
		f.check(ctx, mb)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-mb.kick:
		}
	}
}

// check pings mb once and acts on a change: an Engine that stops
// answering fails every command followed in its sandboxes, naming it; one
// that answers again has its sandboxes re-adopted.
func (f *fleet) check(ctx context.Context, mb *member) {
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	err := mb.m.probe(pctx)
	cancel()
	if ctx.Err() != nil {
		return
	}
	mb.mu.Lock()
	wasChecked, wasHealthy := mb.checked, mb.healthy
	mb.mu.Unlock()
	if err != nil {
		mb.mu.Lock()
		mb.checked, mb.healthy, mb.lastErr = true, false, err
		if wasHealthy || !wasChecked {
			mb.since = time.Now()
		}
		mb.mu.Unlock()
		reason := mb.downErr()
		if errors.Is(err, context.DeadlineExceeded) {
			// Stalled: the calls waiting on it end now; its commands may
			// go on (their supervisor connections are left alone), so
			// their sessions say their state is unknown until it answers.
			mb.m.stalled(reason)
			if wasHealthy {
				f.logf("sandbox: %v; its sessions are unknown and it takes no new sandboxes until it answers", reason)
			}
			return
		}
		if wasHealthy {
			f.logf("sandbox: %v; its sessions fail and it takes no new sandboxes until it answers", reason)
			n := mb.m.failAll(reason)
			f.logf("sandbox: Engine %q: failed %d supervisor connections", mb.eng.Name, n)
		}
		return
	}
	mb.m.answering()
	if wasHealthy {
		mb.mu.Lock()
		imageOK, noRuntime := mb.imageOK, mb.noRuntime
		mb.mu.Unlock()
		if !imageOK { // loaded since?
			ictx, cancel := context.WithTimeout(ctx, 2*time.Second)
			ok := mb.m.hasImage(ictx)
			cancel()
			mb.mu.Lock()
			mb.imageOK = ok
			mb.mu.Unlock()
		}
		if noRuntime != "" { // registered since (dockerd reloads runtimes on SIGHUP)?
			ictx, cancel := context.WithTimeout(ctx, 2*time.Second)
			facts, ierr := mb.m.facts(ictx)
			cancel()
			if ierr == nil {
				mb.mu.Lock()
				mb.noRuntime = facts.missingRuntime
				mb.mu.Unlock()
			}
		}
		return
	}
	// (Re)joined: learn what it holds, then take new sandboxes.
	if err := f.adopt(ctx, mb); err != nil {
		mb.mu.Lock()
		mb.checked, mb.lastErr = true, err
		mb.mu.Unlock()
		f.logf("sandbox: Engine %q answers but its sandboxes cannot be listed: %v", mb.eng.Name, err)
		return
	}
	mb.mu.Lock()
	mb.checked, mb.healthy, mb.lastErr, mb.since = true, true, nil, time.Now()
	mb.mu.Unlock()
	if wasChecked {
		f.logf("sandbox: Engine %q answers again", mb.eng.Name)
	}
}

// adopt lists mb's sandboxes, records which scopes it serves (a scope
// placed elsewhere meanwhile stays there) and starts the stopped ones
// again, so their agents find them where they were.
func (f *fleet) adopt(ctx context.Context, mb *member) error {
	actx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	facts, err := mb.m.facts(actx)
	if err != nil {
		return err
	}
	imageOK := mb.m.hasImage(actx)
	list, err := mb.m.List(actx)
	if err != nil {
		return err
	}
	var mine []Info
	f.mu.Lock()
	for _, c := range list {
		f.ids[c.ID] = mb
		if cur, ok := f.placed[c.ScopeKey]; ok && cur != mb {
			f.logf("sandbox: scope %s has a sandbox on Engine %q and on %q (placed there while %q was down); %q's is left to prune",
				c.ScopeKey, cur.eng.Name, mb.eng.Name, mb.eng.Name, mb.eng.Name)
			continue
		}
		f.placed[c.ScopeKey] = mb
		mine = append(mine, c)
	}
	f.mu.Unlock()
	var stopped []Info
	for _, c := range mine {
		if c.State != "running" {
			stopped = append(stopped, c)
		}
	}
	mb.mu.Lock()
	mb.memTotal, mb.count, mb.imageOK = facts.memTotal, len(list), imageOK
	mb.noRuntime = facts.missingRuntime
	mb.stopped, mb.readopted = len(stopped), 0
	mb.mu.Unlock()
	// Stopped with its Engine (a dockerd without live-restore stops what
	// it finds running when it starts again): start them where they are,
	// a few at a time, once the Engine takes requests again.
	f.readopt(ctx, mb, stopped)
	return nil
}

// readopt starts the stopped sandboxes of mb again (in the background,
// after mb is marked healthy; requests for them meanwhile start them
// themselves).
func (f *fleet) readopt(ctx context.Context, mb *member, stopped []Info) {
	if len(stopped) == 0 {
		return
	}
	f.bg.Add(1)
	go func() {
		defer f.bg.Done()
		sem := make(chan struct{}, 4)
		var wg sync.WaitGroup
		for _, c := range stopped {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				actx, cancel := context.WithTimeout(ctx, time.Minute)
				defer cancel()
				if _, err := mb.m.Ensure(actx, Scope{AgentID: c.AgentID, SessionKey: c.SessionKey}); err != nil {
					f.logf("sandbox: Engine %q: re-adopt %s: %v", mb.eng.Name, c.Name, err)
					return
				}
				mb.mu.Lock()
				mb.readopted++
				mb.mu.Unlock()
			}()
		}
		wg.Wait()
	}()
}

// failAll ends every supervisor connection of this (member) Manager with
// reason: the commands they follow fail at once instead of waiting for an
// Engine that is gone. It returns how many ended.
func (m *DockerEngine) failAll(reason error) int {
	n := 0
	now := time.Now()
	for _, id := range m.clients.ids() {
		m.warm.forgetID(id)
		if m.clients.fail(id, now, reason) {
			n++
		}
	}
	return n
}

// awaitFirstCheck waits (bounded by ctx) until every Engine was checked
// once, so the first placement after a start knows where scopes live.
func (f *fleet) awaitFirstCheck(ctx context.Context) {
	f.firstCheck.Do(func() {
		var wg sync.WaitGroup
		for _, mb := range f.members {
			if c, _, _ := mb.state(); c {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				f.check(ctx, mb)
			}()
		}
		wg.Wait()
	})
}

// memberFor returns the Engine serving scope s: where it was placed or
// found, else (create) a new placement. A scope whose Engine is down gets
// ErrEngineDown: a sandbox stays on its Engine for life.
func (m *Manager) memberFor(ctx context.Context, s Scope, create bool) (*member, error) {
	f := m.fleet
	if mb := f.one(); mb != nil {
		return mb, nil
	}
	f.awaitFirstCheck(ctx)
	scopeKey := ScopeKey(m.cfg.Scope, s)
	lock := m.scopeLock(scopeKey)
	lock.Lock()
	defer lock.Unlock()
	f.mu.Lock()
	mb := f.placed[scopeKey]
	f.mu.Unlock()
	if mb != nil {
		if _, healthy, _ := mb.state(); !healthy {
			return nil, fmt.Errorf("sandbox %s: %w", ContainerName(m.cfg.Docker.ContainerPrefix, scopeKey), mb.downErr())
		}
		return mb, nil
	}
	// Made by another process of this state directory, perhaps: ask.
	name := ContainerName(m.cfg.Docker.ContainerPrefix, scopeKey)
	for _, cand := range f.members {
		if _, healthy, _ := cand.state(); !healthy {
			continue
		}
		if id, managed := cand.m.holds(ctx, name); managed {
			f.mu.Lock()
			f.placed[scopeKey], f.ids[id] = cand, cand
			f.mu.Unlock()
			return cand, nil
		}
	}
	if !create {
		return nil, nil
	}
	f.placeMu.Lock()
	defer f.placeMu.Unlock()
	mb, err := f.place(m.first().sandboxMemory())
	if err != nil {
		return nil, fmt.Errorf("sandbox %s: %w", name, err)
	}
	f.mu.Lock()
	f.placed[scopeKey] = mb
	f.mu.Unlock()
	mb.mu.Lock()
	mb.count++
	mb.mu.Unlock()
	return mb, nil
}

// memberByID returns the Engine holding container id.
func (m *Manager) memberByID(ctx context.Context, id string) (*member, error) {
	f := m.fleet
	if mb := f.one(); mb != nil {
		return mb, nil
	}
	f.mu.Lock()
	mb := f.ids[id]
	f.mu.Unlock()
	if mb != nil {
		return mb, nil
	}
	for _, cand := range f.members {
		if _, healthy, _ := cand.state(); !healthy {
			continue
		}
		if _, found := cand.m.has(ctx, id); found {
			f.mu.Lock()
			f.ids[id] = cand
			f.mu.Unlock()
			return cand, nil
		}
	}
	return nil, fmt.Errorf("%w: no healthy Engine holds container %s", ErrNotFound, id)
}

func (m *Manager) memberNamed(name string) (*member, error) {
	if mb := m.fleet.one(); mb != nil {
		return mb, nil
	}
	for _, mb := range m.fleet.members {
		if mb.eng.Name == name {
			return mb, nil
		}
	}
	return nil, fmt.Errorf("%w: no Engine named %q", ErrNotFound, name)
}

func (f *fleet) noteID(id string, mb *member) {
	if id == "" {
		return
	}
	f.mu.Lock()
	f.ids[id] = mb
	f.mu.Unlock()
}

func (f *fleet) forgetScope(scopeKey string) {
	f.mu.Lock()
	if mb := f.placed[scopeKey]; mb != nil {
		delete(f.placed, scopeKey)
		mb.mu.Lock()
		mb.count = max(0, mb.count-1)
		mb.mu.Unlock()
	}
	f.mu.Unlock()
}

// EngineStatus is the health and load of one Engine.
type EngineStatus struct {
	Name      string    `json:"name"`
	Host      string    `json:"host"`
	Healthy   bool      `json:"healthy"`
	Since     time.Time `json:"since,omitzero"`
	Error     string    `json:"error,omitempty"`
	Sandboxes int       `json:"sandboxes"`
	// Stopped counts the sandboxes found stopped when the Engine last
	// (re)joined, Readopted those of them started again so far.
	Stopped   int `json:"stopped"`
	Readopted int `json:"readopted"`
	// MissingRuntime is the configured runtime when the Engine does not
	// list it (it takes no new sandboxes then).
	MissingRuntime string `json:"missingRuntime,omitempty"`
}

// Engines reports each Engine's health and load (a single Engine is
// health-checked too, see startHealth).
func (m *Manager) Engines() []EngineStatus {
	if mb := m.fleet.one(); mb != nil {
		return []EngineStatus{mb.m.healthStatus()}
	}
	out := make([]EngineStatus, 0, len(m.fleet.members))
	for _, mb := range m.fleet.members {
		mb.mu.Lock()
		st := EngineStatus{Name: mb.eng.Name, Host: mb.m.host(), Healthy: mb.healthy, Since: mb.since, Sandboxes: mb.count, Stopped: mb.stopped, Readopted: mb.readopted, MissingRuntime: mb.noRuntime}
		if mb.lastErr != nil {
			st.Error = mb.lastErr.Error()
		}
		mb.mu.Unlock()
		out = append(out, st)
	}
	return out
}

// healthyMembers lists the Engines that answer, in config order.
func (f *fleet) healthyMembers() []*member {
	return slices.DeleteFunc(slices.Clone(f.members), func(mb *member) bool {
		_, healthy, _ := mb.state()
		return !healthy
	})
}

// eachHealthy runs fn on every Engine that answers and joins the errors,
// each naming its Engine; Engines that are down are reported too.
func (f *fleet) eachHealthy(fn func(mb *member) error) error {
	if mb := f.one(); mb != nil {
		return fn(mb)
	}
	var errs []error
	for _, mb := range f.members {
		if _, healthy, _ := mb.state(); !healthy {
			errs = append(errs, mb.downErr())
			continue
		}
		if err := fn(mb); err != nil {
			errs = append(errs, fmt.Errorf("Engine %q: %w", mb.eng.Name, err))
		}
	}
	return errors.Join(errs...)
}

// collect joins what fn finds on every Engine that answers (see
// eachHealthy for the errors).
func collect[T any](f *fleet, fn func(mb *member) ([]T, error)) ([]T, error) {
	var out []T
	err := f.eachHealthy(func(mb *member) error {
		got, err := fn(mb)
		out = append(out, got...)
		return err
	})
	return out, err
}

// ping reports the Engines that do not answer (nil when all do).
func (f *fleet) ping(ctx context.Context) error {
	var errs []error
	for _, mb := range f.members {
		if err := mb.m.probe(ctx); err != nil {
			errs = append(errs, &engineDownError{name: mb.eng.Name, host: mb.m.host(), err: err})
		}
	}
	return errors.Join(errs...)
}

func (m *Manager) Ensure(ctx context.Context, s Scope) (EnsureResult, error) {
	mb, err := m.memberFor(ctx, s, true)
	if err != nil {
		return EnsureResult{}, err
	}
	res, err := mb.m.Ensure(ctx, s)
	m.fleet.noteID(res.ID, mb)
	return res, err
}

func (m *Manager) Start(ctx context.Context, s Scope, opts ExecOptions) (*Started, error) {
	mb, err := m.memberFor(ctx, s, true)
	if err != nil {
		return nil, err
	}
	st, err := mb.m.Start(ctx, s, opts)
	if st != nil {
		m.fleet.noteID(st.Ensure.ID, mb)
	}
	return st, err
}

// List returns the managed containers of this configuration on every
// Engine that answers (named with its containerPrefix; another daemon's
// sandboxes on the same Engine are left out), as the Engines report them;
// with several Engines, the error names those that do not answer (what
// was found is returned beside it).
func (m *Manager) List(ctx context.Context) ([]Info, error) {
	if mb := m.fleet.one(); mb != nil {
		return mb.m.List(ctx)
	}
	var out []Info
	err := m.fleet.eachHealthy(func(mb *member) error {
		list, err := mb.m.List(ctx)
		for _, c := range list {
			m.fleet.noteID(c.ID, mb)
		}
		out = append(out, list...)
		return err
	})
	if len(out) > 0 || m.fleet.anyHealthy() {
		if err != nil {
			m.logf("sandbox list: %v", err)
		}
		return out, nil
	}
	return out, err
}

func (f *fleet) anyHealthy() bool { return len(f.healthyMembers()) > 0 }

// RemoveByName force-removes a managed container by name or id. A
// container that is not managed by sandboxctl is never touched.
func (m *Manager) RemoveByName(ctx context.Context, name string) error {
	if mb := m.fleet.one(); mb != nil {
		return mb.m.RemoveByName(ctx, name)
	}
	removed := false
	var errs []error
	for _, mb := range m.fleet.healthyMembers() {
		err := mb.m.RemoveByName(ctx, name)
		switch {
		case err == nil:
			removed = true
			m.fleet.forgetName(m, name, mb)
		case !errors.Is(err, ErrNotFound):
			errs = append(errs, fmt.Errorf("Engine %q: %w", mb.eng.Name, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if !removed {
		return fmt.Errorf("%w: no container named %s on any Engine that answers", ErrNotFound, name)
	}
	return nil
}

// forgetName drops the placement of the scope whose container was name on
// mb (name may be an id).
func (f *fleet) forgetName(m *Manager, name string, mb *member) {
	f.mu.Lock()
	delete(f.ids, name)
	var scopes []string
	for k, p := range f.placed {
		if p == mb && ContainerName(m.cfg.Docker.ContainerPrefix, k) == name {
			scopes = append(scopes, k)
		}
	}
	f.mu.Unlock()
	for _, k := range scopes {
		f.forgetScope(k)
	}
}

// Prune removes managed containers idle longer than prune.idleHours or
// older than prune.maxAgeDays (0 disables a rule) on every Engine that
// answers. With dryRun it only reports what it would remove.
func (m *Manager) Prune(ctx context.Context, dryRun bool) ([]Info, error) {
	return collect(m.fleet, func(mb *member) ([]Info, error) {
		pruned, err := mb.m.Prune(ctx, dryRun)
		if !dryRun {
			for _, c := range pruned {
				m.fleet.forgetName(m, c.Name, mb)
			}
		}
		return pruned, err
	})
}

// Explain reports the effective config of scope s, its hash, the container
// serving it and whether it would be recreated, and why: on the Engine
// that holds its sandbox, or on the one the next command would place it on.
func (m *Manager) Explain(ctx context.Context, s Scope) (Explanation, error) {
	mb, err := m.memberFor(ctx, s, false)
	if err != nil {
		return Explanation{}, err
	}
	next := mb == nil
	if next {
		if mb, err = m.fleet.place(m.first().sandboxMemory()); err != nil {
			return Explanation{}, fmt.Errorf("sandbox explain: %w", err)
		}
	}
	ex, err := mb.m.Explain(ctx, s)
	if next && err == nil {
		ex.Recreate = fmt.Sprintf("no container yet: the next command creates it on Engine %q", mb.eng.Name)
	}
	return ex, err
}

// Sessions lists every session of every running supervised sandbox of
// every Engine that answers, oldest first, with its output so far. A
// restarted daemon calls it once to re-adopt them; Reattach resumes a
// running one.
func (m *Manager) Sessions(ctx context.Context) ([]RecoveredSession, error) {
	if m.fleet.one() == nil {
		// At a daemon's start no Engine is checked yet, and one not
		// checked counts as down: its sessions would wait for the retry.
		m.fleet.awaitFirstCheck(ctx)
	}
	out, err := collect(m.fleet, func(mb *member) ([]RecoveredSession, error) { return mb.m.Sessions(ctx) })
	slices.SortStableFunc(out, func(a, b RecoveredSession) int { return a.StartedAt.Compare(b.StartedAt) })
	return out, err
}

// engine is one Engine behind a Manager, as the Manager uses it: the calls
// it routes to the Engine serving a scope, holding a container or, for
// the calls about every sandbox, to each Engine (manager_api.go), and what
// its health checks and placement ask of an Engine. DockerEngine is the
// one kind today; another backend (Kubernetes) is another implementation.
type engine interface {
	sandboxEngine
	processEngine
	fileEngine
	engineProbe
	Close() error
}

// sandboxEngine is the sandbox lifecycle on one Engine.
type sandboxEngine interface {
	Ensure(ctx context.Context, s Scope) (EnsureResult, error)
	Create(ctx context.Context, s Scope, o CreateOptions) (Info, error)
	List(ctx context.Context) ([]Info, error)
	Get(ctx context.Context, ref string) (Info, error)
	RemoveByName(ctx context.Context, name string) error
	Delete(ctx context.Context, ref string, workspace bool) (Info, error)
	Pause(ctx context.Context, ref string) (Info, error)
	Resume(ctx context.Context, ref string) (Info, error)
	Extend(ctx context.Context, ref string, ttl time.Duration) (Info, error)
	Prune(ctx context.Context, dryRun bool) ([]Info, error)
	PauseIdle(ctx context.Context) (int, error)
	ExpireDue(ctx context.Context) ([]Info, error)
	Explain(ctx context.Context, s Scope) (Explanation, error)
	PruneSupervisedImages(ctx context.Context) ([]string, error)
	Snapshot(ctx context.Context, s Scope, name string) (SnapshotInfo, error)
	Rollback(ctx context.Context, s Scope, name string) (Info, error)
	Fork(ctx context.Context, from Scope, name string, to Scope) (Info, error)
	Pool() PoolStatus
	startPool()
}

// processEngine runs and follows commands on one Engine.
type processEngine interface {
	Start(ctx context.Context, s Scope, opts ExecOptions) (*Started, error)
	Run(ctx context.Context, s Scope, cmd []string) (string, int, error)
	Attach(ctx context.Context, s Scope, opts ExecOptions) (*Exec, EnsureResult, error)
	ExecIn(ctx context.Context, containerID string, opts ExecOptions) (*Exec, error)
	KillTagged(ctx context.Context, containerID, tag string, grace time.Duration) error
	Sessions(ctx context.Context) ([]RecoveredSession, error)
	Reattach(ctx context.Context, rs RecoveredSession) (*SupervisedExec, error)
	ForgetSession(ctx context.Context, containerID, id string) error
	DialPort(ctx context.Context, s Scope, port int) (net.Conn, error)
}

// fileEngine moves files in and out of the sandboxes of one Engine.
type fileEngine interface {
	StatFile(ctx context.Context, s Scope, p string) (api.FileInfo, error)
	ListFiles(ctx context.Context, s Scope, p string) (api.FileList, error)
	ReadFiles(ctx context.Context, s Scope, p string, limit int64, w io.Writer) error
	WriteFiles(ctx context.Context, s Scope, dir string, limit int64, r io.Reader) error
	WriteFile(ctx context.Context, s Scope, p string, mode fs.FileMode, limit int64, r io.Reader) error
	RemoveFile(ctx context.Context, s Scope, p string) error
}

// engineProbe is what the Manager's health checks and placement ask of an
// Engine.
type engineProbe interface {
	// Ping checks the Engine answers (its own error form, for a Manager of
	// one); probe is the bare check the health checks time.
	Ping(ctx context.Context) error
	probe(ctx context.Context) error
	host() string
	// facts are the Engine's memory and whether it lists the configured
	// runtime; hasImage whether it has the sandbox image.
	facts(ctx context.Context) (engineFacts, error)
	hasImage(ctx context.Context) bool
	// has finds the container ref (its id), holds a sandboxctl one.
	has(ctx context.Context, ref string) (id string, found bool)
	holds(ctx context.Context, name string) (id string, managed bool)
	// stalled ends the calls waiting on the Engine with reason, answering
	// lets them wait again; failAll ends every command followed there.
	stalled(reason error)
	answering()
	failAll(reason error) int
	// healthStatus is the Engine's own health (a Manager of one);
	// onEventsBroken is told when its event stream breaks (several).
	healthStatus() EngineStatus
	onEventsBroken(fn func(error))
}

var _ engine = (*DockerEngine)(nil)

// engineFacts are what an Engine says of itself.
type engineFacts struct {
	memTotal       int64
	missingRuntime string // the configured runtime when not listed
}

func (m *DockerEngine) probe(ctx context.Context) error {
	_, err := m.cli.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true})
	return err
}

func (m *DockerEngine) host() string { return m.cli.DaemonHost() }

func (m *DockerEngine) facts(ctx context.Context) (engineFacts, error) {
	info, err := m.cli.Info(ctx, client.InfoOptions{})
	if err != nil {
		return engineFacts{}, m.classify("engine info", err)
	}
	return engineFacts{memTotal: info.Info.MemTotal, missingRuntime: missingRuntime(m.cfg.Docker.Runtime, info.Info.Runtimes)}, nil
}

func (m *DockerEngine) hasImage(ctx context.Context) bool {
	_, err := m.cli.ImageInspect(ctx, m.cfg.Docker.Image)
	return err == nil
}

func (m *DockerEngine) has(ctx context.Context, ref string) (string, bool) {
	insp, err := m.cli.ContainerInspect(ctx, ref, client.ContainerInspectOptions{})
	if err != nil {
		return "", false
	}
	return insp.Container.ID, true
}

func (m *DockerEngine) holds(ctx context.Context, name string) (string, bool) {
	insp, err := m.cli.ContainerInspect(ctx, name, client.ContainerInspectOptions{})
	if err != nil || insp.Container.Config == nil || insp.Container.Config.Labels[LabelManaged] != "1" {
		return "", false
	}
	return insp.Container.ID, true
}

func (m *DockerEngine) stalled(reason error) { m.stall.markDown(reason) }
func (m *DockerEngine) answering()           { m.stall.markUp() }

func (m *DockerEngine) onEventsBroken(fn func(error)) { m.eventsBroken = fn }
