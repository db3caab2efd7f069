package sandbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/moby/moby/client"

	"github.com/sandboxctl/sandboxctl/internal/atomicfile"
	"github.com/sandboxctl/sandboxctl/sandbox/sandboxconfig"
	"github.com/sandboxctl/sandboxctl/workdir"
)

// The warm pool (sandbox.pool.size for the default template,
// sandbox.templates.NAME.pool for the others): started, supervised
// sandboxes made ahead of need for the config in force, each of one
// template (its container label LabelTemplate, known in advance). The first command of a new scope
// takes one: the container is renamed to the scope's name and its
// workspace directory, made with it, is moved to the scope's workspace
// path. A pooled sandbox serves exactly one scope, once: it is taken out of
// the pool before anything else sees it, and a taken one never returns.
//
// Container labels cannot change after creation, so a taken sandbox's
// owner (scope key, agent, session key) and the labels it was created with
// are kept by the daemon in its state directory (pool-claims.json), written
// before the container is renamed, and a TTL in the sandbox's own record
// (as an extension's): like the labels, nothing inside a sandbox can reach
// them.

// Labels of pooled containers.
const (
	// LabelPooled marks a container made for the pool; its config hash is
	// the pool's (poolShape), not a scope's.
	LabelPooled = "sandboxctl.pooled"
	// LabelPoolDir is the host directory made with the container and
	// mounted as its workspace (a symlink to where it moved, once taken).
	LabelPoolDir = "sandboxctl.poolDir"
)

// poolNameInfix follows the containerPrefix in the names of untaken pooled
// containers.
const poolNameInfix = "pool-"

// poolRetry bounds the pause after a pooled sandbox could not be made.
const poolRetry = 5 * time.Second

// Pool states in Info.Pool.
const (
	PoolReady = "ready" // made for the pool, not taken
	PoolTaken = "taken" // made for the pool, now a scope's
)

// claim is who took a pooled sandbox.
type claim struct {
	Name       string `json:"name"`
	ScopeKey   string `json:"scopeKey"`
	AgentID    string `json:"agentId,omitempty"`
	SessionKey string `json:"sessionKey,omitempty"`
	TakenAtMs  int64  `json:"takenAtMs"`
	// Labels are the labels given at creation (without LabelUserPrefix).
	Labels map[string]string `json:"labels,omitempty"`
}

// claims is pool-claims.json: container id -> claim.
type claims struct {
	path string

	mu     sync.Mutex
	loaded bool
	m      map[string]claim
}

func (c *claims) loadLocked() {
	if c.loaded {
		return
	}
	c.loaded = true
	c.m = map[string]claim{}
	if data, err := os.ReadFile(c.path); err == nil {
		_ = json.Unmarshal(data, &c.m)
	}
}

func (c *claims) get(id string) (claim, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.loadLocked()
	cl, ok := c.m[id]
	return cl, ok
}

// put records a claim durably (written and synced before it returns).
func (c *claims) put(id string, cl claim) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.loadLocked()
	c.m[id] = cl
	return c.writeLocked()
}

func (c *claims) remove(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.loadLocked()
	if _, ok := c.m[id]; ok {
		delete(c.m, id)
		_ = c.writeLocked()
	}
}

