package sandbox

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
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
	"github.com/docker/go-units"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/sandboxctl/sandboxctl/api"
	"github.com/sandboxctl/sandboxctl/egress"
	"github.com/sandboxctl/sandboxctl/egress/broker"
	"github.com/sandboxctl/sandboxctl/sandbox/sandboxconfig"
	"github.com/sandboxctl/sandboxctl/workdir"
)

// LabelStateID on a container names the state directory whose daemon
// created it (a hash of the directory's absolute path). Daemons with other
// state directories on the same Engine neither list, prune, recover, run
// in, recreate nor remove it.
const LabelStateID = "sandboxctl.stateId"

// ErrOtherStateDir means the container that would serve a scope belongs to
// another state directory's daemon (same containerPrefix on one Engine).
var ErrOtherStateDir = fmt.Errorf("%w: the sandbox belongs to the daemon of another state directory", cerrdefs.ErrConflict)

// stateID is the LabelStateID value of a state directory.
func stateID(dir string) string {
	sum := sha256.Sum256([]byte(filepath.Clean(dir)))
	return hex.EncodeToString(sum[:])[:16]
}

// ownedBy reports whether a container's labels allow this Manager to use it
// (containers made before the label existed carry none: they are adopted).
func (m *DockerEngine) ownedBy(labels map[string]string) bool {
	id := labels[LabelStateID]
	return id == "" || id == m.stateID
}

func (m *DockerEngine) otherStateErr(name string, labels map[string]string) error {
	return fmt.Errorf("sandbox %s: %w (state id %s, this daemon's is %s): daemons with different state directories on one Engine need distinct sandbox.docker.containerPrefix values",
		name, ErrOtherStateDir, labels[LabelStateID], m.stateID)
}

// RecentUseWindow is how recently a sandbox must have been used for a config
// change to leave it running (with a pending recreate) instead of recreating it.
const RecentUseWindow = 5 * time.Minute

// Options configure a Manager.
type Options struct {
	Config Config
	// StateDir holds the registry of last-used times and sandbox-owned
	// workspace dirs.
	StateDir string
	// Client is the Engine client; nil builds one from the environment
	// (DOCKER_HOST, DOCKER_TLS_VERIFY, DOCKER_CERT_PATH) with API version
	// negotiation.
	Client *client.Client
	// Home expands ~ in workspaceRoot (default: <StateDir>/workspaces);
	// default os.UserHomeDir().
	Home string
	// Labels are added to every container this Manager creates and restrict
	// which containers it lists (tests use them to stay apart).
	Labels map[string]string
	Now    func() time.Time
	Logf   func(format string, args ...any)
	// DisableSupervisor keeps every sandbox on the plain Engine exec path
	// (main process `sleep infinity`, no in-container supervisor).
	DisableSupervisor bool
	// SupervisorBinary is the static sandboxctl-supervisor binary delivered
	// into sandboxes; empty looks at $SANDBOXCTL_SUPERVISOR, then next to
	// the executable. Not found: the plain path, with a warning in results.
	SupervisorBinary string
	// SupervisorAttachOnly talks to supervisors over the Engine's attach
	// stream even when their local socket is reachable (see
	// Manager.dialLocal); for tests and for comparing the two transports.
	SupervisorAttachOnly bool
	// SupervisorIdleClose closes the connection to a sandbox's supervisor
	// after it followed no command for this long (default
	// DefaultSupervisorIdleClose; negative: never), so the daemon holds
	// goroutines and buffers only for sandboxes in use; the next command
	// connects again.
	SupervisorIdleClose time.Duration
	// EngineHealthInterval is how often each Engine of a multi-Engine
	// config is pinged (default DefaultEngineHealthInterval).
	EngineHealthInterval time.Duration
	// Observer, when set, is told about costly and failing Engine work
	// (the daemon's metrics).
	Observer Observer
	// Steps, when set, is told when a step a command waits for begins and
	// ends (the daemon's events; the CLI's progress).
	Steps StepObserver
	// EgressObserver, when set, is told every decision of the egress
	// gateways (sandbox.network.egress allowlist; docs/egress.md).
	EgressObserver egress.Observer
	// EgressInterceptor, when set, is handed the allowed TLS connections
	// it intercepts (the credential broker).
	EgressInterceptor egress.Interceptor
	// Backend, when set, is the one engine of the Manager instead of the
	// Docker Engines of sandbox.engines (the Kubernetes engine, built by
	// the composition root; backend.go). Client and the Docker-only
	// options above are not used then.
	Backend Backend
}

// Step names a step a command waits for.
type Step string

// Steps.
const (
	StepSandboxCreate Step = "sandbox-create" // a sandbox's container is created (and its image built)
	StepImageBuild    Step = "image-build"    // the supervised derived image is built
)

// StepObserver is told when a step for scope s begins; it calls the
// returned func when the step ended (err nil on success). Quick and safe
// for concurrent use.
type StepObserver interface {
	StepStarted(s Scope, step Step) (end func(err error))
}

// step reports step for s to the StepObserver, if any.
func (m *DockerEngine) step(s Scope, step Step) func(error) {
	if m.steps == nil {
		return func(error) {}
	}
	return m.steps.StepStarted(s, step)
}

// DefaultSupervisorIdleClose is Options.SupervisorIdleClose by default.
const DefaultSupervisorIdleClose = time.Minute

// Observer is told about a Manager's costly and failing Engine work. Its
// methods must be quick and safe for concurrent use.
type Observer interface {
	// SandboxCreated reports the time a sandbox took to create and start.
	SandboxCreated(d time.Duration)
	// ImageBuilt reports the time a supervised image took to build.
	ImageBuilt(d time.Duration)
	// SupervisorFallback reports a supervised sandbox reached without its
	// supervisor: op is "exec" or "files".
	SupervisorFallback(op string)
	// EngineError reports an Engine call that failed, by class (one of
	// EngineErrorClasses).
	EngineError(class string)
	// WarmPool reports, when a warm pool is configured, whether a new
	// sandbox was taken from it (hit) or had to be created (miss).
	WarmPool(hit bool)
}

// EngineErrorClasses are the classes of EngineError.
var EngineErrorClasses = []string{"unreachable", "internal", "unavailable", "not_found", "conflict", "invalid", "other"}

