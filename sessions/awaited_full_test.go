package sessions

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestFaultAwaitedStoreOnFullDisk replays issue 32's rule that every store
// has its space reserved or reports its loss, for the record of running
// sessions a restarted daemon shows while their host comes back
// (awaited.json): on a state filesystem (a real tmpfs) filled to the last
// byte, the records of new background sessions are still written, in the
// space reserved for them, and a restarted store reads them back; the
// write says that the filesystem is full.
func TestFaultAwaitedStoreOnFullDisk(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=1m,mode=0700"); err != nil {
		t.Skipf("cannot mount a tmpfs: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
	path := filepath.Join(dir, "awaited.json")
	a := openAwaited(path)
	if err := a.add(awaitedRecord{ID: "before", Command: "sleep 1", StartedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	// Fill the filesystem.
	f, err := os.Create(filepath.Join(dir, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := f.Write(make([]byte, 4096)); err != nil {
			break
		}
	}
	_ = f.Close()
	if err := os.WriteFile(filepath.Join(dir, "probe"), []byte("x"), 0o600); err == nil {
		t.Fatal("the filesystem is not full")
	}
	var ids []string
	for i := range 20 {
		id := fmt.Sprintf("full-%02d", i)
		err := a.add(awaitedRecord{ID: id, Command: "make -j8 all", Cwd: "/workspace/project", StartedAt: time.Now()})
		if err != nil && !errors.Is(err, errStateFull) {
			t.Fatalf("record %d on a full state filesystem: %v", i, err)
		}
		if i == 0 && !errors.Is(err, errStateFull) {
			t.Fatalf("the first write on a full filesystem does not say so: %v", err)
		}
		ids = append(ids, id)
	}
	back := openAwaited(path)
	got := map[string]bool{}
	for _, r := range back.list() {
		got[r.ID] = true
	}
	for _, id := range append(ids, "before") {
		if !got[id] {
			t.Fatalf("record %s is lost after a restart on a full filesystem (have %v)", id, got)
		}
	}
	// Room again: the next write takes its reserve back.
	if err := os.Remove(filepath.Join(dir, "filler")); err != nil {
		t.Fatal(err)
	}
	if err := back.remove("before"); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(path + ".reserve"); err != nil || st.Size() < awaitedReserveBytes {
		t.Fatalf("the reserve is not back once there is room: %v", err)
	}
}
