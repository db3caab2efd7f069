package sandbox

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"

	"github.com/sandboxctl/sandboxctl/api"
	"github.com/sandboxctl/sandboxctl/sandbox/sandboxconfig"
	"github.com/sandboxctl/sandboxctl/sandbox/supervisor"
	"github.com/sandboxctl/sandboxctl/workdir"
)

// memBackend is a Backend of sandboxes in memory: the Manager's logic over
// a Backend (refs, TTLs, expiry, prune, capabilities) without a cluster.
// The Kubernetes engine's own tests (sandbox/kube) run it for real.
type memBackend struct {
	caps BackendCaps
	mu   sync.Mutex
	sbx  map[string]Info // by id
	n    int
}

func (b *memBackend) Name() string               { return "mem" }
func (b *memBackend) Where() string              { return "memory" }
func (b *memBackend) Caps() BackendCaps          { return b.caps }
func (b *memBackend) Ping(context.Context) error { return nil }
func (b *memBackend) Close() error               { return nil }
func (b *memBackend) StartPool()                 {}
func (b *memBackend) Pool() PoolStatus           { return PoolStatus{} }

func (b *memBackend) Ensure(_ context.Context, s Scope) (EnsureResult, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	k := ScopeKey("agent", s)
	for _, in := range b.sbx {
		if in.ScopeKey == k {
			return EnsureResult{ID: in.ID, Name: in.Name, ScopeKey: k}, nil
		}
	}
	b.n++
	in := Info{Sandbox: api.Sandbox{ID: fmt.Sprintf("pod%04d", b.n), Name: ContainerName("sandboxctl-", k), ScopeKey: k, AgentID: s.AgentID,
		State: "running", CreatedAt: time.Now(), Current: true}}
	b.sbx[in.ID] = in
	return EnsureResult{ID: in.ID, Name: in.Name, ScopeKey: k, Created: true}, nil
}

func (b *memBackend) Create(ctx context.Context, s Scope, o CreateOptions) (Info, error) {
	res, err := b.Ensure(ctx, s)
	if err != nil {
		return Info{}, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	in := b.sbx[res.ID]
	in.Labels = o.Labels
	b.sbx[res.ID] = in
	return in, nil
}

func (b *memBackend) List(context.Context) ([]Info, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []Info
	for _, in := range b.sbx {
		out = append(out, in)
	}
	return out, nil
}

func (b *memBackend) Remove(_ context.Context, in Info) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.sbx[in.ID]; !ok {
		return fmt.Errorf("%w: %s", ErrNotFound, in.ID)
	}
	delete(b.sbx, in.ID)
	return nil
}

func (b *memBackend) SetExpiry(_ context.Context, in Info, at time.Time) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	in = b.sbx[in.ID]
	in.ExpiresAt = at
	b.sbx[in.ID] = in
	return nil
}

func (b *memBackend) Explain(_ context.Context, s Scope) (Explanation, error) {
	return Explanation{ScopeKey: ScopeKey("agent", s)}, nil
}
func (b *memBackend) Pause(_ context.Context, in Info) (Info, error) {
	return b.setState(in, "paused")
}

func (b *memBackend) Resume(_ context.Context, in Info) (Info, error) {
	return b.setState(in, "running")
}

func (b *memBackend) setState(in Info, state string) (Info, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	in = b.sbx[in.ID]
	in.State = state
	b.sbx[in.ID] = in
	return in, nil
}
func (b *memBackend) Start(context.Context, Scope, ExecOptions) (*Started, error) {
	return nil, errors.New("memBackend runs no commands")
}
func (b *memBackend) Supervisor(context.Context, Scope) (*supervisor.Client, error) {
	return nil, errors.New("memBackend has no supervisors")
}
func (b *memBackend) SupervisorOf(context.Context, string) (*supervisor.Client, error) {
	return nil, errors.New("memBackend has no supervisors")
}

