package main_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestCommandDoesNotStartADaemon: a gateway command that runs sandboxctl
// after the daemon died must not start a daemon of its own (it would run
// under the command's host supervisor, which refuses its own descendants,
// and every later gateway command would fail). It is told why instead, and
// the next daemon started from outside re-adopts the command's session.
func TestCommandDoesNotStartADaemon(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	gate, out := filepath.Join(dir, "GATE"), filepath.Join(dir, "OUT")
	script := "while [ ! -e " + gate + " ]; do sleep 0.05; done; " +
		binary + " --state " + e.state + " --config " + e.config + " exec -- true > " + out + " 2>&1; echo \"exit=$?\" >> " + out
	d := execJSON(t, e, "--background", "--", script)
	sid := d.SessionID
	if sid == "" {
		t.Fatalf("background exec: %v", d)
	}
	pid, err := readPID(e.state)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := waitGone(pid, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	var got string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		b, _ := os.ReadFile(out)
		if got = string(b); strings.Contains(got, "exit=") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the nested sandboxctl did not finish: %q", got)
		}
	}
	if strings.Contains(got, "exit=0") || !strings.Contains(got, "does not start a daemon") {
		t.Fatalf("nested sandboxctl: %q", got)
	}
	if p, err := readPID(e.state); err == nil && p != pid && waitGone(p, 0) != nil {
		t.Fatalf("a daemon (pid %d) was started from the command", p)
	}
	// A daemon started from outside re-adopts the session, which ends
	// with code 0 (its shell may still be exiting when OUT is complete).
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		r := e.run(t, "process", "poll", sid)
		if strings.Contains(r.stdout, "exited with code 0") {
			break
		}
		if time.Now().After(deadline) || !strings.Contains(r.stdout, "still running") {
			t.Fatalf("poll after the restart: %+v", r)
		}
	}
}
