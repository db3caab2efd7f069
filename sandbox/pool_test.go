package sandbox

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/sandboxctl/sandboxctl/sandbox/sandboxconfig"
)

func readyIDs(t *testing.T, m *Manager) []string {
	t.Helper()
	list, err := m.List(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, c := range list {
		if c.Pool == PoolReady {
			if c.ScopeKey != "" || c.AgentID != "" || c.State != "running" || !c.Current {
				t.Fatalf("pool member listed as %+v", c)
			}
			ids = append(ids, c.ID)
		}
	}
	return ids
}

func waitPool(t *testing.T, m *Manager) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctxT(t), 60*time.Second)
	defer cancel()
	if err := m.WaitPool(ctx); err != nil {
		t.Fatal(err)
	}
}

func engineHas(t *testing.T, m *Manager, id string) bool {
	t.Helper()
	_, err := m.first().cli.ContainerInspect(ctxT(t), id, client.ContainerInspectOptions{})
	if err != nil && !isNotFound(err) {
		t.Fatal(err)
	}
	return err == nil
}

// TestPoolTakeRefillNeverShared: the first command of a new agent runs in
// a pooled sandbox, renamed to the agent's and with the workspace made
// with it now at the agent's path; the pool refills; a second agent gets
// another one; a removed sandbox never comes back to the pool; an agent
// whose workspace holds files gets a new sandbox; the owner of a taken
// sandbox's sessions is its claim's; the taken sandbox survives a restart
// (its workspace mount follows it); Close removes the untaken ones only.
func TestPoolTakeRefillNeverShared(t *testing.T) {
	var opts Options
	m := newManagerOpts(t, func(o *Options) {
		o.Config.Pool.Size = 2
		opts = *o
	})
	waitPool(t, m)
	before := readyIDs(t, m)
	if len(before) != 2 {
		t.Fatalf("pool holds %d, want 2", len(before))
	}

	a := Scope{AgentID: "pool-a"}
	st := startCmd(t, m, a, `echo hello > /workspace/from-a; echo ok`, nil)
	if !st.Ensure.Pooled || !st.Ensure.Created || !slices.Contains(before, st.Ensure.ID) {
		t.Fatalf("first command of a new agent: pooled %v created %v id %s (pool %v)", st.Ensure.Pooled, st.Ensure.Created, short(st.Ensure.ID), before)
	}
	p := mustSupervised(t, st)
	if out, _, code, _ := drain(t, p); out != "ok\n" || code != 0 {
		t.Fatalf("in the pooled sandbox: %q %d", out, code)
	}
	_, name, ws, _ := m.Layout(a)
	if st.Ensure.Name != name || st.Ensure.Workspace != ws {
		t.Fatalf("taken sandbox: name %s workspace %s, want %s %s", st.Ensure.Name, st.Ensure.Workspace, name, ws)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "from-a")); err != nil || string(b) != "hello\n" {
		t.Fatalf("the agent's workspace on the host: %q %v", b, err)
	}
	insp, err := m.first().cli.ContainerInspect(ctxT(t), name, client.ContainerInspectOptions{})
	if err != nil || insp.Container.ID != st.Ensure.ID {
		t.Fatalf("container %s: %v", name, err)
	}

	// Refilled, with other containers.
	waitPool(t, m)
	after := readyIDs(t, m)
	if len(after) != 2 || slices.Contains(after, st.Ensure.ID) {
		t.Fatalf("pool after a take: %v (taken %s)", after, short(st.Ensure.ID))
	}

	// A second agent gets another sandbox; the first one's is its own.
	b := Scope{AgentID: "pool-b"}
	stB := startCmd(t, m, b, `ls /workspace; echo end`, nil)
	if !stB.Ensure.Pooled || stB.Ensure.ID == st.Ensure.ID {
		t.Fatalf("second agent: pooled %v id %s (first %s)", stB.Ensure.Pooled, short(stB.Ensure.ID), short(st.Ensure.ID))
	}
	if out, _, _, _ := drain(t, stB.Process); out != "end\n" {
		t.Fatalf("second agent sees %q in its workspace", out)
	}

	// Sessions of a taken sandbox belong to its claim's agent.
	bg := startCmd(t, m, a, `sleep 30`, func(o *ExecOptions) { o.Tag = "pool-bg-" + randHex(4) })
	t.Cleanup(func() { _ = bg.Kill(context.Background()) })
	rs, err := m.Sessions(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, r := range rs {
		if r.ID == bg.Tag() {
			found = true
			if r.AgentID != "pool-a" || r.ContainerID != st.Ensure.ID {
				t.Fatalf("recovered session owner %q container %s", r.AgentID, short(r.ContainerID))
			}
		}
	}
	if !found {
		t.Fatalf("session %s not listed: %+v", bg.Tag(), rs)
	}
	_ = bg.Kill(ctxT(t))

	// The taken sandbox restarts with its workspace (the Engine mounts
	// the pool path again, which now leads to the agent's directory).
	if _, err := m.first().cli.ContainerRestart(ctxT(t), st.Ensure.ID, client.ContainerRestartOptions{}); err != nil {
		t.Fatalf("restart the taken sandbox: %v", err)
	}
	if out, code := run(t, m, a, `cat /workspace/from-a`); out != "hello\n" || code != 0 {
		t.Fatalf("after a restart: %q %d", out, code)
	}

	// Removed: gone for good, never back in the pool.
	if err := m.Remove(ctxT(t), a); err != nil {
		t.Fatal(err)
	}
	waitPool(t, m)
	if ids := readyIDs(t, m); slices.Contains(ids, st.Ensure.ID) || engineHas(t, m, st.Ensure.ID) {
		t.Fatalf("removed sandbox %s still around (pool %v)", short(st.Ensure.ID), ids)
	}

	// An agent whose workspace already holds files gets a new sandbox.
	c := Scope{AgentID: "pool-c"}
	_, _, wsC, _ := m.Layout(c)
	if err := os.MkdirAll(wsC, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(wsC, "keep"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	stC := startCmd(t, m, c, `cat /workspace/keep`, nil)
	if stC.Ensure.Pooled || !stC.Ensure.Created {
		t.Fatalf("agent with files: pooled %v created %v", stC.Ensure.Pooled, stC.Ensure.Created)
	}
	if out, _, _, _ := drain(t, stC.Process); out != "x" {
		t.Fatalf("agent with files sees %q", out)
	}

	// Close removes the untaken ones and their directories, not the
	// agents' sandboxes.
	ready := readyIDs(t, m)
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	m2, err := NewManager(ctxT(t), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Close()
	for _, id := range ready {
		if engineHas(t, m2, id) {
			t.Fatalf("untaken pooled sandbox %s left after Close", short(id))
		}
	}
	if !engineHas(t, m2, stB.Ensure.ID) {
		t.Fatal("Close removed an agent's sandbox taken from the pool")
	}
	ents, _ := os.ReadDir(m2.first().poolDirRoot())
	for _, e := range ents {
		if e.Type()&os.ModeSymlink == 0 {
			t.Fatalf("pool directory %s left after Close", e.Name())
		}
	}
}

// TestPoolConfigChangeDrains: a Manager with another config removes the
// untaken sandboxes of the old one and fills its pool with its own;
// a taken sandbox stays its agent's.
func TestPoolConfigChangeDrains(t *testing.T) {
	var opts Options
	m := newManagerOpts(t, func(o *Options) {
		o.Config.Pool.Size = 1
		opts = *o
	})
	waitPool(t, m)
	old := readyIDs(t, m)
	// Simulate a crash: the pool is not closed, its members stay.
	m.first().pool.mu.Lock()
	m.first().pool.closed, m.first().pool.ready = true, nil
	cancel, done := m.first().pool.cancel, m.first().pool.done
	m.first().pool.mu.Unlock()
	cancel()
	<-done

	changed := opts
	changed.Config.Docker.Env = map[string]string{"LANG": "C.UTF-8", "POOL_CONFIG": "2"}
	m2, err := NewManager(ctxT(t), changed)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		list, _ := m2.List(context.Background())
		for _, c := range list {
			_ = m2.first().removeID(context.Background(), c.ID)
		}
		_ = m2.Close()
	})
	// Prune of the new config knows the old members as stale.
	pruned, err := m2.Prune(ctxT(t), true)
	if err != nil {
		t.Fatal(err)
	}
	if len(pruned) != len(old) || pruned[0].Pool != PoolReady || pruned[0].Current {
		t.Fatalf("dry-run prune under the new config: %+v (old pool %v)", pruned, old)
	}
	waitPool(t, m2)
	for _, id := range old {
		if engineHas(t, m2, id) {
			t.Fatalf("pooled sandbox %s of the old config not drained", short(id))
		}
	}
	ids := readyIDs(t, m2)
	if len(ids) != 1 || slices.Contains(old, ids[0]) {
		t.Fatalf("new pool %v (old %v)", ids, old)
	}
	st := startCmd(t, m2, Scope{AgentID: "drain"}, `echo $POOL_CONFIG`, nil)
	if out, _, _, _ := drain(t, st.Process); !st.Ensure.Pooled || out != "2\n" {
		t.Fatalf("taken from the new pool: pooled %v, env %q", st.Ensure.Pooled, out)
	}
}

// TestPoolConfigRefusals: sizes out of range, scope shared and read-only
// workspaces are refused with the setting named.
func TestPoolConfigRefusals(t *testing.T) {
	for _, tc := range []struct {
		mutate func(*Config)
		want   string
	}{
		{func(c *Config) { c.Pool.Size = -1 }, "between 0 and"},
		{func(c *Config) { c.Pool.Size = 1000 }, "between 0 and"},
		{func(c *Config) { c.Pool.Size, c.Scope = 1, "shared" }, "scope shared"},
		{func(c *Config) { c.Pool.Size, c.WorkspaceAccess = 1, "ro" }, "workspaceAccess ro"},
		{func(c *Config) { c.PauseAfterMinutes = -1 }, "pauseAfterMinutes"},
		{func(c *Config) { c.Templates = map[string]Template{"t": {Pool: -1}} }, "sandbox.templates.t.pool"},
		{func(c *Config) { c.Templates, c.Scope = map[string]Template{"t": {Pool: 1}}, "shared" }, "sandbox.templates.t.pool"},
	} {
		c := DefaultConfig()
		tc.mutate(&c)
		err := c.Validate()
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate: %v, want ErrInvalidConfig saying %q", err, tc.want)
		}
	}
}