// SandboxStates are the container states a sandbox is counted under
// (Info.State); anything else counts as "other".
var SandboxStates = []string{"created", "running", "paused", "restarting", "removing", "exited", "dead", "other"}

// Sandbox paths (Info.Path): how commands reach the sandbox.
const (
	PathSupervisor = "supervisor"
	PathPlain      = "plain"
)

// DockerEngine creates, reuses, recreates and removes the sandboxes of one
// Docker Engine. A Manager holds one per configured Engine (engines.go)
// and routes each call to the one that serves it.
type DockerEngine struct {
	cfg Config
	// health is the Engine's own health check (set when it is the only
	// Engine of its Manager; the Manager checks each Engine of several).
	health *engineHealth
	// stall ends the calls waiting on the Engine when its health check
	// (health, or the fleet's for a member) finds it not answering.
	stall      engineWatch
	stateDir   string
	stateID    string
	wsRoot     string
	cli        *client.Client
	ownsClient bool
	labels     map[string]string
	now        func() time.Time
	logf       func(format string, args ...any)

	scopeLocks scopeLocks
	reg        *registry

	// snapMu serialises snapshots, so two never both fit in the room
	// sandbox.snapshots.maxBytes leaves for one.
	snapMu sync.Mutex

	// sup is the supervisor binary (nil: plain path), supWarn why not.
	sup     *supervisorBin
	supWarn string
	// ident hands out sandbox identities (nil: not in force).
	ident     *identities
	execUsers execUsers
	accounts  imageAccounts
	images    imageBuilds
	clients   supervisorClients
	warm      warmEnsures
	watch     containerWatch
	// runtimes caches the Engine's runtime list (sandbox.docker.runtime).
	runtimes engineRuntimes
	// pool is the warm pool (sandbox.pool), claims who took its members.
	pool      pool
	claims    claims
	idleClose time.Duration
	// localSupervisor: try a supervisor's unix socket before the attach
	// stream (the Engine is reached over a unix socket, so it may share
	// this host's /proc).
	localSupervisor bool
	// engine is this DockerEngine's entry of sandbox.engines.
	// eventsBroken tells the Manager this Engine's event stream broke.
	engine       Engine
	eventsBroken func(error)
	flavor       engineFlavor
	obs          Observer
	steps        StepObserver
	// quota admits new sandboxes (sandbox.maxPerAgent, sandbox.max).
	quota *sandboxQuota
	// brokered is what every sandbox gets from the credential broker
	// when sandbox.secrets is set (docs/secrets.md); nil otherwise.
	brokered *broker.SandboxSide
	// net is sandbox.network parsed; egress the gateways of allowlist
	// sandboxes (egress.go).
	net       sandboxconfig.Network
	gateways  egressGateways
	egressObs egress.Observer
	egressIC  egress.Interceptor
}

// newDockerEngine validates the config and prepares the DockerEngine of e
// (opts.Client when set, else a client of its own), sharing reg, the
// registry of last-used times. It does not contact the Engine.
func newDockerEngine(opts Options, e Engine, reg *registry) (*DockerEngine, error) {
	if err := opts.Config.Validate(); err != nil {
		return nil, err
	}
	if opts.StateDir == "" {
		return nil, errors.New("sandbox: Options.StateDir is required")
	}
	home := opts.Home
	if home == "" {
		h, err := os.UserHomeDir()
		if err != nil {
			return nil, fmt.Errorf("sandbox: home directory for workspaceRoot: %w", err)
		}
		home = h
	}
	absState, err := filepath.Abs(opts.StateDir)
	if err != nil {
		return nil, fmt.Errorf("sandbox: state directory: %w", err)
	}
	if real, err := filepath.EvalSymlinks(absState); err == nil {
		absState = real // one id however the directory is spelt
	}
	m := &DockerEngine{
		cfg:       opts.Config,
		stateDir:  opts.StateDir,
		stateID:   stateID(absState),
		cli:       opts.Client,
		labels:    opts.Labels,
		now:       opts.Now,
		logf:      opts.Logf,
		idleClose: opts.SupervisorIdleClose,
		obs:       opts.Observer,
		steps:     opts.Steps,
		quota:     newSandboxQuota(opts.Config),
		egressObs: opts.EgressObserver,
		egressIC:  opts.EgressInterceptor,
	}
	if m.net, err = opts.Config.ParsedNetwork(); err != nil {
		return nil, err
	}
	if m.idleClose == 0 {
		m.idleClose = DefaultSupervisorIdleClose
	}
	if m.now == nil {
		m.now = time.Now
	}
	if m.logf == nil {
		m.logf = func(string, ...any) {}
	}
	root, err := WorkspaceRoot(opts.Config, absState, home)
	if err != nil {
		return nil, err
	}
	if m.wsRoot, err = m.prepareWorkspaceRoot(root, home, opts.Config.WorkspaceRoot != ""); err != nil {
		return nil, err
	}
	m.sweepStaged()
	// No bind may reach the daemon's own state (its socket, approvals) or
	// the workspaces of every agent.
	if err := opts.Config.CheckBinds(sandboxconfig.BindPolicy{Protected: []string{opts.StateDir, m.wsRoot}}); err != nil {
		return nil, err
	}
	if len(opts.Config.Secrets) > 0 {
		secrets, err := sandboxconfig.ParseSecrets(opts.Config.Secrets, opts.Config.Docker.Env)
		if err != nil {
			return nil, err
		}
		side, err := broker.Prepare(broker.Dir(opts.StateDir), secrets)
		if err != nil {
			return nil, err
		}
		m.brokered = &side
	}
	m.reg = reg
	m.engine = e
	if m.cli == nil {
		cli, err := newEngineClient(m.engine)
		if err != nil {
			return nil, err
		}
		m.cli, m.ownsClient = cli, true
	}
	m.localSupervisor = !opts.SupervisorAttachOnly && strings.HasPrefix(m.cli.DaemonHost(), "unix://")
	m.claims.path = filepath.Join(opts.StateDir, "pool-claims.json")
	if !opts.DisableSupervisor {
		m.sup, m.supWarn = resolveSupervisor(opts.SupervisorBinary)
	}
	if m.ident, err = newIdentities(opts.Config, os.Geteuid(), systemIDFiles); err != nil {
		return nil, err
	}
	return m, nil
}

