package main_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestSecurityApprovalShowsWhatRuns replays issue 12 #7: a pending approval
// showed `touch M` while the run got an env payload the human never saw,
// and its argv said /bin/sh although the gateway runs $SHELL. Now `approvals
// list` and GET /v1/approvals show the agent, the cwd, the shell, the env
// names and values, and an argv that is exactly what the runner executes
// (read back from /proc by the approved command itself).
func TestSecurityApprovalShowsWhatRuns(t *testing.T) {
	if _, err := os.Stat("/bin/bash"); err != nil {
		t.Fatalf("this test needs /bin/bash as the daemon's $SHELL: %v", err)
	}
	t.Setenv("SHELL", "/bin/bash") // the daemon inherits it
	e := newEnv(t)
	if err := os.WriteFile(e.config, []byte("exec:\n  host: gateway\n  security: full\n  ask: always\n"+legacyGateway), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "argv")
	payload := "+!touch " + filepath.Join(dir, "PAYLOAD") + "\n" // a LESS-style payload
	// `; true` keeps the shell from exec'ing tr, so $$ is the shell itself.
	command := "tr '\\0' '\\n' < /proc/$$/cmdline > " + quote(t, out) + "; true"
	d := execJSON(t, e, "--agent", "alice", "--workdir", dir, "--env", "MY_PAGER_SETTING="+payload, "--", command)
	if d.Status != "approval-pending" {
		t.Fatalf("want approval-pending, got %v", d)
	}
	id := d.ApprovalID

	r := e.run(t, "--json", "approvals", "list")
	var list []struct {
		ID, Command, Cwd, Host, Shell, AgentID string
		Argv                                   []string
		Env                                    map[string]string
	}
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil || len(list) != 1 || list[0].ID != id {
		t.Fatalf("approvals list --json: %v %+v", err, r)
	}
	a := list[0]
	if a.Env["MY_PAGER_SETTING"] != payload {
		t.Errorf("the env payload is hidden: env %q", a.Env)
	}
	if a.AgentID != "alice" || a.Cwd != dir || a.Host != "gateway" || a.Command != command {
		t.Errorf("approval view: %+v", a)
	}
	if a.Shell != "/bin/bash" {
		t.Errorf("shell %q, want the daemon's $SHELL /bin/bash", a.Shell)
	}

	// The table a person reads shows the same, control characters visible.
	table := e.run(t, "approvals", "list").stdout
	t.Logf("approvals list:\n%s", table)
	for _, want := range []string{"alice", dir, "/bin/bash", "MY_PAGER_SETTING=", `\n`, "touch " + filepath.Join(dir, "PAYLOAD")} {
		if !strings.Contains(table, want) {
			t.Errorf("approvals list does not show %q:\n%s", want, table)
		}
	}

	// Approve it and compare the recorded argv with the real one.
	if r := e.run(t, "approvals", "resolve", id, "allow-once"); r.code != 0 {
		t.Fatalf("resolve: %+v", r)
	}
	if _, last := pollUntilDone(t, e, d.SessionID, "--agent", "alice"); !strings.Contains(last, "exited with code 0") {
		t.Fatalf("approved command: %q", last)
	}
	real := strings.Split(strings.TrimSuffix(readFile(t, out), "\n"), "\n")
	if !slices.Equal(real, a.Argv) {
		t.Fatalf("recorded argv %q, but the runner executed %q", a.Argv, real)
	}
}