// TestPoolClaimRestored: a daemon that died after renaming a pooled
// sandbox to a scope's name but before its claim was written: the next
// Ensure of that scope writes the claim again and uses the sandbox, with
// the scope's owner for its sessions.
func TestPoolClaimRestored(t *testing.T) {
	m := newManagerOpts(t, func(o *Options) { o.Config.Pool.Size = 1 })
	waitPool(t, m)
	m.first().pool.mu.Lock()
	mem := m.first().pool.ready[sandboxconfig.DefaultTemplate][0]
	m.first().pool.ready = nil
	m.first().pool.mu.Unlock()
	s := Scope{AgentID: "restored"}
	_, name, _, _ := m.Layout(s)
	if _, err := m.first().cli.ContainerRename(ctxT(t), mem.id, client.ContainerRenameOptions{NewName: name}); err != nil {
		t.Fatal(err)
	}
	res, err := m.Ensure(ctxT(t), s)
	if err != nil || res.ID != mem.id {
		t.Fatalf("Ensure after the half-done take: %s %v", short(res.ID), err)
	}
	if cl, ok := m.first().claims.get(mem.id); !ok || cl.AgentID != "restored" || cl.ScopeKey != res.ScopeKey {
		t.Fatalf("claim %+v %v", cl, ok)
	}
	if out, code := run(t, m, s, `ls -d /workspace && touch /workspace/w && echo ok`); code != 0 || !strings.HasSuffix(out, "ok\n") {
		t.Fatalf("in the restored sandbox: %q %d", out, code)
	}
	if _, err := os.Stat(filepath.Join(res.Workspace, "w")); err != nil {
		t.Fatalf("workspace not moved to the scope's path: %v", err)
	}
}

