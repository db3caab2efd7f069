package main_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// slowDaemon writes a sandboxctld wrapper that takes 1.5 s to start, so
// that the daemon's start is a step over the 1 s progress threshold.
func slowDaemon(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "slow-sandboxctld")
	script := fmt.Sprintf("#!/bin/sh\nsleep 1.5\nexec %s \"$@\"\n", shellQuote(daemonBinary))
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestExecProgressOnTerminal (issue 15 item 5): a first exec that starts
// the daemon, a step over 1 s, shows it on stderr when stderr is a
// terminal (tmux), and prints nothing extra when stderr is not one.
func TestExecProgressOnTerminal(t *testing.T) {
	tmux, err := exec.LookPath("tmux")
	if err != nil {
		t.Fatalf("tmux is required for this test (scripts/toolchain.sh installs it): %v", err)
	}
	slow := slowDaemon(t)
	e := newEnv(t)
	dir := t.TempDir()
	exitFile := filepath.Join(dir, "exit")
	sock := filepath.Join(dir, "tmux.sock")
	cmdline := fmt.Sprintf("SANDBOXCTLD=%s %s --state %s --config %s exec -- 'echo ran-$((40+2))'; echo $? > %s; sleep 30",
		shellQuote(slow), binary, e.state, e.config, exitFile)
	if out, err := exec.Command(tmux, "-S", sock, "new-session", "-d", "-x", "120", "-y", "30", "sh", "-c", cmdline).CombinedOutput(); err != nil {
		t.Fatalf("tmux: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command(tmux, "-S", sock, "kill-server").Run() })
	deadline := time.Now().Add(30 * time.Second)
	for {
		data, err := os.ReadFile(exitFile)
		if err == nil && strings.TrimSpace(string(data)) != "" {
			if got := strings.TrimSpace(string(data)); got != "0" {
				t.Errorf("exit code %s, want 0", got)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("sandboxctl did not exit within 30s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	pane, err := exec.Command(tmux, "-S", sock, "capture-pane", "-p").CombinedOutput()
	if err != nil {
		t.Fatalf("capture-pane: %v: %s", err, pane)
	}
	if !strings.Contains(string(pane), "sandboxctl: starting the daemon…") || !strings.Contains(string(pane), "ran-42") {
		t.Errorf("pane lacks the progress line or the output:\n%s", pane)
	}

	// The same first exec with stderr a pipe: nothing extra.
	e.stopDaemon(t)
	cmd := exec.Command(binary, "--state", e.state, "--config", e.config, "exec", "--", "echo ran-$((40+2))")
	cmd.Env = append(os.Environ(), "SANDBOXCTLD="+slow)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("exec: %v; stderr %q", err, stderr.String())
	}
	if stdout.String() != "ran-42\n" || stderr.String() != "" {
		t.Errorf("stderr not a terminal: stdout %q, stderr %q (want no progress)", stdout.String(), stderr.String())
	}
}
