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
// reserves its space when the command starts, so all 8 lines are kept; and
// a command whose log cannot reserve its space does not start, with an
// error saying so.
func TestFaultFullStateDirKeepsOutput(t *testing.T) {
	state := smallTmpfs(t, 3<<20)
	e, _ := startServerOpts(t, ServerOptions{Dirs: []string{state}})
	c := newTestClient(t, e)
	gate := filepath.Join(t.TempDir(), "go")
	// Eight 64 KiB lines, written once the filesystem is full.
	p := shell(t, c, `while [ ! -e `+gate+` ]; do sleep 0.02; done; i=1; while [ $i -le 8 ]; do printf 'line%d %065536d\n' $i 0; i=$((i+1)); done`, nil)
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

	// Now the filesystem is full: a new command cannot reserve its log.
	marker := filepath.Join(t.TempDir(), "RAN")
	_, err = c.Open(ctxT(t), OpenSpec{Argv: []string{"sh", "-c", "touch " + marker}, Env: hostEnv()})
	if err == nil || !strings.Contains(err.Error(), "reserve") {
		t.Fatalf("open on a full state dir: %v, want an error saying the log cannot reserve its space", err)
	}
	if _, serr := os.Stat(marker); !errors.Is(serr, os.ErrNotExist) {
		t.Fatalf("the refused command ran")
	}
	t.Logf("refused: %v", err)
}