// setUser puts who the sandbox runs as into sh: a sandbox identity from
// the configured range, or the effective sandbox.docker.user.
func (m *DockerEngine) setUser(sh *shape) {
	if m.ident != nil {
		sh.Docker.User, sh.Identity = "", m.ident.r.String()
		return
	}
	sh.Docker.User = sandboxconfig.EffectiveUser(sh.Docker.User, os.Geteuid(), os.Getegid())
}

// Supervised reports whether new sandboxes run the in-container supervisor
// (false: the plain Engine exec path, e.g. no supervisor binary was found).
func (m *DockerEngine) Supervised() bool { return m.sup != nil }

// Close removes the untaken sandboxes of the warm pool, releases the
// Engine client if the Manager created it and flushes last-used times.
func (m *DockerEngine) Close() error {
	m.closePool()
	m.stopHealth()
	m.stopWatch()
	m.closeEgress()
	m.clients.closeAll()
	m.reg.flush()
	if m.ownsClient {
		return m.cli.Close()
	}
	return nil
}

// Config returns the sandbox configuration in force.
func (m *DockerEngine) Config() Config { return m.cfg }

// Client returns the Engine client (for benchmarks and tests).
func (m *DockerEngine) Client() *client.Client { return m.cli }

func (m *DockerEngine) engineHost() string {
	if m.engine.Name != "" && m.engine.Name != sandboxconfig.LocalEngineName {
		return fmt.Sprintf("%s (Engine %q)", m.cli.DaemonHost(), m.engine.Name)
	}
	return m.cli.DaemonHost()
}

// Ping checks that the Engine answers.
func (m *DockerEngine) Ping(ctx context.Context) error {
	_, err := m.cli.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true})
	return m.classify("ping docker", err)
}

// EnsureResult describes the container that serves a scope.
type EnsureResult struct {
	ID, Name, ScopeKey string
	Created            bool // created by this call
	Started            bool // started by this call (created or was stopped)
	Recreated          bool // removed and created again because the config changed
	// RecreatePending is set when the config changed but the sandbox was used
	// within the last five minutes: it keeps running with the old config.
	RecreatePending bool
	PendingReason   string
	// Workspace is the host directory of the agent workspace for this scope,
	// Access how it is mounted.
	Workspace string
	Access    workdir.Access
	// Supervised is set when the container's main process is the
	// supervisor; SupervisorNote says why not when it should have been.
	Supervised     bool
	SupervisorNote string
	// Pooled is set when a new sandbox was taken from the warm pool.
	Pooled bool
	// Resumed is set when the sandbox was paused as idle and this call
	// resumed it.
	Resumed bool
	// Engine names the Engine the sandbox lives on.
	Engine string
}

// Layout returns the scope key, container name, agent workspace (host path)
// and access mode for s without touching the Engine.
func (m *DockerEngine) Layout(s Scope) (scopeKey, name, agentWorkspace string, access workdir.Access) {
	scopeKey = ScopeKey(m.cfg.Scope, s)
	name = ContainerName(m.cfg.Docker.ContainerPrefix, scopeKey)
	l := m.layoutFor(scopeKey, name)
	return scopeKey, name, l.AgentDir, l.Access
}

func (m *DockerEngine) layoutFor(scopeKey, name string) layout {
	access, _ := workdir.ParseAccess(m.cfg.WorkspaceAccess) // validated in NewManager
	agentDir := filepath.Join(m.wsRoot, ContainerName("", scopeKey))
	sandboxDir := filepath.Join(m.stateDir, "sandboxes", name, "workspace")
	l := layout{Access: access, AgentDir: agentDir, SandboxDir: sandboxDir, WorkspaceHost: agentDir}
	if access != workdir.AccessRW {
		l.WorkspaceHost = sandboxDir
	}
	return l
}

func (m *DockerEngine) shapeFor(scopeKey, name string) shape {
	return m.shapeOf(scopeKey, name, "")
}

// shapeOf is the shape of a sandbox made from template tmpl ("": the
// default; a template the config no longer defines: the default too, so
// the sandbox is recreated from the settings in force).
func (m *DockerEngine) shapeOf(scopeKey, name, tmpl string) shape {
	d, err := m.cfg.TemplateDocker(tmpl)
	if err != nil {
		d = m.cfg.Docker
	}
	sh := shape{Docker: d, Layout: m.layoutFor(scopeKey, name), Roots: m.cfg.AllowedSourceRoots, Broker: m.brokered}
	if m.egressEnabled() {
		sh.Egress = sandboxconfig.EgressAllowlist
	}
	m.setUser(&sh)
	if m.sup != nil {
		sh.Supervisor = m.sup.hash
	}
	return sh
}

// scopeLocks hands out one mutex per scope key: what holds it is the only
// one in this process making or changing the scope's sandbox.
type scopeLocks struct {
	mu    sync.Mutex
	locks map[string]*sync.Mutex
}

func (s *scopeLocks) of(key string) *sync.Mutex {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.locks[key]
	if !ok {
		if s.locks == nil {
			s.locks = map[string]*sync.Mutex{}
		}
		l = &sync.Mutex{}
		s.locks[key] = l
	}
	return l
}

func (m *DockerEngine) scopeLock(key string) *sync.Mutex { return m.scopeLocks.of(key) }

