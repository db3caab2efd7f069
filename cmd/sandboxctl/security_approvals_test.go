package main_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"mvdan.cc/sh/v3/syntax"
)

// attackEnv is a daemon on the gateway host (allowlist, on-miss) whose
// allowlist, for every agent, holds the tools of an attacker: the
// sandboxctl CLI, curl, env and setsid.
func attackEnv(t *testing.T) *env {
	t.Helper()
	e := guardEnv(t, "")
	var entries []map[string]string
	for _, p := range []string{binary, "/usr/bin/curl", "/usr/bin/env", "/usr/bin/setsid"} {
		entries = append(entries, map[string]string{"id": p, "pattern": p})
	}
	st := map[string]any{"version": 1, "defaults": map[string]any{},
		"agents": map[string]any{"*": map[string]any{"allowlist": entries}}}
	data, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.state, "approvals.json"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	return e
}

// quote is a shell word for s.
func quote(t *testing.T, s string) string {
	t.Helper()
	q, err := syntax.Quote(s, syntax.LangPOSIX)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// approvalsFile reads the daemon's approvals.json as generic JSON.
func approvalsFile(t *testing.T, e *env) map[string]any {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(e.state, "approvals.json"))
	if err != nil {
		t.Fatal(err)
	}
	var st map[string]any
	if err := json.Unmarshal(data, &st); err != nil {
		t.Fatal(err)
	}
	return st
}

// approvalStatus is the status `approvals list --json` shows for id.
func approvalStatus(t *testing.T, e *env, id string) string {
	t.Helper()
	r := e.run(t, "--json", "approvals", "list")
	var list []struct {
		ID, Status string
	}
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil {
		t.Fatalf("approvals list: %+v", r)
	}
	for _, a := range list {
		if a.ID == id {
			return a.Status
		}
	}
	t.Fatalf("approval %s not listed: %s", id, r.stdout)
	return ""
}

// waitFile waits until path exists and holds a line, and returns it.
func waitFile(t *testing.T, path string, timeout time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if data, err := os.ReadFile(path); err == nil && strings.HasSuffix(string(data), "}\n") {
			return string(data)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not appear within %v", path, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestSecurityCommandCannotResolveApproval replays issue 12 #1: a command
// the daemon started decides a pending approval over the daemon's own
// socket. Whatever it uses — the sandboxctl CLI, curl, or a copy that left
// the daemon's process tree (setsid, double fork) with a scrubbed
// environment — the decision is refused, the request stays pending, nothing
// is allowlisted and the approved command never runs. A human's decision
// afterwards still works.
func TestSecurityCommandCannotResolveApproval(t *testing.T) {
	e := attackEnv(t)
	dir := t.TempDir()
	marker := filepath.Join(dir, "APPROVED-BY-ATTACKER")
	d := execJSON(t, e, "--workdir", dir, "--", "touch", marker)
	if d.Status != "approval-pending" {
		t.Fatalf("want approval-pending, got %v", d)
	}
	id := d.ApprovalID
	sid := d.SessionID
	sock := filepath.Join(e.state, "sandboxctl.sock")
	cli := quote(t, binary) + " --state " + quote(t, e.state) + " --config " + quote(t, e.config)
	body := `{"decision":"allow-always"}`
	curl := "curl -sS --unix-socket " + quote(t, sock) + " -X POST -d " + quote(t, body) + " http://sandboxctl/v1/approvals/" + id

	// First a copy that is orphaned at once (a background job of a subshell
	// that exits) and drops SANDBOXCTL_RUN with env -i; its answer is
	// written to a file the test waits for. The command itself waits for
	// that answer: what a command leaves behind is ended when its session
	// ends, which would end the orphan before it asked.
	t.Run("detached-clean-env", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "answer")
		cmd := "(env -i " + strings.Replace(curl, "curl -sS", "curl -sS -o "+quote(t, out), 1) + " &); " +
			"i=0; while [ ! -s " + quote(t, out) + " ] && [ $i -lt 200 ]; do sleep 0.1; i=$((i+1)); done"
		// The analyser refuses `&`, so a human approves this one line; an
		// approved command still may not decide other requests.
		d := execJSON(t, e, "--", cmd)
		if d.Status != "approval-pending" {
			t.Fatalf("want approval-pending for the detaching line, got %v", d)
		}
		if r := e.run(t, "approvals", "resolve", d.ApprovalID, "allow-once"); r.code != 0 {
			t.Fatalf("human resolve: %+v", r)
		}
		answer := waitFile(t, out, 20*time.Second)
		if st := approvalStatus(t, e, id); st != "pending" {
			t.Fatalf("detached command decided the approval: status %q; it got %s", st, answer)
		}
		if !strings.Contains(answer, "not allowed to decide approvals") {
			t.Errorf("refusal does not say why: %q", answer)
		}
	})

	attacks := []struct {
		name    string
		command string
	}{
		{"sandboxctl-cli", cli + " approvals resolve " + id + " allow-always"},
		{"curl", curl},
		{"curl-clean-env", "env -i " + curl},
	}
	for _, a := range attacks {
		t.Run(a.name, func(t *testing.T) {
			// curl --unix-socket is a gadget (it reaches any socket,
			// the Docker one included): the allowlist entry does not
			// cover it, so a human approves it once; an approved
			// command still may not decide other requests.
			out := runApproved(t, e, a.command)
			if st := approvalStatus(t, e, id); st != "pending" {
				t.Fatalf("command %q decided the approval: status %q; it got %s", a.command, st, out)
			}
			if !strings.Contains(out, "not allowed to decide approvals") {
				t.Fatalf("the attacker's command did not run or was not refused: %q", out)
			}
		})
	}
	st := approvalsFile(t, e)
	if agents, _ := st["agents"].(map[string]any); len(agents) > 0 {
		if raw, _ := json.Marshal(agents); strings.Contains(string(raw), "touch") {
			t.Fatalf("an attacker's allow-always was persisted: %s", raw)
		}
	}
	// The human denies; the session settles as denied and never ran.
	if r := e.run(t, "approvals", "resolve", id, "deny"); r.code != 0 {
		t.Fatalf("human resolve from the test's shell: %+v", r)
	}
	out, last := pollUntilDone(t, e, sid)
	if !strings.Contains(last, "denied") {
		t.Fatalf("session after deny: %q", out)
	}
	if exists(marker) {
		t.Fatal("the command ran although only the attacker approved it")
	}
}
