package hostsup

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandboxctl/sandboxctl/envknob"
	"github.com/sandboxctl/sandboxctl/hostexec"
	"github.com/sandboxctl/sandboxctl/internal/procfs"
	"github.com/sandboxctl/sandboxctl/sandbox/supervisor"
)

// A session directory of a dead supervisor without its meta.json (it died
// between fork and write) is still swept: its tagged processes end.
func TestSweepWithoutRecord(t *testing.T) {
	dir := t.TempDir()
	tag := hostexec.NewTag()
	if err := os.Mkdir(filepath.Join(dir, tag), 0o700); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sleep", "30")
	cmd.Env = []string{string(envknob.RunTag) + "=" + tag, "PATH=/usr/bin:/bin"}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })

	s, err := New(Options{Dir: dir, Command: []string{"/bin/false"}, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	recovered, lost, err := s.Sessions(context.Background())
	if err != nil || len(recovered) != 0 || len(lost) != 0 {
		t.Fatalf("Sessions = %v %v %v, want nothing to report", recovered, lost, err)
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the tagged process of the unrecorded session still runs")
	}
	if _, err := os.Stat(filepath.Join(dir, tag)); !os.IsNotExist(err) {
		t.Fatalf("session directory not removed: %v", err)
	}
}

// A live supervisor (it holds the lock) whose socket is gone is not taken
// for dead.
func TestLiveWithoutSocketIsNotSwept(t *testing.T) {
	dir := t.TempDir()
	lock, err := holdLock(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	tag := hostexec.NewTag()
	if err := os.Mkdir(filepath.Join(dir, tag), 0o700); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sleep", "30")
	cmd.Env = []string{string(envknob.RunTag) + "=" + tag, "PATH=/usr/bin:/bin"}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	s, err := New(Options{Dir: dir, Command: []string{"/bin/false"}, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Sessions(context.Background()); err == nil || !strings.Contains(err.Error(), "runs but its socket") {
		t.Fatalf("Sessions with a live supervisor and no socket: %v", err)
	}
	if st, err := procfs.ReadStat("/proc", cmd.Process.Pid); err != nil || st.Dead() {
		t.Fatalf("the live supervisor's command was swept: %v %+v", err, st)
	}
	if _, err := holdLock(dir); err == nil {
		t.Fatal("a second supervisor could take the lock")
	}
}

func TestSocketPathTooLong(t *testing.T) {
	dir := filepath.Join(t.TempDir(), strings.Repeat("d", 100))
	if _, err := New(Options{Dir: dir, Command: []string{"/bin/false"}}); err == nil || !strings.Contains(err.Error(), "shorter state directory") {
		t.Fatalf("New with a %d-byte socket path: %v", len(SocketPath(dir)), err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("the refused directory was created: %v", err)
	}
}

// The spare output log a dead supervisor left in its directory is no
// session: the sweep neither reports it nor ends processes that carry its
// name as their run tag (it names no run), and the next supervisor
// removes it.
func TestSweepSkipsSpareLog(t *testing.T) {
	dir := t.TempDir()
	if !hostexec.ValidTag(supervisor.SpareLogName) {
		t.Skipf("%q is no valid tag: the sweep passes it over anyway", supervisor.SpareLogName)
	}
	if err := os.Mkdir(filepath.Join(dir, supervisor.SpareLogName), 0o700); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sleep", "30")
	cmd.Env = []string{string(envknob.RunTag) + "=" + supervisor.SpareLogName, "PATH=/usr/bin:/bin"}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	var mu sync.Mutex
	var logs []string
	s, err := New(Options{Dir: dir, Command: []string{"/bin/false"}, Logf: func(f string, a ...any) {
		mu.Lock()
		defer mu.Unlock()
		logs = append(logs, fmt.Sprintf(f, a...))
	}})
	if err != nil {
		t.Fatal(err)
	}
	recovered, lost, err := s.Sessions(context.Background())
	if err != nil || len(recovered) != 0 || len(lost) != 0 {
		t.Fatalf("Sessions = %v %v %v, want nothing to report", recovered, lost, err)
	}
	if st, err := procfs.ReadStat("/proc", cmd.Process.Pid); err != nil || st.Dead() {
		t.Fatalf("a process tagged %q was swept: %v %+v", supervisor.SpareLogName, err, st)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, l := range logs {
		if strings.Contains(l, supervisor.SpareLogName) {
			t.Errorf("the sweep took the spare output log for a session: %s", l)
		}
	}
}