// TestPoolPerTemplate: a template with a pool (sandbox.templates.NAME.pool)
// keeps started sandboxes of its image and limits ready; a create from it
// with labels and a TTL is served from that pool (the pooled container
// itself, taken: Info.Pool "taken"), has the template's limits and env,
// the labels (from its claim) and the TTL (from its record), and is not
// recreated by its first command; the pool refills; a create from a
// template without a pool is made new.
func TestPoolPerTemplate(t *testing.T) {
	m := newTestManager(t, func(c *Config) {
		c.Templates = map[string]Template{
			"small": {Memory: "256m", PidsLimit: 64, Env: map[string]string{"TPL": "small-env"}, Pool: 1},
			"plain": {PidsLimit: 128},
		}
	})
	ctx := objectCtx(t)
	waitPool(t, m)
	ready := readyIDs(t, m)
	if len(ready) != 1 {
		t.Fatalf("%d pooled sandboxes, want 1 (the template small's)", len(ready))
	}
	if got, err := m.Get(ctx, ready[0]); err != nil || got.Template != "small" {
		t.Fatalf("the pooled sandbox: %+v %v", got, err)
	}

	s := Scope{AgentID: "tpl-pool"}
	before := time.Now()
	in, err := m.Create(ctx, s, CreateOptions{Template: "small", Labels: map[string]string{"team": "red"}, TTL: time.Hour})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if in.ID != ready[0] || in.Pool != PoolTaken {
		t.Fatalf("create was not served from the pool: got %s (pool %q), pooled %s", in.ID, in.Pool, ready[0])
	}
	if in.Template != "small" || in.Labels["team"] != "red" || in.AgentID != "tpl-pool" || in.State != "running" {
		t.Fatalf("created: %+v", in)
	}
	if in.ExpiresAt.Before(before.Add(59*time.Minute)) || in.ExpiresAt.After(time.Now().Add(time.Hour)) {
		t.Fatalf("expiresAt %s, want about an hour from now", in.ExpiresAt)
	}
	insp, err := m.Client().ContainerInspect(ctx, in.ID, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if hc := insp.Container.HostConfig; hc.Memory != 256<<20 || hc.PidsLimit == nil || *hc.PidsLimit != 64 {
		t.Fatalf("the template's limits are not the container's: memory %d pids %v", hc.Memory, hc.PidsLimit)
	}
	if insp.Container.Config.Labels[LabelTemplate] != "small" {
		t.Fatalf("labels %v", insp.Container.Config.Labels)
	}
	out, code, err := m.Run(ctx, s, []string{"sh", "-c", "echo $TPL"})
	if err != nil || code != 0 || strings.TrimSpace(out) != "small-env" {
		t.Fatalf("run: %q %d %v", out, code, err)
	}
	if again, err := m.Get(ctx, in.Name); err != nil || again.ID != in.ID || again.Labels["team"] != "red" {
		t.Fatalf("after a command: %+v %v (recreated?)", again, err)
	}
	f, err := ParseListFilter([]string{"label=team=red", "template=small"})
	if err != nil {
		t.Fatal(err)
	}
	if list, err := m.ListFiltered(ctx, f); err != nil || len(list) != 1 || list[0].ID != in.ID {
		t.Fatalf("list label=team=red template=small: %+v %v", list, err)
	}

	// The pool refills with another sandbox of the template.
	waitPool(t, m)
	if next := readyIDs(t, m); len(next) != 1 || next[0] == in.ID {
		t.Fatalf("after the take the pool holds %v", next)
	}
	// A template without a pool is made new.
	other, err := m.Create(ctx, Scope{AgentID: "tpl-plain"}, CreateOptions{Template: "plain"})
	if err != nil || other.Pool != "" {
		t.Fatalf("create from a template without a pool: %+v %v", other, err)
	}
}
