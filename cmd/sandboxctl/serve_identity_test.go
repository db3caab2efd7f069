package main_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestExecRefusesDaemonOfAnotherConfig replays issue 15: a daemon started
// with one config (or Engine) is never used silently by a command that
// asks for another; the refusal names both and the fix, and nothing runs.
func TestExecRefusesDaemonOfAnotherConfig(t *testing.T) {
	e := newEnv(t)
	marker := filepath.Join(t.TempDir(), "ran")
	if r := e.run(t, "exec", "--", "true"); r.code != 0 {
		t.Fatalf("first exec: %+v", r)
	}
	other := filepath.Join(t.TempDir(), "other.yaml")
	if err := os.WriteFile(other, []byte("exec:\n  host: gateway\n  security: full\n  ask: \"off\"\n  timeoutSec: 77\n"+legacyGateway), 0o600); err != nil {
		t.Fatal(err)
	}
	r := e.runWith(t, nil, "--config", other, "exec", "--", "touch "+marker)
	if r.code != 125 || !strings.Contains(r.stderr, e.config) || !strings.Contains(r.stderr, other) || !strings.Contains(r.stderr, "serve stop") {
		t.Errorf("exec with another config: %+v; want exit 125 naming both files and the fix", r)
	}
	r = e.runWith(t, []string{"DOCKER_HOST=tcp://127.0.0.1:1"}, "exec", "--", "touch "+marker)
	if r.code != 125 || !strings.Contains(r.stderr, "DOCKER_HOST=tcp://127.0.0.1:1") {
		t.Errorf("exec with another DOCKER_HOST: %+v; want exit 125 naming the Engine", r)
	}
	if _, err := os.Stat(marker); !os.IsNotExist(err) {
		t.Errorf("a refused command ran: %v", err)
	}
	// After serve stop, the next command starts a daemon of its own config.
	e.stopDaemon(t)
	if r := e.runWith(t, nil, "--config", other, "exec", "--", "touch "+marker); r.code != 0 {
		t.Fatalf("exec after serve stop: %+v", r)
	}
	r = e.runWith(t, nil, "--json", "serve", "status")
	var h struct {
		PID        int    `json:"pid"`
		ConfigFile string `json:"configFile"`
		ConfigHash string `json:"configHash"`
		Socket     string `json:"socket"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &h); err != nil || h.ConfigFile != other || h.ConfigHash == "" || h.PID <= 0 || h.Socket != filepath.Join(e.state, "sandboxctl.sock") {
		t.Errorf("serve status --json: %q %v", r.stdout, err)
	}
	r = e.runWith(t, nil, "serve", "status")
	for _, want := range []string{"pid:", "socket:", "config:      " + other, "config hash: " + h.ConfigHash, "engine:", "uptime:"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("serve status lacks %q: %q", want, r.stdout)
		}
	}
}

// TestServeStatusWithoutDaemon: no daemon is exit 1 and says so.
func TestServeStatusWithoutDaemon(t *testing.T) {
	e := newEnv(t)
	if r := e.run(t, "serve", "status"); r.code != 1 || !strings.Contains(r.stderr, "no daemon runs") {
		t.Errorf("serve status without a daemon: %+v", r)
	}
}

// TestServeListenCreatesStateDir replays issue 15: serve --listen on a
// state directory that does not exist yet creates it (mode 0700) and its
// token, and serves.
func TestServeListenCreatesStateDir(t *testing.T) {
	e := newEnv(t)
	state := filepath.Join(t.TempDir(), "new", "state")
	e.state = state
	cmd := e.command(t, nil, "serve", "--listen", "127.0.0.1:0")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(state, "sandboxctl.sock")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve --listen did not come up on a new state directory")
		}
		time.Sleep(50 * time.Millisecond)
	}
	fi, err := os.Stat(state)
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("state directory: %v %v", fi, err)
	}
	if fi, err := os.Stat(filepath.Join(state, "token")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("token: %v %v", fi, err)
	}
	if r := e.run(t, "serve", "status"); r.code != 0 {
		t.Errorf("serve status: %+v", r)
	}
}
