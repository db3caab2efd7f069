package main_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandboxctl/sandboxctl/internal/dockertest"
	"github.com/sandboxctl/sandboxctl/sandbox/sandboxconfig"
)

// TestStateDirsAreSeparateWorlds: two daemons with two state directories
// and the default workspace root each give one agent name a workspace of
// its own, under its state directory: a file written through one is not
// seen through the other.
func TestStateDirsAreSeparateWorlds(t *testing.T) {
	dockertest.Require(t, sandboxconfig.DefaultConfig().Docker.Image)
	agent := fmt.Sprintf("worlds%d", time.Now().UnixNano()%1e6)
	var envs [2]*env
	for i := range envs {
		e := newEnv(t)
		cfg := fmt.Sprintf("exec:\n  host: sandbox\n  security: full\n  ask: \"off\"\nsandbox:\n  docker:\n    containerPrefix: sbxw%d-%d-\n", i, time.Now().UnixNano()%1e6)
		if err := os.WriteFile(e.config, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.run(t, "sandbox", "rm", "--agent", agent) })
		envs[i] = e
	}
	for i, e := range envs {
		if r := e.run(t, "exec", "--agent", agent, "--", fmt.Sprintf("echo world-%d > /workspace/mine", i)); r.code != 0 {
			t.Fatalf("state %d: write: %+v", i, r)
		}
	}
	for i, e := range envs {
		r := e.run(t, "exec", "--agent", agent, "--", "cat /workspace/mine")
		if r.code != 0 || r.stdout != fmt.Sprintf("world-%d\n", i) {
			t.Errorf("state %d: /workspace/mine holds %+v, want world-%d", i, r, i)
		}
		matches, _ := filepath.Glob(filepath.Join(e.state, "workspaces", "*", "mine"))
		if len(matches) != 1 {
			t.Errorf("state %d: the workspace is not under %s/workspaces: %q", i, e.state, matches)
		} else if data, _ := os.ReadFile(matches[0]); strings.TrimSpace(string(data)) != fmt.Sprintf("world-%d", i) {
			t.Errorf("state %d: %s holds %q", i, matches[0], data)
		}
	}
}

// TestCLIUsesItsDaemonsConfig: after a daemon started with --config, the
// commands for its state directory act under that configuration without
// repeating --config (here: the gateway host, which the built-in defaults
// do not use); a --config with the same content elsewhere is the same
// configuration; one that truly differs is refused with both files named.
func TestCLIUsesItsDaemonsConfig(t *testing.T) {
	e := newEnv(t)
	if r := e.run(t, "serve", "--foreground=false"); r.code != 0 {
		t.Fatalf("serve: %+v", r)
	}
	r := e.runArgv(t, "--state", e.state, "exec", "--", "echo from-the-daemons-config")
	if r.code != 0 || r.stdout != "from-the-daemons-config\n" {
		t.Fatalf("exec without --config: %+v", r)
	}
	if r := e.runArgv(t, "--state", e.state, "process", "list"); r.code != 0 {
		t.Errorf("process list without --config: %+v", r)
	}
	data, err := os.ReadFile(e.config)
	if err != nil {
		t.Fatal(err)
	}
	same := filepath.Join(t.TempDir(), "copy.yaml")
	other := filepath.Join(t.TempDir(), "other.yaml")
	if err := os.WriteFile(same, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(other, append(append([]byte{}, data...), "limits:\n  sessions:\n    running: 100\n"...), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := e.runArgv(t, "--state", e.state, "--config", same, "exec", "--", "echo same"); r.code != 0 || r.stdout != "same\n" {
		t.Errorf("exec with a copy of the daemon's config: %+v", r)
	}
	r = e.runArgv(t, "--state", e.state, "--config", other, "exec", "--", "echo never")
	if r.code == 0 || strings.Contains(r.stdout, "never") || !strings.Contains(r.stderr, e.config) || !strings.Contains(r.stderr, other) {
		t.Errorf("exec with another config: %+v, want a refusal naming %s and %s", r, e.config, other)
	}
	// The sandbox commands work on the Engine themselves: they check too.
	r = e.runArgv(t, "--state", e.state, "--config", other, "sandbox", "ls")
	if r.code == 0 || !strings.Contains(r.stderr, e.config) || !strings.Contains(r.stderr, other) {
		t.Errorf("sandbox ls with another config: %+v, want a refusal naming %s and %s", r, e.config, other)
	}
}

// TestCLIUsesItsDaemonsConfigForSandboxes: exec, cp and the sandbox
// commands after `serve --config` need no --config: they act on the
// daemon's sandboxes (its container prefix) and workspaces.
func TestCLIUsesItsDaemonsConfigForSandboxes(t *testing.T) {
	dockertest.Require(t, sandboxconfig.DefaultConfig().Docker.Image)
	e := newEnv(t)
	prefix := fmt.Sprintf("sbxc%d-", time.Now().UnixNano()%1e6)
	cfg := fmt.Sprintf("exec:\n  host: sandbox\n  security: full\n  ask: \"off\"\nsandbox:\n  docker:\n    containerPrefix: %s\n", prefix)
	if err := os.WriteFile(e.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	agent := fmt.Sprintf("cfgless%d", time.Now().UnixNano()%1e6)
	t.Cleanup(func() { e.run(t, "sandbox", "rm", "--agent", agent) })
	if r := e.run(t, "serve", "--foreground=false"); r.code != 0 {
		t.Fatalf("serve: %+v", r)
	}
	bare := func(args ...string) result {
		t.Helper()
		return e.runArgv(t, append([]string{"--state", e.state}, args...)...)
	}
	if r := bare("exec", "--agent", agent, "--", "echo kept > /workspace/f"); r.code != 0 {
		t.Fatalf("exec without --config: %+v", r)
	}
	local := filepath.Join(t.TempDir(), "f")
	if r := bare("cp", agent+":/workspace/f", local); r.code != 0 {
		t.Fatalf("cp without --config: %+v", r)
	}
	if data, err := os.ReadFile(local); err != nil || string(data) != "kept\n" {
		t.Fatalf("cp brought %q, %v", data, err)
	}
	r := bare("sandbox", "ls")
	if r.code != 0 || !strings.Contains(r.stdout, prefix) {
		t.Fatalf("sandbox ls without --config does not list the daemon's sandbox (prefix %s): %+v", prefix, r)
	}
	if r := bare("sandbox", "rm", "--agent", agent); r.code != 0 {
		t.Fatalf("sandbox rm without --config: %+v", r)
	}
}
