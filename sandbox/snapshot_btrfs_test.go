package sandbox

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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
