package sandbox

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// onLoopBtrfs puts a Manager's state directory and workspace root on a
// btrfs loop filesystem of its own (loopFS), and checks snapshots there
// are subvolumes.
func onLoopBtrfs(t *testing.T, mutate func(*Options)) func(*Options) {
	return func(o *Options) {
		mnt := loopFS(t, "btrfs")
		o.StateDir = filepath.Join(mnt, "state")
		o.Config.WorkspaceRoot = filepath.Join(mnt, "ws")
		if mutate != nil {
			mutate(o)
		}
	}
}

func btrfsManager(t *testing.T, mutate func(*Options)) *Manager {
	t.Helper()
	m := newManagerOpts(t, onLoopBtrfs(t, mutate))
	if got := m.SnapshotMethod(); got != SnapshotSubvolume {
		t.Fatalf("snapshot method on btrfs: %s, want %s", got, SnapshotSubvolume)
	}
	ex, err := m.Explain(objectCtx(t), Scope{AgentID: "explain"})
	if err != nil || !strings.HasPrefix(ex.Snapshots, SnapshotSubvolume+": ") {
		t.Fatalf("explain on btrfs: %q %v", ex.Snapshots, err)
	}
	return m
}

// TestSnapshotBtrfsRollbackFork is TestSnapshotRollbackFork on btrfs:
// workspaces are subvolumes, snapshots read-only snapshots of them, and
// rollbacks and forks writable snapshots of those.
func TestSnapshotBtrfsRollbackFork(t *testing.T) {
	testSnapshotRollbackFork(t, btrfsManager(t, nil))
}

// TestSnapshotBtrfsNeverTorn is TestSnapshotNeverTorn on btrfs.
func TestSnapshotBtrfsNeverTorn(t *testing.T) {
	testSnapshotNeverTorn(t, btrfsManager(t, nil))
}

// TestSnapshotBtrfsForkFromPool is TestSnapshotForkFromPool on btrfs: the
// fork's subvolume is mounted into the running pooled container in place
// of its empty workspace, and is what the container binds when it
// restarts.
func TestSnapshotBtrfsForkFromPool(t *testing.T) {
	testSnapshotForkFromPool(t, btrfsManager(t, func(o *Options) { o.Config.Pool.Size = 1 }))
}

// TestSnapshotBtrfsLimits is TestSnapshotLimits on btrfs: a subvolume
// snapshot over maxBytes is destroyed, nothing left.
func TestSnapshotBtrfsLimits(t *testing.T) {
	testSnapshotLimits(t, btrfsManager(t, func(o *Options) { snapshotLimits(&o.Config) }))
}

// TestSnapshotBtrfsNestedSubvolume: a subvolume inside the workspace (a
// sandbox can make one) is not in a snapshot of the workspace's
// subvolume; its files must not go missing: the snapshot clones them one
// by one instead.
func TestSnapshotBtrfsNestedSubvolume(t *testing.T) {
	m := btrfsManager(t, nil)
	ctx := objectCtx(t)
	s := Scope{AgentID: "snap-nest"}
	in, err := m.Create(ctx, s, CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ws := m.Workspace(in)
	if !isSubvolume(ws) {
		t.Fatalf("the workspace %s is no subvolume", ws)
	}
	inner := filepath.Join(ws, "inner")
	if err := createSubvolume(inner); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(inner, "f"), []byte("nested"), 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, m, s, "echo top > /workspace/top")
	snap, err := m.Snapshot(ctx, s, "n1")
	if err != nil {
		t.Fatal(err)
	}
	if snap.Method != SnapshotSubvolume || snap.Files != 2 {
		t.Fatalf("snapshot: %+v, want method %s and 2 files", snap, SnapshotSubvolume)
	}
	f := Scope{AgentID: "snap-nest-f"}
	if _, err := m.Fork(ctx, s, "n1", f); err != nil {
		t.Fatal(err)
	}
	if out, _ := run(t, m, f, "cat /workspace/top /workspace/inner/f"); out != "top\nnested" {
		t.Fatalf("the fork sees %q", out)
	}
	if _, err := m.RemoveSnapshot(s, "n1"); err != nil {
		t.Fatal(err)
	}
	if ents, err := os.ReadDir(m.first().snapshotScopeDir(snap.ScopeKey)); err != nil || len(ents) != 0 {
		t.Fatalf("left after the removal: %v %v", ents, err)
	}
	noSnapshotTemps(t, m)
	if out, _ := run(t, m, s, "ls /workspace"); !strings.Contains(out, "inner") {
		t.Fatalf("origin: %q", out)
	}
}