// Ensure returns a running container for s: created and started when
// missing, started when stopped, recreated when its config hash differs
// (unless it was used within RecentUseWindow, then RecreatePending is set).
// Concurrent calls for one scope, in this process or another, end with one
// container.
func (m *DockerEngine) Ensure(ctx context.Context, s Scope) (EnsureResult, error) {
	scopeKey := ScopeKey(m.cfg.Scope, s)
	name := ContainerName(m.cfg.Docker.ContainerPrefix, scopeKey)
	lock := m.scopeLock(scopeKey)
	lock.Lock()
	defer lock.Unlock()
	// carry holds what a recreated sandbox keeps of the one it replaces
	// (its template, labels and expiry: object.go).
	var carry map[string]string

	sh := m.shapeFor(scopeKey, name)
	hash, canonical := configHash(sh)
	res := EnsureResult{Name: name, ScopeKey: scopeKey, Workspace: sh.Layout.AgentDir, Access: sh.Layout.Access, Engine: m.engine.Name}
	var lastErr error

	const attempts = 10
	for attempt := 0; attempt < attempts; attempt++ {
		if attempt > 0 {
			// Another process is creating or removing this container.
			select {
			case <-ctx.Done():
				return res, ctx.Err()
			case <-time.After(time.Duration(attempt*50) * time.Millisecond):
			}
		}
		insp, err := m.cli.ContainerInspect(ctx, name, client.ContainerInspectOptions{})
		if err != nil && !isNotFound(err) {
			return res, m.classify("inspect sandbox "+name, err)
		}
		if err == nil {
			c := insp.Container
			if c.Config == nil || c.Config.Labels[LabelManaged] != "1" {
				return res, fmt.Errorf("sandbox: a container named %s exists but is not managed by sandboxctl; remove or rename it", name)
			}
			if !m.ownedBy(c.Config.Labels) {
				return res, m.otherStateErr(name, c.Config.Labels)
			}
			labels := m.ownerLabels(c.ID, c.Config.Labels)
			if labels[LabelPooled] == "1" && labels[LabelScopeKey] == "" && !m.isPoolName(name) {
				if err := m.restoreClaim(c.ID, s, scopeKey, name); err != nil {
					return res, fmt.Errorf("sandbox %s: record the claim: %w", name, err)
				}
				labels = m.ownerLabels(c.ID, c.Config.Labels)
			}
			if labels[LabelPooled] == "1" {
				// Taken from the pool: its claim must name this scope.
				if labels[LabelScopeKey] != scopeKey {
					return res, fmt.Errorf("sandbox: container %s was made for the pool and has no claim for scope %s in %s; remove it (sandboxctl sandbox rm %s)", name, scopeKey, m.claims.path, name)
				}
				if err := m.moveClaimedWorkspace(labels[LabelPoolDir], sh); err != nil {
					return res, err
				}
			}
			running := c.State != nil && c.State.Running
			if tmpl := c.Config.Labels[LabelTemplate]; tmpl != "" {
				sh = m.shapeOf(scopeKey, name, tmpl)
				hash, canonical = configHash(sh)
			}
			if c.Config.Labels[LabelConfigHash] != m.wantHash(labels, scopeKey, name) {
				last := m.reg.lastUsed(name)
				if running && !last.IsZero() && m.now().Sub(last) < RecentUseWindow {
					res.RecreatePending = true
					res.PendingReason = fmt.Sprintf("config changed (hash %s → %s) but the sandbox was used %s ago; it will be recreated once idle for %s (or run `sandboxctl sandbox rm`)",
						short(c.Config.Labels[LabelConfigHash]), short(hash), m.now().Sub(last).Round(time.Second), RecentUseWindow)
				} else {
					m.logf("sandbox %s: config hash changed, recreating", name)
					carry = m.carriedLabels(name, c.ID, labels)
					if err := m.removeID(ctx, c.ID); err != nil {
						return res, err
					}
					m.forgetPooled(c.ID, labels)
					res.Recreated = true
					continue
				}
			}
			if !running {
				if _, err := m.cli.ContainerStart(ctx, c.ID, client.ContainerStartOptions{}); err != nil {
					return res, m.classify("start sandbox "+name, err)
				}
				res.Started = true
			} else if c.State.Paused {
				if m.pausedOnRequest(name, c.ID) {
					return res, fmt.Errorf("%w: sandbox %s (scope %s) is paused: resume it first (sandboxctl sandbox resume %s)", ErrPaused, name, scopeKey, name)
				}
				// Paused while idle (sandbox.pauseAfterMinutes).
				if err := m.resume(ctx, c.ID, name); err != nil {
					return res, err
				}
				res.Resumed = true
			}
			if sh.Egress != "" {
				// A daemon that restarted starts the gateway again.
				if _, err := m.ensureEgress(ctx, s, scopeKey, name); err != nil {
					return res, err
				}
			}
			res.ID = c.ID
			res.Supervised = c.Config.Labels[LabelSupervisor] != ""
			res.SupervisorNote = c.Config.Labels[LabelSupervisorNote]
			m.reg.touch(name, scopeKey)
			return res, nil
		}
		if m.cfg.Explicit && !res.Recreated {
			return res, fmt.Errorf("%w for scope %s and sandbox.explicit is set, so a command does not create one: create it first (sandboxctl sandbox create --agent %s, or POST /v1/sandboxes)", ErrNoSandbox, scopeKey, orDefault(s.AgentID))
		}
		release, err := m.admit(ctx, s, name)
		if err != nil {
			return res, err
		}
		res, err = m.makeNew(ctx, s, scopeKey, name, sh, hash, canonical, res, carry)
		release()
		if isConflict(err) {
			lastErr = err
			continue // another process created it first; use theirs
		}
		return res, err
	}
	return res, fmt.Errorf("sandbox: could not settle container %s after %d attempts: %w", name, attempts, lastErr)
}

// makeNew takes a pooled sandbox for the scope or creates one. A conflict
// error means another process created the container first (Ensure retries
// and uses theirs).
func (m *DockerEngine) makeNew(ctx context.Context, s Scope, scopeKey, name string, sh shape, hash string, canonical []byte, res EnsureResult, carry map[string]string) (EnsureResult, error) {
	var mem poolMember
	var ok bool
	if carry == nil {
		// A sandbox that carries a template or labels is made as such,
		// never taken from the pool of the default template.
		var err error
		if mem, ok, err = m.takePooled(ctx, s, scopeKey, name, sh, sandboxconfig.DefaultTemplate, nil); err != nil {
			return res, err
		}
	}
	if m.obs != nil && m.poolSize(sandboxconfig.DefaultTemplate) > 0 {
		m.obs.WarmPool(ok)
	}
	if ok {
		res.ID, res.Created, res.Started, res.Pooled = mem.id, true, true, true
		res.Supervised, res.SupervisorNote = mem.supervised, mem.note
		m.reg.touch(name, scopeKey)
		return res, nil
	}
	createStart := time.Now()
	endStep := m.step(s, StepSandboxCreate)
	id, supervised, note, err := m.create(ctx, s, scopeKey, name, sh, hash, canonical, carry)
	endStep(err)
	if err == nil && m.obs != nil {
		m.obs.SandboxCreated(time.Since(createStart))
	}
	if err != nil {
		return res, err
	}
	res.ID, res.Created, res.Started = id, true, true
	res.Supervised, res.SupervisorNote = supervised, note
	m.reg.touch(name, scopeKey)
	return res, nil
}

