package main_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandboxctl/sandboxctl/api"
	"github.com/sandboxctl/sandboxctl/sessions/config"
)

// TestConfigValidate: every problem of a file is reported with its key
// and line in one run, and the exit is 1; a good file is exit 0.
func TestConfigValidate(t *testing.T) {
	e := newEnv(t)
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	doc := "exec:\n  host: moon\n  backgroundMs: 10s\n  bogus: 1\nsandbox:\n  docker:\n    pidsLimit: -3\nextra: true\n"
	if err := os.WriteFile(bad, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	r := e.runArgv(t, "--state", e.state, "config", "validate", bad)
	if r.code != 1 {
		t.Errorf("validate of a bad file: exit %d, want 1: %+v", r.code, r)
	}
	for _, want := range []string{
		bad + ":2: exec.host:", bad + ":3: exec.backgroundMs:", bad + ":4: exec.bogus: unknown key",
		bad + ":7: sandbox.docker.pidsLimit:", bad + ":8: extra: unknown key",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("validate does not report %q:\n%s", want, r.stdout)
		}
	}
	if r := e.runArgv(t, "--state", e.state, "config", "validate", e.config); r.code != 0 || !strings.Contains(r.stdout, "valid") {
		t.Errorf("validate of a good file: %+v", r)
	}
	// Without FILE: the --config file.
	if r := e.runArgv(t, "--state", e.state, "--config", bad, "config", "validate"); r.code != 1 || !strings.Contains(r.stdout, "exec.bogus") {
		t.Errorf("validate of --config: %+v", r)
	}
}

// TestConfigShow: the effective configuration, every key, and where it
// came from: --config, the running daemon's, or the defaults.
func TestConfigShow(t *testing.T) {
	e := newEnv(t)
	r := e.runArgv(t, "--state", e.state, "config", "show")
	if r.code != 0 || !strings.Contains(r.stdout, "# config: the built-in defaults") || !strings.Contains(r.stdout, "host: sandbox") || !strings.Contains(r.stdout, "workspaceRoot:") {
		t.Errorf("config show without config: %+v", r)
	}
	r = e.run(t, "config", "show")
	if r.code != 0 || !strings.Contains(r.stdout, "# config: "+e.config+" (--config)") || !strings.Contains(r.stdout, "host: gateway") {
		t.Errorf("config show --config: %+v", r)
	}
	if r := e.run(t, "serve", "--foreground=false"); r.code != 0 {
		t.Fatalf("serve: %+v", r)
	}
	r = e.runArgv(t, "--state", e.state, "config", "show")
	if r.code != 0 || !strings.Contains(r.stdout, "# config: "+e.config+", as the daemon running for") || !strings.Contains(r.stdout, "host: gateway") {
		t.Errorf("config show with a daemon: %+v", r)
	}
	// The daemon records the exec settings its clients apply themselves,
	// as it read them (an exec of the same file takes them from there).
	data, err := os.ReadFile(filepath.Join(e.state, api.DaemonConfigFileName))
	var dc api.DaemonConfig
	if err != nil || json.Unmarshal(data, &dc) != nil || dc.Exec == nil || *dc.Exec != (api.ExecSettings{Host: "gateway", TimeoutSec: config.Default().Exec.TimeoutSec}) {
		t.Errorf("the daemon's record: %s %v", data, err)
	}
}
