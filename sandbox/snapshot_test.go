package sandbox

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
)

// filesDigest lists every file of the workspace and /tmp (the supervisor's
// state left out) with its sha256, and every symlink with its target.
const filesDigest = `cd / && find workspace tmp var/tmp -path tmp/.sandboxctl -prune -o -type f -print | sort | xargs -r sha256sum; find workspace tmp var/tmp -type l | sort | while read -r p; do echo "$p -> $(readlink "$p")"; done; find workspace tmp var/tmp -path tmp/.sandboxctl -prune -o -type d -print | sort; find workspace tmp var/tmp -path tmp/.sandboxctl -prune -o -print | sort | xargs stat -c "%a %n"`

func digest(t *testing.T, m *Manager, s Scope) string {
	t.Helper()
	out, code := run(t, m, s, filesDigest)
	if code != 0 {
		t.Fatalf("digest: exit %d: %s", code, out)
	}
	return out
}

// noSnapshotTemps fails when a temporary snapshot directory is left.
func noSnapshotTemps(t *testing.T, m *Manager) {
	t.Helper()
	ents, _ := os.ReadDir(m.first().snapshotsRoot())
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".") {
			t.Errorf("left behind in %s: %s", m.first().snapshotsRoot(), e.Name())
		}
	}
}

// TestSnapshotRollbackFork writes files in the workspace and the tmpfs
// mounts, snapshots them, changes and deletes them, rolls back and checks
// every byte; then forks twice from the snapshot and once from the live
// sandbox and checks that the three diverge independently.
func TestSnapshotRollbackFork(t *testing.T) {
	testSnapshotRollbackFork(t, newTestManager(t, nil))
}

