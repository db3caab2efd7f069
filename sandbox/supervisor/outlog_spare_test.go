package supervisor

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// reservedInode is the inode of dir's output.N when its space is reserved
// (as many bytes allocated as the log reserves for a segment); 0 when it
// is not there or not reserved yet.
func reservedInode(t *testing.T, dir string, n int, want int64) uint64 {
	t.Helper()
	var st syscall.Stat_t
	err := syscall.Stat(filepath.Join(dir, segmentFile(n)), &st)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return 0
	case err != nil:
		t.Fatal(err)
	}
	if st.Blocks*512 < want {
		return 0
	}
	return st.Ino
}

// awaitSpareLog waits until s has its spare output log ready, and returns
// the inodes of its segments, which must be reserved.
func awaitSpareLog(t *testing.T, s *Server) [2]uint64 {
	t.Helper()
	spare := filepath.Join(s.dir, SpareLogName)
	want := s.logCap + s.logCap/16 // outlog.reservation
	deadline := time.Now().Add(10 * time.Second)
	for {
		s.mu.Lock()
		ready := s.spareLog != nil
		s.mu.Unlock()
		if ready {
			ino := [2]uint64{reservedInode(t, spare, 0, want), reservedInode(t, spare, 1, want)}
			if ino[0] == 0 || ino[1] == 0 {
				t.Fatalf("the spare output log %s is not reserved: inodes %v", spare, ino)
			}
			return ino
		}
		if time.Now().After(deadline) {
			t.Fatalf("no reserved spare output log in %s after 10 s", spare)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestSpareOutputLog: after a command starts, the server makes the next
// session's output log ahead of it, reserved; the next command's session
// takes it (its log files are the spare's), keeps its output in it, and
// a new spare follows. An id naming the spare is refused, and Shutdown
// leaves nothing of it.
func TestSpareOutputLog(t *testing.T) {
	state := smallTmpfs(t, 8<<20)
	e, s := startServerOpts(t, ServerOptions{Dirs: []string{state}})
	c := newTestClient(t, e)
	want := s.logCap + s.logCap/16 // outlog.reservation

	if _, err := os.Stat(filepath.Join(state, SpareLogName)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a spare output log before any command: %v", err)
	}
	if out, _, code, _ := collect(t, shell(t, c, `echo one`, nil)); code != 0 || out != "one\n" {
		t.Fatalf("first command: %q, exit %d", out, code)
	}
	spare := awaitSpareLog(t, s)

	p := shell(t, c, `echo two`, nil)
	if out, _, code, _ := collect(t, p); code != 0 || out != "two\n" {
		t.Fatalf("second command: %q, exit %d", out, code)
	}
	dir := filepath.Join(state, p.ID())
	for i := range spare {
		if got := reservedInode(t, dir, i, want); got != spare[i] {
			t.Errorf("session %s: output.%d is inode %d (reserved: %v), want the spare's %d", p.ID(), i, got, got != 0, spare[i])
		}
	}
	kept, so, se, err := c.Read(ctxT(t), p.ID())
	if err != nil || string(kept) != "two\n" || so != 4 || se != 0 {
		t.Fatalf("read: %q (stdout %d, stderr %d), %v", kept, so, se, err)
	}
	next := awaitSpareLog(t, s)
	if next == spare { // a tmpfs does not reuse the inode numbers of files still open
		t.Fatalf("the spare %v was not replaced after it was taken", spare)
	}

	// An id naming the spare is refused, and the spare stays whole.
	_, err = c.Open(ctxT(t), OpenSpec{ID: SpareLogName, Argv: []string{"true"}, Env: hostEnv()})
	if err == nil || !strings.Contains(err.Error(), "spare output log") {
		t.Fatalf("open with id %q: %v, want a refusal", SpareLogName, err)
	}
	if got := awaitSpareLog(t, s); got != next {
		t.Fatalf("the spare changed (%v, was %v) after a refused open", got, next)
	}

	s.Shutdown(time.Second)
	if _, err := os.Stat(filepath.Join(state, SpareLogName)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("after Shutdown: %v, want the spare output log gone", err)
	}
}

// TestRecycledOutputLog: a session forgotten while no spare log is ready
// gives its reserved log files to the spare, with what it wrote zeroed
// and its other files gone; the next command takes them and its kept
// output is its own, whole, with nothing of the forgotten one's.
func TestRecycledOutputLog(t *testing.T) {
	state := smallTmpfs(t, 8<<20)
	e, s := startServerOpts(t, ServerOptions{Dirs: []string{state}})
	c := newTestClient(t, e)
	want := s.logCap + s.logCap/16 // outlog.reservation

	secret := strings.Repeat("forgotten-", 2000) // 20000 bytes: several records
	p := shell(t, c, `printf '%s' `+secret, nil)
	if out, _, code, _ := collect(t, p); code != 0 || out != secret {
		t.Fatalf("first command: %d bytes, exit %d", len(out), code)
	}
	dir := filepath.Join(state, p.ID())
	ino := [2]uint64{reservedInode(t, dir, 0, want), reservedInode(t, dir, 1, want)}
	if ino[0] == 0 || ino[1] == 0 {
		t.Fatalf("the session's log is not reserved: inodes %v", ino)
	}
	// No spare ready, none being made: the forgotten log becomes it.
	awaitSpareLog(t, s)
	s.mu.Lock()
	sp := s.spareLog
	s.spareLog = nil
	s.mu.Unlock()
	dropLog(sp)

	s.mu.Lock()
	forgotten := s.sessions[p.ID()]
	s.mu.Unlock()
	if err := c.Forget(ctxT(t), p.ID()); err != nil {
		t.Fatal(err)
	}
	// A read that found the session before it was forgotten gets an
	// error, never the recycled files' zeros.
	if b, err := forgotten.output(); err == nil {
		t.Fatalf("the output of a forgotten session: %d bytes, no error", len(b))
	}
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the forgotten session's directory: %v, want it gone", err)
	}
	if _, _, _, err := c.Read(ctxT(t), p.ID()); err == nil {
		t.Fatal("read of a forgotten session succeeded")
	}
	if got := awaitSpareLog(t, s); got != ino {
		t.Fatalf("spare inodes %v, want the forgotten session's %v", got, ino)
	}
	spareDir := filepath.Join(state, SpareLogName)
	ents, err := os.ReadDir(spareDir)
	if err != nil || len(ents) != 2 {
		t.Fatalf("the recycled spare holds %v (%v), want output.0 and output.1 only", ents, err)
	}
	for i := range 2 {
		b, err := os.ReadFile(filepath.Join(spareDir, segmentFile(i)))
		if err != nil {
			t.Fatal(err)
		}
		if int64(len(b)) < want || strings.Trim(string(b), "\x00") != "" {
			t.Fatalf("recycled output.%d: %d bytes, %d of them not zero", i, len(b), len(strings.Trim(string(b), "\x00")))
		}
	}

	p2 := shell(t, c, `echo three`, nil)
	if out, _, code, _ := collect(t, p2); code != 0 || out != "three\n" {
		t.Fatalf("next command: %q, exit %d", out, code)
	}
	if got := reservedInode(t, filepath.Join(state, p2.ID()), 0, want); got != ino[0] {
		t.Fatalf("the next session's output.0 is inode %d, want the recycled %d", got, ino[0])
	}
	kept, so, se, err := c.Read(ctxT(t), p2.ID())
	if err != nil || string(kept) != "three\n" || so != 6 || se != 0 {
		t.Fatalf("read: %q (stdout %d, stderr %d), %v", kept, so, se, err)
	}
}

// TestForgottenIDWaitsForItsFiles: a session id is taken again only once
// Forget has removed (or recycled) the files of the session it named. An
// Open of that id while they are being removed is refused; before, it made
// its directory where the forgotten one's was, which the recycling then
// gave to the spare, and the next session shared the new one's log.
func TestForgottenIDWaitsForItsFiles(t *testing.T) {
	state := smallTmpfs(t, 8<<20)
	e, s := startServerOpts(t, ServerOptions{Dirs: []string{state}})
	c := newTestClient(t, e)
	withID := func(id string) func(*OpenSpec) { return func(o *OpenSpec) { o.ID = id } }

	if out, _, code, _ := collect(t, shell(t, c, `echo old`, withID("x"))); code != 0 || out != "old\n" {
		t.Fatalf("old x: %q %d", out, code)
	}
	awaitSpareLog(t, s) // then none ready, so that the forget recycles
	s.mu.Lock()
	old, sp := s.sessions["x"], s.spareLog
	s.spareLog = nil
	s.mu.Unlock()
	dropLog(sp)

	// Forget x, held between leaving s.sessions and its files' removal.
	old.filesMu.Lock()
	forgot := make(chan error, 1)
	go func() { forgot <- s.forget("x") }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s.mu.Lock()
		removing := s.removing["x"]
		s.mu.Unlock()
		if removing {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("forget did not start")
		}
		time.Sleep(time.Millisecond)
	}
	_, err := c.Open(ctxT(t), OpenSpec{ID: "x", Argv: []string{"true"}, Env: hostEnv()})
	old.filesMu.Unlock()
	if err == nil || !strings.Contains(err.Error(), "being removed") {
		t.Fatalf("open of x while the forgotten x's files are removed: %v, want a refusal", err)
	}
	if err := <-forgot; err != nil {
		t.Fatal(err)
	}

	// Once Forget answered, the id is free; the next session's log is the
	// recycled one, and each keeps its own output.
	if out, _, code, _ := collect(t, shell(t, c, `echo NEWX`, withID("x"))); code != 0 || out != "NEWX\n" {
		t.Fatalf("new x: %q %d", out, code)
	}
	if out, _, code, _ := collect(t, shell(t, c, `echo y`, withID("y"))); code != 0 || out != "y\n" {
		t.Fatalf("y: %q %d", out, code)
	}
	for id, want := range map[string]string{"x": "NEWX\n", "y": "y\n"} {
		if kept, _, _, err := c.Read(ctxT(t), id); err != nil || string(kept) != want {
			t.Errorf("read of %s: %q, %v, want %q", id, kept, err, want)
		}
	}
	// A read that found the old x before it was forgotten gets an error,
	// not the new x's output, which is in the files at its old path.
	if b, err := old.output(); err == nil {
		t.Fatalf("the forgotten x's output: %q, no error", b[16:])
	}
}
