package supervisor

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// smallTmpfs mounts a tmpfs of size bytes for the test (root only).
func smallTmpfs(t *testing.T, size int) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d,mode=0700", size)); err != nil {
		t.Skipf("cannot mount a tmpfs: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
	return dir
}

// fill writes a file in dir until the filesystem has no room left.
func fill(t *testing.T, dir string) {
	t.Helper()
	f, err := os.Create(filepath.Join(dir, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 4096)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, unix.ENOSPC) {
				t.Fatalf("fill: %v", err)
			}
			return
		}
	}
}

// TestFaultFullStateDirKeepsOutput replays issue 32 item 6: with the
// sandbox's /run full, a session's kept output (what a restarted daemon
// reads back) held 3 of 8 lines and said nothing of the rest. The log
// reserves its space when the command starts, so all 8 lines are kept; so
// does the log of a command that takes the spare log reserved before the
// filesystem filled up; and a command started once the filesystem is full
// (no spare left, no room for one) runs, and its log reports what it could
// not keep.
func TestFaultFullStateDirKeepsOutput(t *testing.T) {
	state := smallTmpfs(t, 3<<20)
	e, s := startServerOpts(t, ServerOptions{Dirs: []string{state}})
	c := newTestClient(t, e)
	gate := filepath.Join(t.TempDir(), "go")
	// Eight 64 KiB lines, written once the filesystem is full.
	p := shell(t, c, `while [ ! -e `+gate+` ]; do sleep 0.02; done; i=1; while [ $i -le 8 ]; do printf 'line%d %065536d\n' $i 0; i=$((i+1)); done`, nil)
	awaitSpareLog(t, s) // made after p started
	fill(t, state)
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	out, _, code, _ := collect(t, p)
	if code != 0 || strings.Count(out, "\n") != 8 {
		t.Fatalf("live output: exit %d, %d lines", code, strings.Count(out, "\n"))
	}
	// What a restarted daemon gets back.
	kept, so, se, err := c.Read(ctxT(t), p.ID())
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	for i := 1; i <= 8; i++ {
		if !strings.Contains(string(kept), fmt.Sprintf("line%d ", i)) {
			t.Errorf("line %d not kept (kept %d of %d bytes)", i, len(kept), so+se)
		}
	}
	if int64(len(kept)) != so+se {
		t.Errorf("kept %d bytes, covering %d: the difference is not reported", len(kept), so+se)
	}

	// The next command takes the spare, reserved before the filesystem
	// filled up: all of its output is kept.
	ps := shell(t, c, `printf 'spare%065536d\n' 0`, nil)
	outs, _, codes, _ := collect(t, ps)
	kepts, sos, ses, err := c.Read(ctxT(t), ps.ID())
	if err != nil || codes != 0 || len(outs) != 5+65536+1 || string(kepts) != outs || sos+ses != int64(len(outs)) {
		t.Fatalf("the spare's command on a full state dir: exit %d, %d bytes printed, %d kept of %d covered (%v)", codes, len(outs), len(kepts), sos+ses, err)
	}

	// Now the filesystem is full and no spare is left: a new command
	// still runs (its log could not reserve its space), its live output
	// arrives whole, and what its log could not keep is reported, never
	// passed off as all there was.
	p2 := shell(t, c, `printf 'late%065536d\n' 0`, nil)
	out2, _, code2, _ := collect(t, p2)
	if code2 != 0 || !strings.HasPrefix(out2, "late") || len(out2) != 4+65536+1 {
		t.Fatalf("a command on a full state dir: exit %d, %d bytes of live output", code2, len(out2))
	}
	kept2, so2, se2, err := c.Read(ctxT(t), p2.ID())
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	if so2+se2 != int64(len(out2)) || int64(len(kept2)) >= so2+se2 {
		t.Fatalf("full state dir: kept %d of %d bytes covered (%d printed): the loss is not reported", len(kept2), so2+se2, len(out2))
	}
	t.Logf("full state dir: kept %d of %d bytes, the rest reported as dropped", len(kept2), so2+se2)
}

// TestStateDirInMemory: a server whose state directory is a tmpfs writes
// its records without fsync (nothing survives a crash of the machine
// there), one on a disk with them; both keep the records a client reads.
func TestStateDirInMemory(t *testing.T) {
	mem := smallTmpfs(t, 8<<20)
	disk := t.TempDir()
	if inMemory(disk) {
		t.Skipf("%s is itself in memory", disk)
	}
	for _, tc := range []struct {
		name, dir string
		want      bool
	}{{"tmpfs", mem, true}, {"disk", disk, false}} {
		// One server at a time: each reaps any child of the process.
		t.Run(tc.name, func(t *testing.T) {
			e, s := startServerOpts(t, ServerOptions{Dirs: []string{tc.dir}})
			if s.dirInMemory != tc.want {
				t.Errorf("dirInMemory %v, want %v", s.dirInMemory, tc.want)
			}
			c := newTestClient(t, e)
			if out, _, code, _ := collect(t, shell(t, c, `echo kept`, nil)); code != 0 || out != "kept\n" {
				t.Fatalf("%q %d", out, code)
			}
			metas, _ := filepath.Glob(filepath.Join(tc.dir, "*", "meta.json"))
			if len(metas) != 1 {
				t.Fatalf("records %v", metas)
			}
			b, err := os.ReadFile(metas[0])
			if err != nil || !strings.Contains(string(b), `"exit"`) {
				t.Errorf("final record %s %v, want the exit in it", b, err)
			}
		})
	}
}