// roSubvolume does what a sandbox's user can do in its workspace on
// btrfs, with no capability (setpriv as the workspace's owner, all
// capabilities dropped): make a subvolume, put a file in it and make it
// read-only (BTRFS_IOC_SUBVOL_SETFLAGS, which Docker's default seccomp
// profile allows). os.RemoveAll can no longer empty it.
// snapshottedWorkspace gives scope s a sandbox with /workspace/a = "one",
// snapshots it as r1, and returns its workspace on the host.
func snapshottedWorkspace(t *testing.T, m *Manager, s Scope) string {
	t.Helper()
	ctx := objectCtx(t)
	run(t, m, s, "echo one > /workspace/a")
	if _, err := m.Snapshot(ctx, s, "r1"); err != nil {
		t.Fatal(err)
	}
	in, err := m.first().sandboxOf(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	return m.Workspace(in)
}

func roSubvolume(t *testing.T, ws, name string) {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(ws, &st); err != nil {
		t.Fatal(err)
	}
	// In the workspace already (its parents are not the user's to
	// cross), as the sandbox is.
	script := fmt.Sprintf("set -e; mkdir -p \"$(dirname %[1]s)\"; btrfs -q subvolume create %[1]s; echo trap > %[1]s/f; btrfs property set -t subvol %[1]s ro true", name)
	cmd := exec.Command("setpriv", "--reuid", fmt.Sprint(st.Uid), "--regid", fmt.Sprint(st.Gid), "--clear-groups", "--inh-caps=-all", "--bounding-set=-all", "sh", "-c", script)
	cmd.Dir = ws
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("as uid %d: %s: %v %s", st.Uid, script, err, out)
	}
	if err := os.Remove(filepath.Join(ws, name, "f")); !errors.Is(err, unix.EROFS) {
		t.Fatalf("remove in the read-only subvolume: %v, want EROFS", err)
	}
}

// TestSecurityBtrfsReadOnlySubvolumeInWorkspace: a read-only subvolume a
// sandbox's user made in its workspace neither fails a rollback (which
// would leave the scope with no container and the old workspace aside)
// nor keeps `rm --workspace` from removing the workspace.
func TestSecurityBtrfsReadOnlySubvolumeInWorkspace(t *testing.T) {
	if _, err := exec.LookPath("btrfs"); err != nil {
		t.Skip("no btrfs (btrfs-progs) to replay a sandbox's ioctls")
	}
	m := btrfsManager(t, nil)
	ctx := objectCtx(t)
	s := Scope{AgentID: "snap-rosub"}
	ws := snapshottedWorkspace(t, m, s)
	roSubvolume(t, ws, "trap")
	roSubvolume(t, ws, "d/e/deep")
	if _, err := m.Rollback(ctx, s, "r1"); err != nil {
		t.Fatalf("rollback: %v", err)
	}
	if out, code := run(t, m, s, "ls -A /workspace; cat /workspace/a"); code != 0 || out != "a\none\n" {
		t.Fatalf("after the rollback: %q %d", out, code)
	}
	ents, err := os.ReadDir(filepath.Dir(ws))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".") {
			t.Errorf("left beside the workspace: %s", e.Name())
		}
	}
	in, err := m.first().sandboxOf(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	roSubvolume(t, ws, "trap")
	if _, err := m.Delete(ctx, in.ID, true); err != nil {
		t.Fatalf("rm --workspace: %v", err)
	}
	if _, err := os.Lstat(ws); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the workspace %s is left: %v", ws, err)
	}
}

