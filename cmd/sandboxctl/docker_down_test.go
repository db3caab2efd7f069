package main_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDockerUnreachable: with the Engine unreachable (DOCKER_HOST pointing
// at a socket that does not exist), every sandbox command and a sandbox exec
// through the daemon say that Docker is not reachable and how to start it;
// nothing panics and the daemon keeps serving the gateway host.
func TestDockerUnreachable(t *testing.T) {
	e := newEnv(t)
	if err := os.WriteFile(e.config, []byte("exec:\n  security: full\n  ask: \"off\"\n"+legacyGateway), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("DOCKER_HOST", "unix://"+filepath.Join(t.TempDir(), "no-docker.sock"))
	for _, args := range [][]string{
		{"sandbox", "ls"},
		{"sandbox", "create", "--agent", "x"},
		{"sandbox", "explain", "--agent", "x"},
		{"sandbox", "rm", "--agent", "x"},
		{"sandbox", "prune"},
		{"exec", "--agent", "x", "--", "true"},
	} {
		r := e.run(t, args...)
		out := r.stdout + r.stderr
		if r.code == 0 || !strings.Contains(out, "Docker is not reachable") || !strings.Contains(out, "Start it with") {
			t.Errorf("%v: exit %d, output %q", args, r.code, out)
		}
		if strings.Contains(out, "panic") || strings.Contains(out, "goroutine ") {
			t.Errorf("%v panicked: %s", args, out)
		}
	}
	// The daemon is still up and answers health checks.
	if r := e.run(t, "process", "list"); r.code != 0 {
		t.Errorf("daemon unusable after the Docker errors: %+v", r)
	}
}
