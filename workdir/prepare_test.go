package workdir

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestNumericUser(t *testing.T) {
	for _, tc := range []struct {
		in       string
		uid, gid int
		ok       bool
	}{
		{"1000", 1000, -1, true},
		{"1000:1001", 1000, 1001, true},
		{"0", 0, -1, true},
		{"sandbox", 0, 0, false},
		{"1000:staff", 0, 0, false},
		{"-1", 0, 0, false},
		{"", 0, 0, false},
	} {
		uid, gid, ok := NumericUser(tc.in)
		if ok != tc.ok || (ok && (uid != tc.uid || gid != tc.gid)) {
			t.Errorf("NumericUser(%q) = %d %d %v", tc.in, uid, gid, ok)
		}
	}
}

// TestPrepareWorkspace: the directory is created and, under a root
// process, handed to the sandbox user; a symlink in its place is left alone.
func TestPrepareWorkspace(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "ws")
	if err := PrepareWorkspace(dir, "4242:4343"); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(dir)
	if err != nil || !fi.IsDir() {
		t.Fatalf("not created: %v", err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	wantUID, wantGID := uint32(os.Geteuid()), uint32(os.Getegid())
	if os.Geteuid() == 0 {
		wantUID, wantGID = 4242, 4343
	}
	if st.Uid != wantUID || st.Gid != wantGID {
		t.Errorf("owner %d:%d, want %d:%d", st.Uid, st.Gid, wantUID, wantGID)
	}
	target := t.TempDir()
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if err := PrepareWorkspace(link, "4242:4343"); err != nil {
		t.Fatal(err)
	}
	tfi, _ := os.Stat(target)
	if tst := tfi.Sys().(*syscall.Stat_t); tst.Uid == 4242 {
		t.Errorf("the symlink's target was handed over")
	}
}