func newBackendManager(t *testing.T, b Backend, now func() time.Time, mutate func(*Config)) *Manager {
	t.Helper()
	cfg := sandboxconfig.DefaultConfig()
	if mutate != nil {
		mutate(&cfg)
	}
	m, err := NewManager(context.Background(), Options{Config: cfg, StateDir: t.TempDir(), Backend: b, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m
}

// A Manager over a Backend routes the lifecycle to it and does the rest
// itself: refs, TTLs that expire, prune by idleness, and
// ErrNotImplemented naming the engine for what it lacks.
func TestBackendManager(t *testing.T) {
	ctx := context.Background()
	var mu sync.Mutex
	clock := time.Now()
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	advance := func(d time.Duration) { mu.Lock(); clock = clock.Add(d); mu.Unlock() }
	b := &memBackend{sbx: map[string]Info{}}
	m := newBackendManager(t, b, now, func(c *Config) { c.Prune.IdleHours = 1 })

	a, err := m.Create(ctx, Scope{AgentID: "a"}, CreateOptions{Labels: map[string]string{"team": "x"}})
	if err != nil || a.Engine != "mem" {
		t.Fatalf("Create: %+v %v", a, err)
	}
	if _, err := m.Create(ctx, Scope{AgentID: "b"}, CreateOptions{Labels: map[string]string{"bad key": "x"}}); !cerrdefs.IsInvalidArgument(err) {
		t.Fatalf("Create with a bad label: %v", err)
	}
	if list, _ := m.List(ctx); len(list) != 1 {
		t.Fatalf("a bad Create made a sandbox: %+v", list)
	}
	if got, err := m.Get(ctx, a.ID[:5]); err != nil || got.ID != a.ID {
		t.Fatalf("Get by id prefix: %+v %v", got, err)
	}
	if _, name, ws, access := m.Layout(Scope{AgentID: "a"}); name != a.Name || ws != "" || access != workdir.AccessRW {
		t.Fatalf("Layout: %s %q %q", name, ws, access)
	}
	if m.Client() != nil || m.WorkspaceRoot() != "" {
		t.Fatal("a Manager over a Backend has a Docker client or a host workspace root")
	}

	// TTL: Extend sets it; ExpireDue removes the sandbox once it passed.
	if _, err := m.Extend(ctx, a.Name, -time.Second); !cerrdefs.IsInvalidArgument(err) {
		t.Fatalf("Extend by a negative TTL: %v", err)
	}
	ext, err := m.Extend(ctx, a.Name, time.Minute)
	if err != nil || !ext.ExpiresAt.Equal(now().Add(time.Minute)) {
		t.Fatalf("Extend: %+v %v", ext, err)
	}
	if gone, err := m.ExpireDue(ctx); err != nil || len(gone) != 0 {
		t.Fatalf("ExpireDue before the TTL: %+v %v", gone, err)
	}
	advance(2 * time.Minute)
	if gone, err := m.ExpireDue(ctx); err != nil || len(gone) != 1 || gone[0].ID != a.ID {
		t.Fatalf("ExpireDue after the TTL: %+v %v", gone, err)
	}
	if _, err := m.Get(ctx, a.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get of an expired sandbox: %v", err)
	}

	// Prune: idle past prune.idleHours (last used = its last Ensure).
	if _, err := m.Ensure(ctx, Scope{AgentID: "idle"}); err != nil {
		t.Fatal(err)
	}
	if pruned, err := m.Prune(ctx, false); err != nil || len(pruned) != 0 {
		t.Fatalf("Prune of a sandbox just used: %+v %v", pruned, err)
	}
	advance(2 * time.Hour)
	if pruned, err := m.Prune(ctx, true); err != nil || len(pruned) != 1 {
		t.Fatalf("Prune dry run: %+v %v", pruned, err)
	}
	if list, _ := m.List(ctx); len(list) != 1 {
		t.Fatalf("a dry run removed: %+v", list)
	}
	if pruned, err := m.Prune(ctx, false); err != nil || len(pruned) != 1 {
		t.Fatalf("Prune: %+v %v", pruned, err)
	}
	if list, _ := m.List(ctx); len(list) != 0 {
		t.Fatalf("after Prune: %+v", list)
	}

	// What the engine lacks: 501 class, naming it; nothing changes.
	c, err := m.Create(ctx, Scope{AgentID: "c"}, CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	notImpl := map[string]error{}
	_, notImpl["Pause"] = m.Pause(ctx, c.ID)
	_, notImpl["Snapshot"] = m.Snapshot(ctx, Scope{AgentID: "c"}, "s")
	_, notImpl["Snapshots"] = m.Snapshots(Scope{AgentID: "c"})
	_, notImpl["Rollback"] = m.Rollback(ctx, Scope{AgentID: "c"}, "s")
	_, notImpl["StatFile"] = m.StatFile(ctx, Scope{AgentID: "c"}, "/workspace")
	_, notImpl["DialPort"] = m.DialPort(ctx, Scope{AgentID: "c"}, 80)
	_, _, notImpl["Attach"] = m.Attach(ctx, Scope{AgentID: "c"}, ExecOptions{Cmd: []string{"true"}})
	for what, err := range notImpl {
		if !cerrdefs.IsNotImplemented(err) || !strings.Contains(err.Error(), `mem sandbox engine`) {
			t.Errorf("%s: %v, want ErrNotImplemented naming the engine", what, err)
		}
	}
	if got, err := m.Get(ctx, c.ID); err != nil || got.State != "running" {
		t.Fatalf("after the refused calls: %+v %v", got, err)
	}
	b.caps.Pause = true
	if p, err := m.Pause(ctx, c.ID); err != nil || p.State != "paused" || p.Engine != "mem" {
		t.Fatalf("Pause with Caps.Pause: %+v %v", p, err)
	}
	if r, err := m.Resume(ctx, c.Name); err != nil || r.State != "running" {
		t.Fatalf("Resume: %+v %v", r, err)
	}
	if st := m.Engines(); len(st) != 1 || st[0].Name != "mem" || !st[0].Healthy || st[0].Sandboxes != 1 {
		t.Fatalf("Engines: %+v", st)
	}
}