func short(h string) string {
	if len(h) > 8 {
		return h[:8]
	}
	return h
}

// create makes and starts a sandbox; extra labels go on the container
// (the pool's).
func (m *DockerEngine) create(ctx context.Context, s Scope, scopeKey, name string, sh shape, hash string, canonical []byte, extra map[string]string) (id string, supervised bool, note string, err error) {
	if err := m.checkRuntime(ctx, sh.Egress != ""); err != nil {
		return "", false, "", err
	}
	if q, _ := m.cfg.WorkspaceQuotaBytes(); q == 0 {
		// A subvolume on btrfs: a snapshot of it is made at once.
		if err := makeWorkspaceDir(sh.Layout.WorkspaceHost); err != nil {
			return "", false, "", fmt.Errorf("sandbox: workspace dir: %w", err)
		}
	}
	if err := os.MkdirAll(sh.Layout.AgentDir, 0o700); err != nil {
		return "", false, "", fmt.Errorf("sandbox: workspace dir: %w", err)
	}
	if q, _ := m.cfg.WorkspaceQuotaBytes(); q > 0 {
		if err := m.ensureWorkspaceVolume(ctx, name, sh.Layout.WorkspaceHost, q); err != nil {
			return "", false, "", fmt.Errorf("sandbox %s: %w", name, err)
		}
	}
	var identLabel string
	if m.ident != nil && m.isPodman(ctx) {
		// Podman gives a tmpfs to the container's user (its U option),
		// root for a supervised identity container: /tmp would not be
		// the command uid's nor /run the supervisor's.
		return "", false, "", fmt.Errorf("sandbox %s: sandbox identities are not supported on Podman yet; set sandbox.docker.user (for example %q): %w", name, DefaultUser, ErrInvalidConfig)
	}
	if m.ident != nil {
		// A sandbox identity of its own, and the workspace its alone.
		id, release, err := m.allocIdentity(ctx, name, sh.Layout.WorkspaceHost)
		if err != nil {
			return "", false, "", fmt.Errorf("sandbox %s: %w", name, err)
		}
		defer release()
		if err := os.MkdirAll(sh.Layout.WorkspaceHost, 0o700); err != nil {
			return "", false, "", fmt.Errorf("sandbox: workspace dir: %w", err)
		}
		if err := handOver(sh.Layout.WorkspaceHost, int(id.Command), int(id.Command)); err != nil {
			return "", false, "", fmt.Errorf("sandbox %s: %w", name, err)
		}
		if err := m.agentDirFor(sh, id); err != nil {
			return "", false, "", err
		}
		acc, err := m.writeAccounts(ctx, sh.Docker.Image, name, id)
		if err != nil {
			return "", false, "", err
		}
		sh.ident, sh.accounts, identLabel = &id, acc, id.String()
	} else if err := workdir.PrepareWorkspace(sh.Layout.WorkspaceHost, sh.Docker.User); err != nil {
		// What is mounted at /workspace is writable to the sandbox's user.
		return "", false, "", fmt.Errorf("sandbox: %w", err)
	}
	labels := map[string]string{
		LabelManaged:    "1",
		LabelScopeKey:   scopeKey,
		LabelAgentID:    s.AgentID,
		LabelSessionKey: s.SessionKey,
		LabelCreatedAt:  strconv.FormatInt(m.now().UnixMilli(), 10),
		LabelConfigHash: hash,
		LabelConfig:     string(canonical),
		LabelStateID:    m.stateID,
	}
	for k, v := range m.labels {
		labels[k] = v
	}
	for k, v := range extra {
		labels[k] = v
	}
	if identLabel != "" {
		labels[LabelIdentity] = identLabel
	}
	if sh.Egress != "" {
		if sh.egress, err = m.ensureEgress(ctx, s, scopeKey, name); err != nil {
			return "", false, "", err
		}
	}
	image := ""
	if sh.Supervisor != "" {
		// The supervisor is the main process: build (or reuse) the derived
		// image; if that cannot work, fall back to the plain path.
		ref, err := m.supervisedImage(ctx, sh.Docker.Image, func() func(error) { return m.step(s, StepImageBuild) })
		switch {
		case errors.Is(err, ErrImageMissing) || errors.Is(err, ErrDockerUnreachable):
			return "", false, "", fmt.Errorf("create sandbox %s: %w", name, err)
		case err != nil:
			note = "supervisor image: " + err.Error()
			m.logf("sandbox %s: %s; using the plain exec path", name, note)
		default:
			image = ref
		}
	}
	if image != "" {
		id, err = m.createStart(ctx, name, sh, labels, image)
		if err == nil {
			if err = m.checkSupervisor(ctx, id); err == nil {
				supervised = true
			} else {
				note = "supervisor did not start: " + err.Error()
				m.logf("sandbox %s: %s; recreating it on the plain exec path", name, note)
				if rerr := m.removeID(context.WithoutCancel(ctx), id); rerr != nil {
					return "", false, "", rerr
				}
			}
		} else if isConflict(err) {
			return "", false, "", err
		} else {
			note = "supervisor container: " + err.Error()
			m.logf("sandbox %s: %s; using the plain exec path", name, note)
		}
	}
	if !supervised {
		plain := sh
		plain.Supervisor = ""
		if note != "" {
			labels[LabelSupervisorNote] = note
		}
		if id, err = m.createStart(ctx, name, plain, labels, ""); err != nil {
			return "", false, "", err
		}
	}
	if cmd := m.cfg.Docker.SetupCommand; cmd != "" {
		out, code, err := m.run(ctx, id, []string{"sh", "-lc", cmd})
		if err != nil || code != 0 {
			_ = m.removeID(context.WithoutCancel(ctx), id)
			if err == nil {
				err = fmt.Errorf("exit code %d: %s", code, lastN(out, 500))
			}
			return "", false, "", fmt.Errorf("sandbox %s: setupCommand failed: %w", name, err)
		}
	}
	if ms, _ := strconv.ParseInt(labels[LabelExpiresAt], 10, 64); ms > 0 {
		if err := m.setExpiry(name, id, time.UnixMilli(ms)); err != nil {
			_ = m.removeID(context.WithoutCancel(ctx), id)
			return "", false, "", fmt.Errorf("sandbox %s: %w", name, err)
		}
	}
	m.logf("sandbox %s: created %s (supervised %v)", name, short(id), supervised)
	return id, supervised, note, nil
}