func (c *claims) writeLocked() error {
	if err := os.MkdirAll(filepath.Dir(c.path), 0o700); err != nil {
		return err
	}
	data, err := json.MarshalIndent(c.m, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(c.path, data, 0o600)
}

// ownerLabels are a container's labels with the owner of a taken pooled
// sandbox filled in from its claim; a pooled one not taken has no owner.
func (m *DockerEngine) ownerLabels(id string, labels map[string]string) map[string]string {
	if labels[LabelPooled] != "1" {
		return labels
	}
	out := make(map[string]string, len(labels)+3)
	for k, v := range labels {
		out[k] = v
	}
	delete(out, LabelScopeKey)
	delete(out, LabelAgentID)
	delete(out, LabelSessionKey)
	if cl, ok := m.claims.get(id); ok {
		out[LabelScopeKey], out[LabelAgentID], out[LabelSessionKey] = cl.ScopeKey, cl.AgentID, cl.SessionKey
		for k, v := range cl.Labels {
			out[LabelUserPrefix+k] = v
		}
	}
	return out
}

// wantHash is the config hash a container with these labels should carry
// for the config in force: the pool's for a pooled one, else the scope's.
func (m *DockerEngine) wantHash(labels map[string]string, scopeKey, name string) string {
	if labels[LabelPooled] == "1" {
		h, _ := configHash(m.poolShape(templateOf(labels), ""))
		return h
	}
	h, _ := configHash(m.shapeOf(scopeKey, name, labels[LabelTemplate]))
	return h
}

// pool is the Manager's warm pool: one per template, one filler.
type pool struct {
	mu sync.Mutex
	// ready holds the untaken members by template name.
	ready   map[string][]poolMember
	started bool
	closed  bool
	kick    chan struct{}
	cancel  context.CancelFunc
	done    chan struct{}
	lastErr string
}

type poolMember struct {
	id, name, dir string
	template      string
	supervised    bool
	note          string
}

// poolSize is the configured size of template t's pool (0: no pool; an
// unknown template has none).
func (m *DockerEngine) poolSize(t string) int {
	if m.cfg.WorkspaceAccess == string(workdir.AccessRO) {
		return 0 // refused by Validate; kept out here as well
	}
	if t == "" || t == sandboxconfig.DefaultTemplate {
		return m.cfg.Pool.Size
	}
	return m.cfg.Templates[t].Pool
}

// poolTemplates are the templates with a pool, the default first.
func (m *DockerEngine) poolTemplates() []string {
	var out []string
	for _, t := range m.cfg.TemplateNames() {
		if m.poolSize(t) > 0 {
			out = append(out, t)
		}
	}
	return out
}

// poolTotal is the size of all pools together.
func (m *DockerEngine) poolTotal() int {
	n := 0
	for _, t := range m.poolTemplates() {
		n += m.poolSize(t)
	}
	return n
}

// poolShape is the shape of a pooled sandbox of template t: the workspace
// is dir (made with the container); its hash leaves dir out, so every
// member of one template and config hashes alike.
func (m *DockerEngine) poolShape(t, dir string) shape {
	access, _ := workdir.ParseAccess(m.cfg.WorkspaceAccess)
	d, err := m.cfg.TemplateDocker(t)
	if err != nil {
		d = m.cfg.Docker
	}
	sh := shape{Docker: d, Layout: layout{Access: access, AgentDir: dir, SandboxDir: dir, WorkspaceHost: dir}, Roots: m.cfg.AllowedSourceRoots, Broker: m.brokered}
	m.setUser(&sh)
	if m.sup != nil {
		sh.Supervisor = m.sup.hash
	}
	return sh
}

// poolDirRoot is where the workspaces of pooled sandboxes are made: on the
// filesystem of the directory they move to when taken.
func (m *DockerEngine) poolDirRoot() string {
	if m.cfg.WorkspaceAccess == string(workdir.AccessRW) {
		return filepath.Join(m.wsRoot, ".pool")
	}
	return filepath.Join(m.stateDir, "pool")
}

// startPool starts filling the pool (once; a no-op without one). Only a
// daemon (StartPool) or WaitPool starts it: a short-lived Manager (the
// CLI's) never makes pooled sandboxes.
func (m *DockerEngine) startPool() {
	if m.poolTotal() == 0 {
		return
	}
	m.pool.mu.Lock()
	defer m.pool.mu.Unlock()
	if m.pool.started || m.pool.closed {
		return
	}
	m.pool.started = true
	ctx, cancel := context.WithCancel(context.Background())
	m.pool.cancel, m.pool.done, m.pool.kick = cancel, make(chan struct{}), make(chan struct{}, 1)
	go func() {
		defer close(m.pool.done)
		m.fillPool(ctx)
	}()
}

// StartPool starts filling the warm pool now rather than at the first
// sandbox call (a daemon calls it at start).
func (m *DockerEngine) StartPool() { m.startPool() }

// fillPool keeps the pool full until ctx ends: one goroutine per Manager.
// It first settles what earlier daemons left: pooled sandboxes of another
// config are removed (a config change drains the pool), untaken ones of
// this config are adopted.
func (m *DockerEngine) fillPool(ctx context.Context) {
	m.settlePool(ctx)
	for ctx.Err() == nil {
		short := ""
		m.pool.mu.Lock()
		for _, t := range m.poolTemplates() {
			if len(m.pool.ready[t]) < m.poolSize(t) {
				short = t
				break
			}
		}
		m.pool.mu.Unlock()
		if short == "" {
			select {
			case <-ctx.Done():
				return
			case <-m.pool.kick:
			}
			continue
		}
		mem, err := m.makePooled(ctx, short)
		m.pool.mu.Lock()
		if err == nil {
			if m.pool.closed {
				m.pool.mu.Unlock()
				m.removePooled(context.WithoutCancel(ctx), mem)
				return
			}
			m.pool.addLocked(mem)
			m.pool.lastErr = ""
		} else {
			m.pool.lastErr = err.Error()
		}
		m.pool.mu.Unlock()
		if err != nil && ctx.Err() == nil {
			m.logf("sandbox pool: %v; retrying in %s", err, poolRetry)
			select {
			case <-ctx.Done():
				return
			case <-time.After(poolRetry):
			}
		}
	}
}

// settlePool removes pooled sandboxes of another config (or stopped) not
// taken by anyone, and adopts running untaken ones of this config.
func (m *DockerEngine) settlePool(ctx context.Context) {
	list, err := m.listPooled(ctx)
	if err != nil {
		m.logf("sandbox pool: %v", err)
		return
	}
	for _, c := range list {
		if c.taken {
			continue
		}
		mem := poolMember{id: c.id, name: c.name, dir: c.dir, template: c.template, supervised: c.supervised, note: c.note}
		want, _ := configHash(m.poolShape(c.template, ""))
		if c.hash != want || !c.running || m.poolSize(c.template) == 0 {
			m.logf("sandbox pool: removing %s (config changed or stopped)", c.name)
			m.removePooled(ctx, mem)
			continue
		}
		m.pool.mu.Lock()
		if len(m.pool.ready[c.template]) < m.poolSize(c.template) {
			m.pool.addLocked(mem)
			mem.id = ""
		}
		m.pool.mu.Unlock()
		if mem.id != "" {
			m.removePooled(ctx, mem) // more than the pool's size
		}
	}
}

type pooledContainer struct {
	id, name, dir, hash string
	template            string
	running, taken      bool
	supervised          bool
	note                string
}

// listPooled lists this Manager's pooled containers (taken or not).
func (m *DockerEngine) listPooled(ctx context.Context) ([]pooledContainer, error) {
	f := m.ownFilter().Add("label", LabelPooled+"=1").Add("label", LabelStateID+"="+m.stateID)
	list, err := m.cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		return nil, m.classify("list pooled sandboxes", err)
	}
	out := make([]pooledContainer, 0, len(list.Items))
	for _, c := range list.Items {
		name := ""
		if len(c.Names) > 0 {
			name = trimSlash(c.Names[0])
		}
		_, claimed := m.claims.get(c.ID)
		out = append(out, pooledContainer{
			id: c.ID, name: name, dir: c.Labels[LabelPoolDir], hash: c.Labels[LabelConfigHash],
			template:   templateOf(c.Labels),
			running:    c.State == "running",
			supervised: c.Labels[LabelSupervisor] != "", note: c.Labels[LabelSupervisorNote],
			// A claim whose rename never happened (a crash between the
			// two) leaves the pool name: not taken.
			taken: claimed && !m.isPoolName(name),
		})
	}
	return out, nil
}