// TestSecurityBtrfsForkFromPoolPrivateMount: the workspace a fork mounts
// into a pooled container is private, as Docker's own binds are, even
// when the host's filesystem is a shared mount: the sandbox's /workspace
// joins no host peer group, and what the host mounts under the workspace
// does not appear in the sandbox.
func TestSecurityBtrfsForkFromPoolPrivateMount(t *testing.T) {
	m := btrfsManager(t, func(o *Options) { o.Config.Pool.Size = 1 })
	mnt := filepath.Dir(m.WorkspaceRoot())
	if out, err := exec.Command("mount", "--make-shared", mnt).CombinedOutput(); err != nil {
		t.Fatalf("mount --make-shared %s: %v %s", mnt, err, out)
	}
	ctx := objectCtx(t)
	s := Scope{AgentID: "snap-prop-a"}
	waitPool(t, m)
	run(t, m, s, "mkdir /workspace/sub")
	if _, err := m.Snapshot(ctx, s, "p1"); err != nil {
		t.Fatal(err)
	}
	waitPool(t, m)
	f := Scope{AgentID: "snap-prop-f"}
	in, err := m.Fork(ctx, s, "p1", f)
	if err != nil {
		t.Fatal(err)
	}
	if in.Pool != PoolTaken {
		t.Fatalf("fork %+v, want a pooled sandbox", in)
	}
	pid, err := m.first().localPid(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	info, err := os.ReadFile(fmt.Sprintf("/proc/%d/mountinfo", pid))
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, l := range strings.Split(string(info), "\n") {
		if fs := strings.Fields(l); len(fs) > 6 && fs[4] == "/workspace" {
			found = true
			if strings.Contains(l, " shared:") {
				t.Errorf("the fork's /workspace is in a host peer group: %s", l)
			}
		}
	}
	if !found {
		t.Fatalf("no /workspace in the fork's mountinfo:\n%s", info)
	}
	sub := filepath.Join(m.Workspace(in), "sub")
	if out, err := exec.Command("mount", "-t", "tmpfs", "hostonly", sub).CombinedOutput(); err != nil {
		t.Fatalf("mount a tmpfs at %s: %v %s", sub, err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", sub).Run() })
	// Propagation is done when mount(2) returns: no wait is needed.
	if out, code := run(t, m, f, "grep -c '^hostonly ' /proc/mounts"); out != "0\n" {
		t.Errorf("a host mount under the workspace shows in the fork: %q %d", out, code)
	}
}

// TestSnapshotBtrfsSweepsStaged: what a daemon that crashed in a fork,
// rollback or snapshot leaves (a fork's or rollback's staged workspace,
// an old workspace set aside, a snapshot's temporary or removed
// directory, read-only subvolumes in them) is removed when a Manager
// starts on the state directory; nothing else is.
func TestSnapshotBtrfsSweepsStaged(t *testing.T) {
	m := btrfsManager(t, nil)
	d := m.first()
	sandboxes := filepath.Join(d.stateDir, "sandboxes", "sbx-x")
	if err := os.MkdirAll(d.snapshotsRoot(), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(sandboxes, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(d.wsRoot, 0o700); err != nil {
		t.Fatal(err)
	}
	left := []string{
		filepath.Join(d.wsRoot, ".agent-x.fork-0123456789ab"),
		filepath.Join(d.wsRoot, ".agent-x.restore-0123456789ab"),
		filepath.Join(d.wsRoot, ".agent-x.old-0123456789ab"),
		filepath.Join(sandboxes, ".workspace.old-0123456789ab"),
		filepath.Join(d.snapshotsRoot(), ".tmp-12345"),
		filepath.Join(d.snapshotsRoot(), ".rm-0123456789ab"),
	}
	kept := []string{
		filepath.Join(d.wsRoot, "agent-x"),
		filepath.Join(d.wsRoot, ".agent-x.old-not-hex"),
		filepath.Join(sandboxes, "workspace"),
		filepath.Join(d.snapshotsRoot(), "agent-x"),
	}
	for i, p := range append(append([]string{}, left...), kept...) {
		// Subvolumes, one in two, each with a read-only one inside (as
		// root: a model of what a sandbox's user can make).
		if i%2 == 0 {
			if err := createSubvolume(p); err != nil {
				t.Fatal(err)
			}
		} else if err := os.Mkdir(p, 0o700); err != nil {
			t.Fatal(err)
		}
		inner := filepath.Join(p, "in")
		if err := createSubvolume(inner); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(inner, "f"), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := setSubvolumeReadOnly(inner); err != nil {
			t.Fatal(err)
		}
	}
	sibling(t, m, func(*Config) {}, nil)
	for _, p := range left {
		if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("left after a restart: %s (%v)", p, err)
		}
	}
	for _, p := range kept {
		if _, err := os.Stat(filepath.Join(p, "in", "f")); err != nil {
			t.Errorf("removed at a restart: %s (%v)", p, err)
		}
	}
}

// TestSnapshotBtrfsRollbackOldWorkspaceLeft: a rollback whose old
// workspace cannot be removed (injected: a subvolume in an immutable
// directory, which root cannot destroy either) still ends with its container running the
// snapshot's workspace; the old one is logged, and removed by a later
// start once it can be.
func TestSnapshotBtrfsRollbackOldWorkspaceLeft(t *testing.T) {
	if _, err := exec.LookPath("chattr"); err != nil {
		t.Skip("no chattr (e2fsprogs) to make a file immutable")
	}
	var mu sync.Mutex
	var logs []string
	m := btrfsManager(t, func(o *Options) {
		o.Logf = func(f string, a ...any) {
			mu.Lock()
			defer mu.Unlock()
			logs = append(logs, fmt.Sprintf(f, a...))
		}
	})
	ctx := objectCtx(t)
	s := Scope{AgentID: "snap-oldleft"}
	ws := snapshottedWorkspace(t, m, s)
	// A subvolume in an immutable directory: neither it nor so the
	// workspace's subvolume can be destroyed.
	stuck := filepath.Join(ws, "stuck")
	if err := os.Mkdir(stuck, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := createSubvolume(filepath.Join(stuck, "inner")); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("chattr", "+i", stuck).CombinedOutput(); err != nil {
		t.Fatalf("chattr +i: %v %s", err, out)
	}
	var olds []string
	t.Cleanup(func() {
		for _, o := range olds {
			_ = exec.Command("chattr", "-i", filepath.Join(o, "stuck")).Run()
		}
	})
	if _, err := m.Rollback(ctx, s, "r1"); err != nil {
		t.Fatalf("rollback: %v", err)
	}
	olds, _ = filepath.Glob(filepath.Join(filepath.Dir(ws), "."+filepath.Base(ws)+".old-*"))
	if len(olds) != 1 {
		t.Fatalf("old workspaces left: %v, want the one that cannot be removed", olds)
	}
	if out, code := run(t, m, s, "ls -A /workspace"); code != 0 || out != "a\n" {
		t.Fatalf("after the rollback: %q %d", out, code)
	}
	mu.Lock()
	logged := strings.Join(logs, "\n")
	mu.Unlock()
	if !strings.Contains(logged, olds[0]+" is left") {
		t.Errorf("the leftover is not logged:\n%s", logged)
	}
	if out, err := exec.Command("chattr", "-i", filepath.Join(olds[0], "stuck")).CombinedOutput(); err != nil {
		t.Fatalf("chattr -i: %v %s", err, out)
	}
	sibling(t, m, func(*Config) {}, nil)
	if _, err := os.Lstat(olds[0]); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the old workspace is left after a restart: %v", err)
	}
}