// createStart creates and starts the container; image overrides the
// configured image (the supervised derived image).
func (m *DockerEngine) createStart(ctx context.Context, name string, sh shape, labels map[string]string, image string) (string, error) {
	if sh.Supervisor != "" {
		labels[LabelSupervisor] = sh.Supervisor
	} else {
		delete(labels, LabelSupervisor)
	}
	cfg, hc, err := createSpec(sh, name, labels)
	if err != nil {
		return "", err
	}
	if image != "" {
		cfg.Image = image
	}
	if m.isPodman(ctx) {
		if err := adaptForPodman(hc, m.flavor.rlimit); err != nil {
			return "", err
		}
	}
	created, err := m.cli.ContainerCreate(ctx, client.ContainerCreateOptions{Name: name, Config: cfg, HostConfig: hc})
	if err != nil {
		if isConflict(err) {
			return "", err
		}
		if isNotFound(err) {
			return "", fmt.Errorf("create sandbox %s: %w", name, &imageMissingError{image: cfg.Image, err: err})
		}
		return "", m.classify("create sandbox "+name, err)
	}
	if _, err := m.cli.ContainerStart(ctx, created.ID, client.ContainerStartOptions{}); err != nil {
		_ = m.removeID(context.WithoutCancel(ctx), created.ID)
		return "", m.classify("start sandbox "+name, err)
	}
	return created.ID, nil
}

func lastN(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

func (m *DockerEngine) removeID(ctx context.Context, id string) error {
	m.warm.forgetID(id)
	m.clients.drop(id)
	m.execUsers.forget(id)
	name := ""
	if m.egressEnabled() {
		if insp, err := m.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{}); err == nil {
			name = trimSlash(insp.Container.Name)
		}
	}
	_, err := m.cli.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
	if err != nil && !isNotFound(err) {
		return m.classify("remove sandbox "+short(id), err)
	}
	if name != "" {
		return m.releaseEgress(ctx, name)
	}
	return nil
}

// Info describes one managed container: the sandbox as the API answers it
// (api.Sandbox, the one definition of its fields) and the owner labels
// the Engine found on it.
type Info struct {
	api.Sandbox

	labels map[string]string // owner labels (ownerLabels)
}

// ownFilter selects this daemon's managed containers on the Engine: the
// managed label and the owner labels (another daemon's sandboxes on the same
// Engine are left out).
func (m *DockerEngine) ownFilter() client.Filters {
	f := make(client.Filters).Add("label", LabelManaged+"=1")
	for k, v := range m.labels {
		f.Add("label", k+"="+v)
	}
	return f
}

// List returns the managed containers of this configuration (named with its
// containerPrefix; another daemon's sandboxes on the same Engine are left
// out), as the Engine reports them.
func (m *DockerEngine) List(ctx context.Context) ([]Info, error) {
	list, err := m.cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: m.ownFilter()})
	if err != nil {
		return nil, m.classify("list sandboxes", err)
	}
	out := make([]Info, 0, len(list.Items))
	for _, c := range list.Items {
		name := ""
		if len(c.Names) > 0 {
			name = c.Names[0]
			if name != "" && name[0] == '/' {
				name = name[1:]
			}
		}
		labels := m.ownerLabels(c.ID, c.Labels)
		scopeKey := labels[LabelScopeKey]
		pool := ""
		switch {
		case labels[LabelPooled] == "1" && m.isPoolName(name):
			pool = PoolReady
		case labels[LabelPooled] == "1":
			pool = PoolTaken
		}
		if !m.ownedBy(c.Labels) || (pool != PoolReady && name != ContainerName(m.cfg.Docker.ContainerPrefix, scopeKey)) {
			// Another configuration's sandbox (another containerPrefix,
			// e.g. a second daemon on this host): not ours to list,
			// prune, or re-adopt sessions from.
			continue
		}
		if pool == PoolReady {
			scopeKey = ""
			labels[LabelAgentID], labels[LabelSessionKey] = "", ""
		}
		ms, _ := strconv.ParseInt(c.Labels[LabelCreatedAt], 10, 64)
		created := time.UnixMilli(ms)
		if ms == 0 {
			created = time.Unix(c.Created, 0)
		}
		out = append(out, Info{
			Sandbox: api.Sandbox{
				ID: c.ID, Name: name, ScopeKey: scopeKey,
				AgentID: labels[LabelAgentID], SessionKey: labels[LabelSessionKey],
				State: string(c.State), Image: c.Image, CreatedAt: created,
				LastUsedAt: m.reg.lastUsed(name), ConfigHash: c.Labels[LabelConfigHash],
				Current: c.Labels[LabelConfigHash] == m.wantHash(labels, scopeKey, name), Engine: m.engine.Name,
				Path:     map[bool]string{true: PathSupervisor, false: PathPlain}[c.Labels[LabelSupervisor] != ""],
				Pool:     pool,
				Template: templateOf(c.Labels), Labels: userLabels(labels), ExpiresAt: m.expiresAt(name, c.ID, c.Labels),
			},
			labels: labels,
		})
	}
	return out, nil
}

// Remove force-removes the sandbox of scope s. ErrNotFound when none exists.
func (m *DockerEngine) Remove(ctx context.Context, s Scope) error {
	scopeKey := ScopeKey(m.cfg.Scope, s)
	return m.RemoveByName(ctx, ContainerName(m.cfg.Docker.ContainerPrefix, scopeKey))
}

// RemoveByName force-removes a managed container by name or id. A container
// that is not managed by sandboxctl is never touched.
func (m *DockerEngine) RemoveByName(ctx context.Context, name string) error {
	insp, err := m.cli.ContainerInspect(ctx, name, client.ContainerInspectOptions{})
	if isNotFound(err) {
		return fmt.Errorf("%w: no container named %s", ErrNotFound, name)
	}
	if err != nil {
		return m.classify("inspect sandbox "+name, err)
	}
	if insp.Container.Config == nil || insp.Container.Config.Labels[LabelManaged] != "1" {
		return fmt.Errorf("%w: container %s is not managed by sandboxctl", ErrNotFound, name)
	}
	if !m.ownedBy(insp.Container.Config.Labels) {
		return m.otherStateErr(name, insp.Container.Config.Labels)
	}
	if err := m.removeID(ctx, insp.Container.ID); err != nil {
		return err
	}
	m.forgetPooled(insp.Container.ID, insp.Container.Config.Labels)
	m.reg.forget(trimSlash(insp.Container.Name))
	return nil
}