func (m *DockerEngine) isPoolName(name string) bool {
	return strings.HasPrefix(name, m.cfg.Docker.ContainerPrefix+poolNameInfix)
}

// makePooled creates and starts one pooled sandbox of template t.
func (m *DockerEngine) makePooled(ctx context.Context, t string) (poolMember, error) {
	name := m.cfg.Docker.ContainerPrefix + poolNameInfix + randomHex(6)
	dir := filepath.Join(m.poolDirRoot(), strings.TrimPrefix(name, m.cfg.Docker.ContainerPrefix))
	sh := m.poolShape(t, dir)
	hash, canonical := configHash(m.poolShape(t, ""))
	extra := map[string]string{LabelPooled: "1", LabelPoolDir: dir}
	if t != sandboxconfig.DefaultTemplate {
		extra[LabelTemplate] = t
	}
	id, supervised, note, err := m.create(ctx, Scope{}, "", name, sh, hash, canonical, extra)
	if err != nil {
		_ = os.RemoveAll(dir)
		return poolMember{}, fmt.Errorf("make a pooled sandbox: %w", err)
	}
	if !supervised {
		m.logf("sandbox pool: %s runs without the supervisor (%s)", name, note)
	}
	return poolMember{id: id, name: name, dir: dir, template: t, supervised: supervised, note: note}, nil
}

