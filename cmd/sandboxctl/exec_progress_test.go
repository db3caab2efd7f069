package main_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandboxctl/sandboxctl/api"

	"github.com/sandboxctl/sandboxctl/internal/apiclient"
	"github.com/sandboxctl/sandboxctl/internal/dockertest"
	"github.com/sandboxctl/sandboxctl/sandbox"
	"github.com/sandboxctl/sandboxctl/sandbox/sandboxconfig"
	"github.com/sandboxctl/sandboxctl/vocab"
)

// slowDaemon writes a sandboxctld wrapper that takes 1.5 s to start, so
// that the daemon's start is a step over the 1 s progress threshold.
func slowDaemon(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "slow-sandboxctld")
	script := fmt.Sprintf("#!/bin/sh\nsleep 1.5\nexec %s \"$@\"\n", quote(t, daemonBinary))
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
		quote(t, slow), binary, e.state, e.config, exitFile)
	if out, err := exec.Command(tmux, "-S", sock, "new-session", "-d", "-x", "120", "-y", "30", "sh", "-c", cmdline).CombinedOutput(); err != nil {
		t.Fatalf("tmux: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command(tmux, "-S", sock, "kill-server").Run() })
	if got := waitExitCode(t, exitFile, 30*time.Second, func() string { return "" }); got != "0" {
		t.Errorf("exit code %s, want 0", got)
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

// TestExecStepEvents (issue 15 item 5): the creation of a sandbox by a
// first exec is on the daemon's event stream as "step" events, start then
// end, for the exec's agent.
func TestExecStepEvents(t *testing.T) {
	dockertest.Require(t, sandboxconfig.DefaultConfig().Docker.Image)
	e := newEnv(t)
	cfg := fmt.Sprintf("sandbox:\n  workspaceRoot: %s\n", filepath.Join(e.state, "ws"))
	if err := os.WriteFile(e.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	agent := fmt.Sprintf("clistep-%d", time.Now().UnixNano())
	t.Cleanup(func() { e.run(t, "sandbox", "rm", "--agent", agent) })
	if r := e.run(t, "exec", "--agent", agent, "--", "true"); r.code != 0 || r.stderr != "" {
		t.Fatalf("first exec: %+v", r)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	since := int64(0)
	es, err := apiclient.NewUnixClient(api.SocketPath(e.state)).EventsSince(ctx, apiclient.EventsQuery{Since: &since, Agent: agent})
	if err != nil {
		t.Fatal(err)
	}
	defer es.Close()
	var phases []string
	for len(phases) < 2 {
		var ev api.Event
		if err := es.Next(&ev); err != nil {
			t.Fatalf("events: %v; step phases so far %v", err, phases)
		}
		if ev.Type != vocab.EventStep || ev.Details.Step != string(sandbox.StepSandboxCreate) {
			continue
		}
		if ev.AgentID != agent {
			t.Errorf("step event of agent %q, want %q", ev.AgentID, agent)
		}
		phases = append(phases, fmt.Sprint(ev.Details.Phase))
		if ev.Details.Phase == "end" && ev.Details.Error != "" {
			t.Errorf("sandbox-create ended with error %v", ev.Details.Error)
		}
	}
	if phases[0] != "start" || phases[1] != "end" {
		t.Errorf("sandbox-create phases %v, want [start end]", phases)
	}
}

// TestExecProgressSandboxCreate (issue 15 item 5): a first exec whose
// sandbox takes over 1 s to create (a setupCommand that sleeps) shows
// "creating the sandbox…" on a terminal's stderr (tmux), from the daemon's
// step events; with stderr a pipe nothing extra is printed.
func TestExecProgressSandboxCreate(t *testing.T) {
	dockertest.Require(t, sandboxconfig.DefaultConfig().Docker.Image)
	tmux, err := exec.LookPath("tmux")
	if err != nil {
		t.Fatalf("tmux is required for this test (scripts/toolchain.sh installs it): %v", err)
	}
	e := newEnv(t)
	cfg := fmt.Sprintf("sandbox:\n  workspaceRoot: %s\n  docker:\n    setupCommand: sleep 1.5\n", filepath.Join(e.state, "ws"))
	if err := os.WriteFile(e.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	agent := fmt.Sprintf("cliprog-%d", time.Now().UnixNano())
	t.Cleanup(func() {
		e.run(t, "sandbox", "rm", "--agent", agent)
		e.run(t, "sandbox", "rm", "--agent", agent+"-pipe")
	})
	dir := t.TempDir()
	exitFile := filepath.Join(dir, "exit")
	sock := filepath.Join(dir, "tmux.sock")
	cmdline := fmt.Sprintf("%s --state %s --config %s exec --agent %s -- 'echo ran-$((40+2))'; echo $? > %s; sleep 30",
		binary, e.state, e.config, agent, exitFile)
	if out, err := exec.Command(tmux, "-S", sock, "new-session", "-d", "-x", "120", "-y", "30", "sh", "-c", cmdline).CombinedOutput(); err != nil {
		t.Fatalf("tmux: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command(tmux, "-S", sock, "kill-server").Run() })
	if got := waitExitCode(t, exitFile, 60*time.Second, func() string { return "" }); got != "0" {
		t.Errorf("exit code %s, want 0", got)
	}
	pane, err := exec.Command(tmux, "-S", sock, "capture-pane", "-p").CombinedOutput()
	if err != nil {
		t.Fatalf("capture-pane: %v: %s", err, pane)
	}
	if !strings.Contains(string(pane), "sandboxctl: creating the sandbox…") || !strings.Contains(string(pane), "ran-42") {
		t.Errorf("pane lacks the progress line or the output:\n%s", pane)
	}

	// Another first exec (a new sandbox) with stderr a pipe: nothing extra.
	r := e.run(t, "exec", "--agent", agent+"-pipe", "--", "echo ran-$((40+2))")
	if r.code != 0 || r.stdout != "ran-42\n" || r.stderr != "" {
		t.Errorf("stderr not a terminal: %+v (want no progress)", r)
	}
}

// waitExitCode waits until the shell in a tmux pane has written the exit
// code of sandboxctl to path and returns it; after within it fails,
// adding what more() says.
func waitExitCode(t *testing.T, path string, within time.Duration, more func() string) string {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		data, err := os.ReadFile(path)
		if got := strings.TrimSpace(string(data)); err == nil && got != "" {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("sandboxctl did not exit within %s%s", within, more())
		}
		time.Sleep(50 * time.Millisecond)
	}
}