func testSnapshotRollbackFork(t *testing.T, m *Manager) {
	ctx := objectCtx(t)
	s := Scope{AgentID: "snap-a"}
	if _, err := m.Create(ctx, s, CreateOptions{Labels: map[string]string{"team": "red"}}); err != nil {
		t.Fatal(err)
	}
	_, code := run(t, m, s, `set -e
head -c 300000 /dev/urandom > /workspace/big.bin
mkdir -p /workspace/d/e && echo keep > /workspace/d/e/k.txt && chmod 640 /workspace/d/e/k.txt
ln -s d/e/k.txt /workspace/link
head -c 5000 /dev/urandom > /tmp/t.bin
mkdir /tmp/td && echo tmp > /tmp/td/x
echo var > /var/tmp/v.txt`)
	if code != 0 {
		t.Fatal("setup failed")
	}
	want := digest(t, m, s)
	if !strings.Contains(want, "tmp/t.bin") || !strings.Contains(want, "var/tmp/v.txt") || !strings.Contains(want, "workspace/link -> d/e/k.txt") {
		t.Fatalf("digest misses files:\n%s", want)
	}

	snap, err := m.Snapshot(ctx, s, "s1")
	if err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	if snap.Bytes < 305000 || snap.Files < 5 || snap.Method != m.SnapshotMethod() || snap.Origin == "" || len(snap.Tmpfs) != 3 || snap.Labels["team"] != "red" {
		t.Fatalf("snapshot: %+v (method here %s)", snap, m.SnapshotMethod())
	}
	if in, err := m.first().sandboxOf(ctx, s); err != nil || in.State != "running" {
		t.Fatalf("after the snapshot the sandbox is %q (%v), want running", in.State, err)
	}
	if _, err := m.Snapshot(ctx, s, "s1"); !cerrdefs.IsConflict(err) {
		t.Fatalf("second snapshot s1: %v, want conflict", err)
	}
	if _, err := m.Snapshot(ctx, s, "../x"); !cerrdefs.IsInvalidArgument(err) {
		t.Fatalf("bad name: %v", err)
	}

	run(t, m, s, `rm -f /workspace/big.bin /tmp/t.bin; echo changed > /workspace/d/e/k.txt; echo new > /workspace/new; echo new > /tmp/new; rm -rf /var/tmp/v.txt`)
	if digest(t, m, s) == want {
		t.Fatal("the changes did not change the digest")
	}
	in, err := m.Rollback(ctx, s, "s1")
	if err != nil {
		t.Fatalf("rollback: %v", err)
	}
	if in.Labels["team"] != "red" {
		t.Fatalf("rollback lost the labels: %+v", in)
	}
	if got := digest(t, m, s); got != want {
		t.Fatalf("after rollback:\n%s\nwant:\n%s", got, want)
	}

	// Two forks of s1, and the origin, go their own ways.
	f1, f2 := Scope{AgentID: "snap-f1"}, Scope{AgentID: "snap-f2"}
	for _, f := range []Scope{f1, f2} {
		if _, err := m.Fork(ctx, s, "s1", f); err != nil {
			t.Fatalf("fork %s: %v", f.AgentID, err)
		}
		if got := digest(t, m, f); got != want {
			t.Fatalf("fork %s:\n%s\nwant:\n%s", f.AgentID, got, want)
		}
		if _, _, ws, _ := m.Layout(f); m.SnapshotMethod() == SnapshotSubvolume && !isSubvolume(ws) {
			t.Fatalf("fork %s: its workspace %s is no subvolume", f.AgentID, ws)
		}
	}
	if _, err := m.Fork(ctx, s, "s1", f1); !cerrdefs.IsConflict(err) {
		t.Fatalf("fork onto a scope with a sandbox: %v, want conflict", err)
	}
	for _, sc := range []Scope{s, f1, f2} {
		run(t, m, sc, "echo "+sc.AgentID+" > /workspace/who; echo "+sc.AgentID+" > /tmp/who; echo "+sc.AgentID+" >> /workspace/d/e/k.txt")
	}
	for _, sc := range []Scope{s, f1, f2} {
		out, _ := run(t, m, sc, "cat /workspace/who /tmp/who; tail -n 1 /workspace/d/e/k.txt")
		if want := strings.Repeat(sc.AgentID+"\n", 3); out != want {
			t.Errorf("%s sees %q, want %q", sc.AgentID, out, want)
		}
	}

	// A fork of the live sandbox never sees the origin's later writes, and
	// the snapshot taken for it is gone.
	f3 := Scope{AgentID: "snap-f3"}
	if _, err := m.Fork(ctx, s, "", f3); err != nil {
		t.Fatalf("fork of the live sandbox: %v", err)
	}
	run(t, m, s, "echo late > /workspace/late; echo late > /tmp/late")
	if out, _ := run(t, m, f3, "cat /workspace/who /tmp/who; ls /workspace/late /tmp/late 2>&1 || true"); !strings.HasPrefix(out, "snap-a\nsnap-a\n") || strings.Count(out, "No such file") != 2 {
		t.Fatalf("live fork sees: %q", out)
	}
	if list, err := m.Snapshots(s); err != nil || len(list) != 1 || list[0].Name != "s1" {
		t.Fatalf("snapshots after a live fork: %+v %v", list, err)
	}
	if _, err := m.Fork(ctx, s, "s1", s); !cerrdefs.IsInvalidArgument(err) {
		t.Fatalf("fork onto its own scope: %v", err)
	}
	// A fork onto a scope whose workspace has files: refused, untouched.
	f4 := Scope{AgentID: "snap-f4"}
	_, _, ws4, _ := m.Layout(f4)
	if err := os.MkdirAll(ws4, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws4, "mine"), []byte("mine"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Fork(ctx, s, "s1", f4); !cerrdefs.IsConflict(err) || !strings.Contains(err.Error(), "workspace with files") {
		t.Fatalf("fork onto a workspace with files: %v", err)
	}
	if data, err := os.ReadFile(filepath.Join(ws4, "mine")); err != nil || string(data) != "mine" {
		t.Fatalf("the refused fork changed the workspace: %q %v", data, err)
	}
	if ents, _ := os.ReadDir(ws4); len(ents) != 1 {
		t.Fatalf("the refused fork left files: %v", ents)
	}

	// Remove and prune.
	if _, err := m.Snapshot(ctx, s, "s2"); err != nil {
		t.Fatal(err)
	}
	if gone, err := m.PruneSnapshots(s, 0, 1); err != nil || len(gone) != 1 || gone[0].Name != "s1" {
		t.Fatalf("prune keep 1: %+v %v", gone, err)
	}
	if _, err := m.RemoveSnapshot(s, "s2"); err != nil {
		t.Fatal(err)
	}
	if _, err := m.RemoveSnapshot(s, "s2"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("remove twice: %v", err)
	}
	if _, err := m.Rollback(ctx, s, "s2"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("rollback to a removed snapshot: %v", err)
	}
	noSnapshotTemps(t, m)
	for _, sc := range []Scope{f1, f2, f3} {
		_, name, _, _ := m.Layout(sc)
		if _, err := m.Delete(ctx, name, true); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSnapshotNeverTorn snapshots while a command overwrites a 1 MiB file
// in the workspace and in /tmp in place, one write of all 'a' then one of
// all 'b', and appends whole lines to a log: each copy holds one write
// whole (all 'a' or all 'b') and whole lines. Without the freeze the copy
// reads across the writes and mixes them.
func TestSnapshotNeverTorn(t *testing.T) {
	testSnapshotNeverTorn(t, newTestManager(t, nil))
}

func testSnapshotNeverTorn(t *testing.T, m *Manager) {
	ctx := objectCtx(t)
	s := Scope{AgentID: "snap-torn"}
	run(t, m, s, `head -c 1048576 /dev/zero | tr '\0' a > /tmp/A; head -c 1048576 /dev/zero | tr '\0' b > /tmp/B; cp /tmp/A /workspace/f; cp /tmp/A /tmp/f`)
	line := strings.Repeat("x", 4000)
	st := startCmd(t, m, s, `i=0; while :; do for x in A B; do
  dd if=/tmp/$x of=/workspace/f bs=1048576 count=1 conv=notrunc 2>/dev/null
  dd if=/tmp/$x of=/tmp/f bs=1048576 count=1 conv=notrunc 2>/dev/null
  printf '%08d `+line+`\n' $i >> /workspace/log; i=$((i+1))
done; done`, nil)
	defer func() { _ = st.Kill(ctx) }()
	deadline := time.Now().Add(time.Minute)
	for {
		out, _ := run(t, m, s, "wc -l < /workspace/log 2>/dev/null || echo 0")
		if n := strings.TrimSpace(out); n != "" && n != "0" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the writer wrote nothing")
		}
		time.Sleep(50 * time.Millisecond)
	}
	for i := range 8 {
		name := fmt.Sprintf("t%d", i)
		snap, err := m.Snapshot(ctx, s, name)
		if err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(m.first().snapshotScopeDir(snap.ScopeKey), name)
		for _, f := range []string{"workspace/f", "tmpfs/tmp/f"} {
			data, err := os.ReadFile(filepath.Join(dir, f))
			if err != nil {
				t.Fatal(err)
			}
			if len(data) != 1<<20 {
				t.Fatalf("snapshot %s %s: %d bytes, want 1 MiB", name, f, len(data))
			}
			if a := bytes.Count(data, []byte("a")); a != 0 && a != len(data) {
				t.Fatalf("snapshot %s %s is torn: %d bytes 'a', %d other", name, f, a, len(data)-a)
			}
		}
		data, err := os.ReadFile(filepath.Join(dir, "workspace/log"))
		if err != nil {
			t.Fatal(err)
		}
		for n, l := range strings.SplitAfter(string(data), "\n") {
			if l != "" && len(l) != 8+1+len(line)+1 {
				t.Fatalf("snapshot %s log: line %d is torn (%d bytes)", name, n, len(l))
			}
		}
		if _, err := m.RemoveSnapshot(s, name); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSnapshotLimits: over maxBytes or maxCount a snapshot is refused with
// a clear error, leaves nothing behind and the sandbox runs on.
func TestSnapshotLimits(t *testing.T) {
	testSnapshotLimits(t, newTestManager(t, snapshotLimits))
}

func snapshotLimits(c *Config) {
	c.Snapshots.MaxCount = 1
	c.Snapshots.MaxBytes = "1m"
}

func testSnapshotLimits(t *testing.T, m *Manager) {
	ctx := objectCtx(t)
	s := Scope{AgentID: "snap-lim"}
	run(t, m, s, "head -c 2000000 /dev/urandom > /workspace/big")
	_, err := m.Snapshot(ctx, s, "big")
	if !errors.Is(err, ErrSnapshotsFull) || !strings.Contains(err.Error(), "sandbox.snapshots.maxBytes") {
		t.Fatalf("over maxBytes: %v", err)
	}
	if list, _ := m.Snapshots(s); len(list) != 0 {
		t.Fatalf("a refused snapshot is listed: %+v", list)
	}
	noSnapshotTemps(t, m)
	if in, err := m.first().sandboxOf(ctx, s); err != nil || in.State != "running" {
		t.Fatalf("after a refused snapshot: %q %v", in.State, err)
	}
	run(t, m, s, "rm /workspace/big; echo small > /workspace/small")
	if _, err := m.Snapshot(ctx, s, "one"); err != nil {
		t.Fatal(err)
	}
	_, err = m.Snapshot(ctx, s, "two")
	if !errors.Is(err, ErrSnapshotsFull) || !strings.Contains(err.Error(), "sandbox.snapshots.maxCount") {
		t.Fatalf("over maxCount: %v", err)
	}
	noSnapshotTemps(t, m)
}

// TestSecuritySnapshotSymlinksStayInside plants symlinks in the workspace
// and /tmp that point at the host's files (absolute and through ..): the
// snapshot, read from the host, keeps them as links and never copies what
// they point at, and a fork restores them as links inside the new sandbox.
func TestSecuritySnapshotSymlinksStayInside(t *testing.T) {
	m := newTestManager(t, nil)
	ctx := objectCtx(t)
	s := Scope{AgentID: "snap-sec"}
	secret := filepath.Join(t.TempDir(), "host-secret")
	if err := os.WriteFile(secret, []byte("HOST-SECRET"), 0o600); err != nil {
		t.Fatal(err)
	}
	run(t, m, s, "ln -s "+secret+" /workspace/abs; ln -s ../../../../../../.."+secret+" /workspace/rel; ln -s "+secret+" /tmp/abs; ln -s / /tmp/root")
	snap, err := m.Snapshot(ctx, s, "sec")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(m.first().snapshotScopeDir(snap.ScopeKey), "sec")
	err = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			if strings.Contains(string(data), "HOST-SECRET") {
				t.Errorf("%s holds the host's file", p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range []string{"workspace/abs", "workspace/rel", "tmpfs/tmp/abs", "tmpfs/tmp/root"} {
		if fi, err := os.Lstat(filepath.Join(dir, l)); err != nil || fi.Mode()&os.ModeSymlink == 0 {
			t.Errorf("%s: not kept as a symlink (%v)", l, err)
		}
	}
	f := Scope{AgentID: "snap-sec-f"}
	if _, err := m.Fork(ctx, s, "sec", f); err != nil {
		t.Fatal(err)
	}
	out, _ := run(t, m, f, "for l in /workspace/abs /tmp/abs /tmp/root; do readlink $l; done; cat /workspace/abs /tmp/abs 2>&1 || true")
	if strings.Contains(out, "HOST-SECRET") || !strings.HasPrefix(out, secret+"\n"+secret+"\n/\n") {
		t.Fatalf("fork: %q", out)
	}
	_, name, _, _ := m.Layout(f)
	if _, err := m.Delete(ctx, name, true); err != nil {
		t.Fatal(err)
	}
}

// TestSnapshotAcrossRestart takes a snapshot with one Manager and rolls
// back and forks with another on the same state directory (a restarted
// daemon).
func TestSnapshotAcrossRestart(t *testing.T) {
	m := newTestManager(t, nil)
	ctx := objectCtx(t)
	s := Scope{AgentID: "snap-rs"}
	run(t, m, s, "echo before > /workspace/f; echo tmp > /tmp/f")
	if _, err := m.Snapshot(ctx, s, "r1"); err != nil {
		t.Fatal(err)
	}
	m2 := sibling(t, m, func(*Config) {}, nil)
	if list, err := m2.Snapshots(s); err != nil || len(list) != 1 || list[0].Name != "r1" {
		t.Fatalf("after a restart: %+v %v", list, err)
	}
	run(t, m2, s, "echo after > /workspace/f; rm /tmp/f")
	if _, err := m2.Rollback(ctx, s, "r1"); err != nil {
		t.Fatal(err)
	}
	if out, _ := run(t, m2, s, "cat /workspace/f /tmp/f"); out != "before\ntmp\n" {
		t.Fatalf("rollback after a restart: %q", out)
	}
	f := Scope{AgentID: "snap-rs-f"}
	if _, err := m2.Fork(ctx, s, "r1", f); err != nil {
		t.Fatal(err)
	}
	if out, _ := run(t, m2, f, "cat /workspace/f /tmp/f"); out != "before\ntmp\n" {
		t.Fatalf("fork after a restart: %q", out)
	}
	_, name, _, _ := m2.Layout(f)
	if _, err := m2.Delete(ctx, name, true); err != nil {
		t.Fatal(err)
	}
}

// TestSnapshotForkFromPool: with a warm pool, a fork takes a pooled
// sandbox (made before the fork was asked for) and clones the snapshot's
// workspace into the directory its container mounts: the fork sees every
// file byte for byte, owns them (it can change a mode-0600 file), and a
// daemon restart and a restart of its container keep its workspace; the
// origin never sees its writes.
func TestSnapshotForkFromPool(t *testing.T) {
	testSnapshotForkFromPool(t, newManagerOpts(t, func(o *Options) { o.Config.Pool.Size = 1 }))
}

func testSnapshotForkFromPool(t *testing.T, m *Manager) {
	ctx := objectCtx(t)
	s := Scope{AgentID: "snap-pool-a"}
	waitPool(t, m)
	// The origin takes the pool's sandbox; wait for the refill.
	if _, code := run(t, m, s, `set -e; head -c 200000 /dev/urandom > /workspace/r.bin; mkdir -p /workspace/d; echo own > /workspace/d/o.txt; chmod 600 /workspace/d/o.txt; echo tmp > /tmp/t`); code != 0 {
		t.Fatal("setup failed")
	}
	want := digest(t, m, s)
	if _, err := m.Snapshot(ctx, s, "p1"); err != nil {
		t.Fatal(err)
	}
	waitPool(t, m)
	ready := readyIDs(t, m)
	if len(ready) != 1 {
		t.Fatalf("pool: %v, want one ready", ready)
	}
	f := Scope{AgentID: "snap-pool-f"}
	in, err := m.Fork(ctx, s, "p1", f)
	if err != nil {
		t.Fatalf("fork: %v", err)
	}
	if in.ID != ready[0] || in.Pool != PoolTaken {
		t.Fatalf("fork %+v, want the pooled sandbox %s taken", in, ready[0])
	}
	if got := digest(t, m, f); got != want {
		t.Fatalf("fork from the pool:\n%s\nwant:\n%s", got, want)
	}
	// Its files, in the workspace and the tmpfs, are its command uid's.
	if out, code := run(t, m, f, `id -u; find /workspace /tmp -path /tmp/.sandboxctl -prune -o ! -user "$(id -u)" -print`); code != 0 || strings.Count(out, "\n") != 1 {
		t.Fatalf("files of the fork not its own: %q %d", out, code)
	}
	if out, code := run(t, m, f, "echo forked >> /workspace/d/o.txt && cat /workspace/d/o.txt && echo f > /workspace/r.bin"); code != 0 || out != "own\nforked\n" {
		t.Fatalf("the fork writes its files: %q %d", out, code)
	}
	if out, _ := run(t, m, s, "cat /workspace/d/o.txt; head -c 1 /workspace/r.bin | wc -c"); out != "own\n1\n" {
		t.Fatalf("the origin sees the fork's writes: %q", out)
	}
	m2 := sibling(t, m, func(*Config) {}, nil)
	if out, _ := run(t, m2, f, "cat /workspace/d/o.txt"); out != "own\nforked\n" {
		t.Fatalf("the pooled fork after a restart: %q", out)
	}
	// The Engine binds the workspace again when the container restarts:
	// the fork's, not the empty one the pooled container was made with.
	if out, err := exec.Command("docker", "restart", "-t", "1", in.ID).CombinedOutput(); err != nil {
		t.Fatalf("docker restart: %v %s", err, out)
	}
	if out, _ := run(t, m2, f, "cat /workspace/d/o.txt; find /workspace -type f | wc -l"); out != "own\nforked\n2\n" {
		t.Fatalf("the pooled fork after its container restarted: %q", out)
	}
}

// TestSecurityForkTmpfsSymlinkNotFollowed: a fork writes the snapshot's
// tmpfs contents from the host into its new container's tmpfs. A symlink
// the container holds already at a name the snapshot has (planted here by
// a setupCommand, pointing at a host directory as the daemon would see
// it) is never followed: the fork fails, nothing is written on the host,
// and no fork is left.
func TestSecurityForkTmpfsSymlinkNotFollowed(t *testing.T) {
	m := newTestManager(t, nil)
	ctx := objectCtx(t)
	s := Scope{AgentID: "snap-sec-a"}
	if _, code := run(t, m, s, "mkdir /tmp/d && echo x > /tmp/d/x"); code != 0 {
		t.Fatal("setup failed")
	}
	if _, err := m.Snapshot(ctx, s, "p1"); err != nil {
		t.Fatal(err)
	}
	host := t.TempDir()
	m2 := sibling(t, m, func(c *Config) { c.Docker.SetupCommand = "ln -s " + host + " /tmp/d" }, nil)
	f := Scope{AgentID: "snap-sec-f"}
	_, err := m2.Fork(ctx, s, "p1", f)
	if err == nil || !strings.Contains(err.Error(), "exists") {
		t.Fatalf("fork onto a planted symlink: %v, want an error", err)
	}
	if ents, _ := os.ReadDir(host); len(ents) != 0 {
		t.Fatalf("the fork wrote on the host: %v", ents)
	}
	if _, err := m2.first().sandboxOf(ctx, f); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a failed fork left its sandbox: %v", err)
	}
}

// TestSweepSparesStagingInUse: a process that starts on a state directory
// while another one forks, rolls back or snapshots there (a local CLI
// beside the daemon, each making its own Manager) must not sweep what that
// operation staged. It did: the console's rollback lost its staged
// workspace to the `sandbox ls` the test ran meanwhile, and the scope was
// left with no container.
func TestSweepSparesStagingInUse(t *testing.T) {
	m := newTestManager(t, nil)
	d := m.first()
	if err := os.MkdirAll(d.wsRoot, 0o700); err != nil {
		t.Fatal(err)
	}
	staged := filepath.Join(d.wsRoot, ".agent-x.restore-0123456789ab")
	if err := os.Mkdir(staged, 0o700); err != nil {
		t.Fatal(err)
	}
	release, err := d.staging()
	if err != nil {
		t.Fatal(err)
	}
	sibling(t, m, func(*Config) {}, nil)
	if _, err := os.Stat(staged); err != nil {
		t.Fatalf("a start swept %s while an operation held the staging lock: %v", staged, err)
	}
	release()
	sibling(t, m, func(*Config) {}, nil)
	if _, err := os.Lstat(staged); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a start after the operation ended left %s (%v)", staged, err)
	}
}
