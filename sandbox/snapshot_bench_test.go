package sandbox

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkSnapshotFork measures a snapshot and a fork up to its first
// command for a sandbox with a 200 MB workspace of 5,000 files and 50 MB
// in /tmp (the rootfs is read-only: its tmpfs is what a command changes),
// beside, in the same run, `cp -a` of the workspace and `docker commit` +
// `docker run` + a first `docker exec` of the same container. It runs
// twice, the state directory and the workspace root on a btrfs (method
// subvolume) and then on an XFS with reflink=1 (method reflink), each a
// loop filesystem of its own (loopFS: as root, with btrfs-progs and
// xfsprogs). A fork is measured making its container
// (fork-to-first-command) and taking a warm pool's
// (fork-to-first-command-pool, sandbox.pool.size 1: the pool is refilled
// between forks, outside the timing):
//
//	go test -run XXX -bench SnapshotFork -benchtime 3x -count 3 ./sandbox/
func BenchmarkSnapshotFork(b *testing.B) {
	requireDockerB(b)
	for _, kind := range []string{"btrfs", "xfs"} {
		b.Run(kind, func(b *testing.B) { benchSnapshotFork(b, loopFS(b, kind)) })
	}
}

func benchSnapshotFork(b *testing.B, dir string) {
	opts := func(pool int) func(*Options) {
		return func(o *Options) {
			o.StateDir = filepath.Join(dir, "state")
			o.Config.WorkspaceRoot = filepath.Join(dir, "ws")
			o.Config.Pool.Size = pool
			o.Logf = b.Logf
		}
	}
	m := benchManagerOpts(b, opts(0))
	ctx := context.Background()
	s := Scope{AgentID: "bench-snap"}
	in, err := m.Create(ctx, s, CreateOptions{})
	if err != nil {
		b.Fatal(err)
	}
	ws := m.Workspace(in)
	chunk := make([]byte, 40000) // 5,000 x 40 kB = 200 MB
	for i := range 5000 {
		_, _ = rand.Read(chunk)
		dir := filepath.Join(ws, fmt.Sprintf("d%02d", i%50))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%04d", i)), chunk, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	if out, code, err := m.Run(ctx, s, []string{"sh", "-c", "head -c 52428800 /dev/urandom > /tmp/r50"}); err != nil || code != 0 {
		b.Fatalf("fill /tmp: %s %d %v", out, code, err)
	}
	b.Logf("snapshot method: %s", m.SnapshotMethod())

	b.Run("snapshot", func(b *testing.B) {
		for i := range b.N {
			name := fmt.Sprintf("b%d", i)
			if _, err := m.Snapshot(ctx, s, name); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			if _, err := m.RemoveSnapshot(s, name); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
	})
	if _, err := m.Snapshot(ctx, s, "base"); err != nil {
		b.Fatal(err)
	}
	// Before the temporary directory goes: a read-only subvolume is not
	// removed file by file.
	b.Cleanup(func() { _, _ = m.RemoveSnapshot(s, "base") })
	b.Run("fork-to-first-command", func(b *testing.B) {
		for i := range b.N {
			f := Scope{AgentID: fmt.Sprintf("bench-fork-%d", i)}
			if _, err := m.Fork(ctx, s, "base", f); err != nil {
				b.Fatal(err)
			}
			if _, code, err := m.Run(ctx, f, []string{"true"}); err != nil || code != 0 {
				b.Fatalf("first command: %d %v", code, err)
			}
			b.StopTimer()
			_, name, _, _ := m.Layout(f)
			if _, err := m.Delete(ctx, name, true); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
	})
	// The same forks, each taking a warm pool's sandbox: a second Manager
	// on the same state directory, with a pool of one.
	mp := benchManagerOpts(b, opts(1))
	b.Run("fork-to-first-command-pool", func(b *testing.B) {
		for i := range b.N {
			b.StopTimer()
			wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
			err := mp.WaitPool(wctx)
			cancel()
			if err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			f := Scope{AgentID: fmt.Sprintf("bench-forkp-%d", i)}
			in, err := mp.Fork(ctx, s, "base", f)
			if err != nil {
				b.Fatal(err)
			}
			if _, code, err := mp.Run(ctx, f, []string{"true"}); err != nil || code != 0 {
				b.Fatalf("first command: %d %v", code, err)
			}
			b.StopTimer()
			if in.Pool != PoolTaken {
				b.Fatalf("the fork did not take the pool's sandbox: %+v", in)
			}
			if _, err := mp.Delete(ctx, in.Name, true); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
	})
	b.Run("baseline-cp-a-workspace", func(b *testing.B) {
		dst := filepath.Join(dir, "cp") // the same filesystem
		if err := os.MkdirAll(dst, 0o700); err != nil {
			b.Fatal(err)
		}
		for i := range b.N {
			to := filepath.Join(dst, fmt.Sprint(i))
			if out, err := exec.Command("cp", "-a", ws, to).CombinedOutput(); err != nil {
				b.Fatalf("cp -a: %v %s", err, out)
			}
			b.StopTimer()
			_ = os.RemoveAll(to)
			b.StartTimer()
		}
	})
	b.Run("baseline-docker-commit-run-exec", func(b *testing.B) {
		for i := range b.N {
			img := fmt.Sprintf("sandboxctl-bench-commit:%s-%d", randHex(3), i)
			name := "sbxb-commit-" + randHex(4)
			b.Cleanup(func() {
				_ = exec.Command("docker", "rm", "-f", name).Run()
				_ = exec.Command("docker", "rmi", img).Run()
			})
			cmds := [][]string{
				{"commit", in.ID, img},
				{"run", "-d", "--network", "none", "--name", name, "--entrypoint", "sleep", img, "3600"},
				{"exec", name, "true"},
			}
			for _, c := range cmds {
				if out, err := exec.Command("docker", c...).CombinedOutput(); err != nil {
					b.Fatalf("docker %v: %v %s", c, err, out)
				}
			}
		}
	})
}

func requireDockerB(b *testing.B) {
	b.Helper()
	if _, err := exec.LookPath("docker"); err != nil {
		b.Skip("no docker CLI")
	}
}
