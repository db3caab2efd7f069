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