func trimSlash(s string) string {
	if len(s) > 0 && s[0] == '/' {
		return s[1:]
	}
	return s
}

// Prune removes managed containers idle longer than prune.idleHours or
// older than prune.maxAgeDays (0 disables a rule). With dryRun it only
// reports what it would remove.
func (m *DockerEngine) Prune(ctx context.Context, dryRun bool) ([]Info, error) {
	list, err := m.List(ctx)
	if err != nil {
		return nil, err
	}
	now := m.now()
	var pruned []Info
	for _, c := range list {
		if c.Pool == PoolReady {
			// Untaken pool members are fresh, whatever their age: only
			// those of another config or stopped go (the pool drains).
			if c.Current && c.State == string(container.StateRunning) {
				continue
			}
			if !dryRun {
				m.removePooled(ctx, poolMember{id: c.ID, name: c.Name, dir: c.labels[LabelPoolDir]})
			}
			pruned = append(pruned, c)
			continue
		}
		if !pruneDue(m.cfg.Prune, c, now) {
			continue
		}
		if !dryRun {
			if err := m.removeID(ctx, c.ID); err != nil {
				return pruned, err
			}
			m.forgetPooled(c.ID, c.labels)
			m.reg.forget(c.Name)
		}
		pruned = append(pruned, c)
	}
	return pruned, nil
}

// RunPruner prunes every interval until ctx ends.
func (m *Manager) RunPruner(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if pruned, err := m.Prune(ctx, false); err != nil {
				m.logf("sandbox prune: %v", err)
			} else if len(pruned) > 0 {
				m.logf("sandbox prune: removed %d idle or old sandboxes", len(pruned))
			}
			if imgs, err := m.PruneSupervisedImages(ctx); err != nil {
				m.logf("sandbox prune: %v", err)
			} else if len(imgs) > 0 {
				m.logf("sandbox prune: removed stale supervised images %v", imgs)
			}
		}
	}
}

// Explanation is what `sandboxctl sandbox explain` prints.
type Explanation struct {
	ScopeKey   string          `json:"scopeKey"`
	Name       string          `json:"name"`
	ConfigHash string          `json:"configHash"`
	Config     json.RawMessage `json:"config"`
	// Runtime is the OCI runtime sandboxes of this config run under (runc,
	// runsc = gVisor), RuntimeNote what it changes.
	Runtime     string `json:"runtime"`
	RuntimeNote string `json:"runtimeNote,omitempty"`
	Container   *Info  `json:"container,omitempty"`
	// Limits are the resource limits and the user the config in force
	// gives a sandbox of this scope (defaults included).
	Limits Limits `json:"limits"`
	// Hardening is read back from the Engine for an existing container.
	Hardening map[string]any `json:"hardening,omitempty"`
	// Recreate says whether and why the next ensure recreates the container.
	Recreate string `json:"recreate"`
	// Engine names the Engine the sandbox lives on (or would be placed on).
	Engine string `json:"engine"`
	// WorkspaceQuota says how the workspace's disk is capped ("none" when
	// sandbox.workspaceQuota is unset).
	WorkspaceQuota string `json:"workspaceQuota"`
	// Snapshots says how a snapshot keeps the workspace here
	// (SnapshotSubvolume, SnapshotReflink or SnapshotCopy, with why;
	// docs/snapshots.md).
	Snapshots string `json:"snapshots,omitempty"`
	// Egress is the effective egress policy (sandbox.network; docs/egress.md).
	Egress EgressExplained `json:"egress"`
}

// Explain reports the effective config of scope s, its hash, the container
// serving it and whether it would be recreated, and why.
func (m *DockerEngine) Explain(ctx context.Context, s Scope) (Explanation, error) {
	scopeKey := ScopeKey(m.cfg.Scope, s)
	name := ContainerName(m.cfg.Docker.ContainerPrefix, scopeKey)
	sh := m.shapeFor(scopeKey, name)
	hash, canonical := configHash(sh)
	ex := Explanation{ScopeKey: scopeKey, Name: name, ConfigHash: hash, Config: canonical, Limits: limitsOf(sh.Docker), Engine: m.engine.Name, Runtime: m.runtimeOf(ctx)}
	if sh.Identity != "" {
		ex.Limits.User = "sandbox identity from " + sh.Identity
	}
	ex.RuntimeNote = runtimeNoteFor(m.cfg.Docker.Runtime)
	ex.WorkspaceQuota = "none: the workspace shares the host filesystem (sandbox.workspaceQuota is unset)"
	if q, _ := m.cfg.WorkspaceQuotaBytes(); q > 0 {
		ex.WorkspaceQuota = fmt.Sprintf("%d bytes for %s: %s at %s", q, sh.Layout.WorkspaceHost, WorkspaceQuotaKind, m.workspaceImage(name))
	}
	ex.Snapshots = m.snapshotsExplained()
	ex.Egress = m.explainEgress(ctx, s, name)
	insp, err := m.cli.ContainerInspect(ctx, name, client.ContainerInspectOptions{})
	switch {
	case isNotFound(err):
		ex.Recreate = "no container yet: the next command creates it"
		return ex, nil
	case err != nil:
		return ex, m.classify("inspect sandbox "+name, err)
	}
	c := insp.Container
	if tmpl := c.Config.Labels[LabelTemplate]; tmpl != "" {
		sh = m.shapeOf(scopeKey, name, tmpl)
		hash, canonical = configHash(sh)
		ex.ConfigHash, ex.Config = hash, canonical
		user := ex.Limits.User
		ex.Limits = limitsOf(sh.Docker)
		ex.Limits.User = user
	}
	labels := m.ownerLabels(c.ID, c.Config.Labels)
	ms, _ := strconv.ParseInt(labels[LabelCreatedAt], 10, 64)
	info := Info{Sandbox: api.Sandbox{ID: c.ID, Name: name, ScopeKey: scopeKey, AgentID: labels[LabelAgentID], SessionKey: labels[LabelSessionKey],
		Image: c.Config.Image, CreatedAt: time.UnixMilli(ms), LastUsedAt: m.reg.lastUsed(name),
		ConfigHash: labels[LabelConfigHash], Current: labels[LabelConfigHash] == m.wantHash(labels, scopeKey, name), Engine: m.engine.Name,
		Template: templateOf(c.Config.Labels), Labels: userLabels(labels), ExpiresAt: m.expiresAt(name, c.ID, c.Config.Labels)}}
	if labels[LabelPooled] == "1" {
		info.Pool = PoolTaken
	}
	if c.State != nil {
		info.State = string(c.State.Status)
	}
	ex.Container = &info
	ex.Hardening = hardeningOf(c)
	if id, ok := identityOf(c.Config.Labels); ok {
		ex.Limits.User = fmt.Sprintf("%d:%d (sandbox identity from %s)", id.Command, id.Command, sh.Identity)
	}
	switch {
	case info.Current:
		ex.Recreate = "no: the container matches the config in force"
	default:
		last := info.LastUsedAt
		diff := diffConfig(labels[LabelConfig], canonical)
		if !last.IsZero() && m.now().Sub(last) < RecentUseWindow && info.State == string(container.StateRunning) {
			ex.Recreate = fmt.Sprintf("pending: config changed (%s) but the sandbox was used %s ago; recreated once idle for %s",
				diff, m.now().Sub(last).Round(time.Second), RecentUseWindow)
		} else {
			ex.Recreate = fmt.Sprintf("yes: config changed (%s); the next command recreates it", diff)
		}
	}
	return ex, nil
}

