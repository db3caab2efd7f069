package cli

import (
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"github.com/sandboxctl/sandboxctl/api"
	"github.com/sandboxctl/sandboxctl/internal/apiclient"
)

// liveDaemonRecord makes state look like the state directory of a running
// daemon (its lock held, its pid file) whose record is dc.
func liveDaemonRecord(t *testing.T, state string, dc api.DaemonConfig) {
	t.Helper()
	lock, err := os.OpenFile(filepath.Join(state, api.LockFileName), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lock.Close() })
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	dc.PID = os.Getpid()
	if err := os.WriteFile(filepath.Join(state, api.PIDFileName), []byte(strconv.Itoa(dc.PID)), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := apiclient.WriteDaemonConfig(state, dc); err != nil {
		t.Fatal(err)
	}
}

// TestExecSettings: an exec takes its settings from the record of the
// daemon that serves the same file, byte for byte, without parsing the
// file again; from the file in every other case. (The record here says
// another host than the file, which a daemon's never does, to tell which
// was read.)
func TestExecSettings(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "sandboxctl.yaml")
	content := "exec:\n  host: sandbox\n  timeoutSec: 3\n"
	if err := os.WriteFile(conf, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	recorded := api.ExecSettings{Host: "gateway", Cwd: "/recorded", TimeoutSec: 9}
	fromFile := api.ExecSettings{Host: "sandbox", TimeoutSec: 3}
	state := filepath.Join(dir, "state")
	if err := os.MkdirAll(state, 0o700); err != nil {
		t.Fatal(err)
	}
	liveDaemonRecord(t, state, api.DaemonConfig{Identity: api.Identity{ConfigFile: conf}, Content: content, Exec: &recorded})

	newCLI := func(stateFlag, configPath string) *CLI {
		return &CLI{StateFlag: stateFlag, ConfigPath: configPath, Getenv: func(string) string { return "" }}
	}
	for _, tc := range []struct {
		name       string
		c          *CLI
		want       api.ExecSettings
		wantParsed bool
	}{
		{"same file as the daemon's", newCLI(state, conf), recorded, false},
		{"the daemon's file, no --config", newCLI(state, ""), recorded, false},
		{"the state directory is the file's to say", newCLI("", conf), fromFile, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, _, err := tc.c.execSettings()
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want || tc.c.loaded.parsed != tc.wantParsed {
				t.Errorf("settings %+v (parsed %v), want %+v (parsed %v)", got, tc.c.loaded.parsed, tc.want, tc.wantParsed)
			}
		})
	}

	// A record of the same file whose daemon no longer runs still holds
	// what that daemon read from the file's content.
	dead := filepath.Join(dir, "state4")
	if err := os.MkdirAll(dead, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := apiclient.WriteDaemonConfig(dead, api.DaemonConfig{PID: 1, Identity: api.Identity{ConfigFile: conf}, Content: content, Exec: &recorded}); err != nil {
		t.Fatal(err)
	}
	c := newCLI(dead, conf)
	if got, _, err := c.execSettings(); err != nil || got != recorded || c.loaded.parsed {
		t.Errorf("the record of a daemon that ended: settings %+v %v (parsed %v), want the record's", got, err, c.loaded.parsed)
	}

	// Another content under the same path, or a record of an older daemon
	// without the settings: the file is parsed.
	other := filepath.Join(dir, "state2")
	if err := os.MkdirAll(other, 0o700); err != nil {
		t.Fatal(err)
	}
	liveDaemonRecord(t, other, api.DaemonConfig{Identity: api.Identity{ConfigFile: conf}, Content: content + "# edited\n", Exec: &recorded})
	old := filepath.Join(dir, "state3")
	if err := os.MkdirAll(old, 0o700); err != nil {
		t.Fatal(err)
	}
	liveDaemonRecord(t, old, api.DaemonConfig{Identity: api.Identity{ConfigFile: conf}, Content: content})
	for _, st := range []string{other, old} {
		c := newCLI(st, conf)
		got, _, err := c.execSettings()
		if err != nil || got != fromFile || !c.loaded.parsed {
			t.Errorf("%s: settings %+v %v (parsed %v), want the file's %+v", st, got, err, c.loaded.parsed, fromFile)
		}
	}
}