// removePooled removes an untaken pooled sandbox and its workspace.
func (m *DockerEngine) removePooled(ctx context.Context, mem poolMember) {
	if err := m.removeID(ctx, mem.id); err != nil {
		m.logf("sandbox pool: remove %s: %v", mem.name, err)
		return
	}
	m.claims.remove(mem.id)
	if mem.dir != "" && filepath.Dir(mem.dir) == m.poolDirRoot() {
		if fi, err := os.Lstat(mem.dir); err == nil && fi.IsDir() {
			_ = os.RemoveAll(mem.dir)
		}
	}
}

// takePooled gives scope s (named name, workspace sh's) a pooled sandbox
// of template t, recording labels (given at creation) in its claim: it
// returns it, or ok false when none can serve (no pool, empty, or the
// scope's workspace directory exists already and holds files: a pooled
// workspace is new and empty). The caller holds the scope's lock.
func (m *DockerEngine) takePooled(ctx context.Context, s Scope, scopeKey, name string, sh shape, t string, labels map[string]string) (mem poolMember, ok bool, err error) {
	t = templateOrDefault(t)
	if m.poolSize(t) == 0 {
		return mem, false, nil
	}
	if !emptyOrMissing(sh.Layout.WorkspaceHost) {
		return mem, false, nil
	}
	for {
		m.pool.mu.Lock()
		if len(m.pool.ready[t]) == 0 {
			m.pool.mu.Unlock()
			return mem, false, nil
		}
		mem = m.pool.ready[t][0]
		m.pool.ready[t] = m.pool.ready[t][1:]
		m.pool.mu.Unlock()
		// The claim is written while the Engine renames the container:
		// both must be done before the sandbox is used. Should the
		// daemon die between the two, Ensure of this scope finds the
		// container under its name and writes the claim again
		// (restoreClaim).
		cl := claim{Name: name, ScopeKey: scopeKey, AgentID: s.AgentID, SessionKey: s.SessionKey, TakenAtMs: m.now().UnixMilli(), Labels: labels}
		claimErr := make(chan error, 1)
		go func() { claimErr <- m.claims.put(mem.id, cl) }()
		_, err := m.cli.ContainerRename(ctx, mem.id, client.ContainerRenameOptions{NewName: name})
		cerr := <-claimErr
		m.kickPool()
		if err != nil {
			// Gone (removed by hand), or the name is taken (another
			// process made the scope's sandbox first): never reused.
			m.claims.remove(mem.id)
			m.removePooled(context.WithoutCancel(ctx), mem)
			if isConflict(err) {
				return mem, false, err
			}
			m.logf("sandbox pool: take %s: %v", mem.name, err)
			continue
		}
		if cerr != nil {
			// Renamed but not recorded: it is the scope's now, but its
			// owner could not be kept; it is not used.
			_ = m.removeID(context.WithoutCancel(ctx), mem.id)
			m.forgetPooled(mem.id, map[string]string{LabelPooled: "1", LabelPoolDir: mem.dir})
			return mem, false, fmt.Errorf("sandbox pool: record the claim: %w", cerr)
		}
		if err := m.moveClaimedWorkspace(mem.dir, sh); err != nil {
			return mem, false, err
		}
		m.logf("sandbox %s: taken from the pool of template %s (%s)", name, t, mem.name)
		return mem, true, nil
	}
}

// poolRefillDelay is how long the refill waits after a take, so that the
// Engine serves the taken sandbox's first command before it creates the
// next member.
const poolRefillDelay = 250 * time.Millisecond

// kickPool wakes the filler (after poolRefillDelay).
func (m *DockerEngine) kickPool() {
	time.AfterFunc(poolRefillDelay, func() {
		select {
		case m.pool.kick <- struct{}{}:
		default:
		}
	})
}

// restoreClaim writes again the claim of a pooled sandbox found under
// scope s's name without one: only this daemon renames pooled sandboxes,
// and only to the name of the scope that took it, so the name says whose
// it is (a daemon that died between the rename and the claim's write).
func (m *DockerEngine) restoreClaim(id string, s Scope, scopeKey, name string) error {
	return m.claims.put(id, claim{Name: name, ScopeKey: scopeKey, AgentID: s.AgentID, SessionKey: s.SessionKey, TakenAtMs: m.now().UnixMilli()})
}