// Limits are a sandbox's resource limits as configured ("" or 0: none).
type Limits struct {
	User       string            `json:"user"`
	Memory     string            `json:"memory"`
	MemorySwap string            `json:"memorySwap"`
	CPUs       float64           `json:"cpus"`
	PidsLimit  int64             `json:"pidsLimit"`
	Tmpfs      map[string]string `json:"tmpfs"` // path -> size
}

func limitsOf(d DockerConfig) Limits {
	l := Limits{User: d.User, Memory: d.Memory, MemorySwap: d.MemorySwap, CPUs: d.CPUs, PidsLimit: d.PidsLimit, Tmpfs: map[string]string{}}
	ts, _ := sandboxconfig.ParseTmpfsList(d) // validated in NewManager
	for _, t := range ts {
		l.Tmpfs[t.Path] = units.BytesSize(float64(t.Size))
		if t.Requested > 0 {
			l.Tmpfs[t.Path] += fmt.Sprintf(" (capped from %s: a tmpfs may not fill the memory limit)", units.BytesSize(float64(t.Requested)))
		}
	}
	return l
}

func hardeningOf(c container.InspectResponse) map[string]any {
	h := map[string]any{}
	if hc := c.HostConfig; hc != nil {
		h["runtime"] = hc.Runtime
		h["readOnlyRootfs"] = hc.ReadonlyRootfs
		h["networkMode"] = string(hc.NetworkMode)
		h["capDrop"] = hc.CapDrop
		h["capAdd"] = hc.CapAdd
		h["securityOpt"] = hc.SecurityOpt
		h["init"] = hc.Init != nil && *hc.Init
		h["tmpfs"] = hc.Tmpfs
		h["privileged"] = hc.Privileged
		if hc.PidsLimit != nil {
			h["pidsLimit"] = *hc.PidsLimit
		}
		h["memory"] = hc.Memory
		h["memorySwap"] = hc.MemorySwap
		h["nanoCpus"] = hc.NanoCPUs
		var mounts []string
		for _, mt := range hc.Mounts {
			mode := "rw"
			if mt.ReadOnly {
				mode = "ro"
			}
			mounts = append(mounts, fmt.Sprintf("%s:%s:%s", mt.Source, mt.Target, mode))
		}
		h["mounts"] = mounts
	}
	if c.Config != nil {
		h["user"] = c.Config.User
		if id, ok := identityOf(c.Config.Labels); ok {
			// The container starts as root only for the supervisor to
			// take its own uid; commands run as the command uid.
			h["user"] = fmt.Sprintf("%d:%d", id.Command, id.Command)
			h["supervisorUser"] = fmt.Sprintf("%d:%d", id.Supervisor, id.Supervisor)
		}
		h["cmd"] = c.Config.Cmd
		h["workingDir"] = c.Config.WorkingDir
	}
	return h
}

// diffConfig names the top-level config fields that differ between the
// container's recorded config and the one in force.
func diffConfig(recorded string, current []byte) string {
	var a, b map[string]json.RawMessage
	if json.Unmarshal([]byte(recorded), &a) != nil || json.Unmarshal(current, &b) != nil {
		return "hash differs"
	}
	var fields []string
	for _, section := range []string{"docker", "layout"} {
		var as, bs map[string]any
		_ = json.Unmarshal(a[section], &as)
		_ = json.Unmarshal(b[section], &bs)
		for k, v := range bs {
			av, _ := json.Marshal(as[k])
			bv, _ := json.Marshal(v)
			if string(av) != string(bv) {
				fields = append(fields, section+"."+k)
			}
		}
	}
	for _, k := range []string{"allowedSourceRoots", "supervisor"} {
		if string(a[k]) != string(b[k]) {
			fields = append(fields, k)
		}
	}
	if len(fields) == 0 {
		return "hash differs"
	}
	sort.Strings(fields)
	return fmt.Sprint(fields)
}

// pruneDue says whether sandbox.prune's rules remove c at now: idle
// (unused since LastUsedAt, or CreatedAt when never used) beyond
// idleHours, or older than maxAgeDays; a rule at 0 is off.
func pruneDue(p sandboxconfig.PruneConfig, c Info, now time.Time) bool {
	last := c.LastUsedAt
	if last.IsZero() {
		last = c.CreatedAt
	}
	idle := p.IdleHours > 0 && now.Sub(last) > time.Duration(p.IdleHours*float64(time.Hour))
	old := p.MaxAgeDays > 0 && now.Sub(c.CreatedAt) > time.Duration(p.MaxAgeDays*24*float64(time.Hour))
	return idle || old
}