// moveClaimedWorkspace moves a taken sandbox's workspace from the pool to
// the scope's path, leaving a symlink where it was (the Engine mounts that
// path again if the container is restarted). Idempotent: a daemon that
// died half-way finishes it on the next Ensure.
func (m *DockerEngine) moveClaimedWorkspace(poolDir string, sh shape) error {
	fi, err := os.Lstat(poolDir)
	if err != nil || !fi.IsDir() {
		return nil // moved already (a symlink), or gone
	}
	target := sh.Layout.WorkspaceHost
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		return fmt.Errorf("sandbox pool: workspace: %w", err)
	}
	if err := os.Remove(target); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("sandbox pool: workspace %s exists and is not empty: %w", target, err)
	}
	if err := os.Rename(poolDir, target); err != nil {
		return fmt.Errorf("sandbox pool: move the workspace: %w", err)
	}
	if err := os.Symlink(target, poolDir); err != nil {
		return fmt.Errorf("sandbox pool: workspace link: %w", err)
	}
	if sh.Layout.AgentDir != target {
		// Access none: the agent's own directory exists too, unmounted.
		if err := os.MkdirAll(sh.Layout.AgentDir, 0o755); err != nil {
			return fmt.Errorf("sandbox: workspace dir: %w", err)
		}
	}
	return nil
}

// forgetPooled drops what is kept about a removed pooled sandbox: its
// claim and the symlink left in the pool directory.
func (m *DockerEngine) forgetPooled(id string, labels map[string]string) {
	if labels[LabelPooled] != "1" {
		return
	}
	m.claims.remove(id)
	if dir := labels[LabelPoolDir]; dir != "" && filepath.Dir(dir) == m.poolDirRoot() {
		if fi, err := os.Lstat(dir); err == nil {
			if fi.Mode()&os.ModeSymlink != 0 {
				_ = os.Remove(dir)
			} else if fi.IsDir() {
				_ = os.RemoveAll(dir)
			}
		}
	}
}

// emptyOrMissing reports whether dir does not exist or is an empty
// directory.
func emptyOrMissing(dir string) bool {
	f, err := os.Open(dir)
	if errors.Is(err, os.ErrNotExist) {
		return true
	}
	if err != nil {
		return false
	}
	defer f.Close()
	names, err := f.Readdirnames(1)
	return len(names) == 0 && err != nil
}

// PoolStatus is the warm pool as `sandbox ls` and tests see it.
type PoolStatus struct {
	Size    int    `json:"size"`
	Ready   int    `json:"ready"`
	LastErr string `json:"lastError,omitempty"`
}

// Pool reports the pool's state.
func (m *DockerEngine) Pool() PoolStatus {
	m.pool.mu.Lock()
	defer m.pool.mu.Unlock()
	st := PoolStatus{Size: m.poolTotal(), LastErr: m.pool.lastErr}
	for _, t := range m.poolTemplates() {
		st.Ready += min(len(m.pool.ready[t]), m.poolSize(t))
	}
	return st
}

// addLocked adds mem to its template's ready members.
func (p *pool) addLocked(mem poolMember) {
	if p.ready == nil {
		p.ready = map[string][]poolMember{}
	}
	p.ready[mem.template] = append(p.ready[mem.template], mem)
}

// closePool stops filling and removes every untaken pooled sandbox.
func (m *DockerEngine) closePool() {
	m.pool.mu.Lock()
	m.pool.closed = true
	cancel, done := m.pool.cancel, m.pool.done
	m.pool.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
	m.pool.mu.Lock()
	var ready []poolMember
	for _, mems := range m.pool.ready {
		ready = append(ready, mems...)
	}
	m.pool.ready = nil
	m.pool.mu.Unlock()
	if len(ready) == 0 {
		return
	}
	ctx, cancelRm := context.WithTimeout(context.Background(), time.Minute)
	defer cancelRm()
	var wg sync.WaitGroup
	for _, mem := range ready {
		wg.Add(1)
		go func() { defer wg.Done(); m.removePooled(ctx, mem) }()
	}
	wg.Wait()
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
