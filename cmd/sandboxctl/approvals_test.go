package main_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandboxctl/sandboxctl/api"
)

// guardEnv is an isolated daemon on the gateway host behind the guard:
// security allowlist, ask on-miss (the defaults), with extra config lines.
func guardEnv(t *testing.T, extra string) *env {
	t.Helper()
	e := newEnv(t)
	cfg := "exec:\n  host: gateway\n  security: allowlist\n  ask: on-miss\n" + legacyGateway + extra
	if err := os.WriteFile(e.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return e
}

func execJSON(t *testing.T, e *env, args ...string) api.Details {
	t.Helper()
	r := e.run(t, append([]string{"--json", "exec"}, args...)...)
	var res struct {
		Details api.Details `json:"details"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
		t.Fatalf("exec %v: not JSON: %+v", args, r)
	}
	return res.Details
}

// pollUntilDone polls a session (in the scope of the --agent/--session
// flags in scope) until it is no longer running and returns the
// accumulated output and the final poll text.
func pollUntilDone(t *testing.T, e *env, id string, scope ...string) (string, string) {
	t.Helper()
	var out strings.Builder
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := e.run(t, append([]string{"process", "poll", id, "--timeout-ms", "2000"}, scope...)...)
		out.WriteString(r.stdout)
		if strings.Contains(r.stdout, "Process exited") || strings.Contains(r.stdout, "Process failed") {
			return out.String(), r.stdout
		}
		if time.Now().After(deadline) {
			t.Fatalf("session %s still running: %s", id, out.String())
		}
	}
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

// TestApprovalFlowThroughDaemon: a command off the allowlist waits for a
// human; allow-once runs it exactly once as the session the agent was given;
// the decision cannot be made twice; the same command elsewhere asks again.
func TestApprovalFlowThroughDaemon(t *testing.T) {
	e := guardEnv(t, "")
	dir := t.TempDir()
	marker := filepath.Join(dir, "RAN")
	d := execJSON(t, e, "--workdir", dir, "--", "touch", marker)
	if d.Status != "approval-pending" {
		t.Fatalf("want approval-pending, got %v", d)
	}
	id := d.ApprovalID
	sid := d.SessionID
	if id == "" || sid == "" || d.ApprovalSlug != id[:8] {
		t.Fatalf("details %v", d)
	}
	time.Sleep(300 * time.Millisecond)
	if exists(marker) {
		t.Fatal("ran before approval")
	}
	if r := e.run(t, "approvals", "list"); !strings.Contains(r.stdout, id) || !strings.Contains(r.stdout, "pending") {
		t.Fatalf("approvals list: %+v", r)
	}
	if r := e.run(t, "approvals", "resolve", id, "allow-once"); r.code != 0 {
		t.Fatalf("resolve: %+v", r)
	}
	_, last := pollUntilDone(t, e, sid)
	if !strings.Contains(last, "exited with code 0") || !exists(marker) {
		t.Fatalf("approved command did not run: %q, marker %v", last, exists(marker))
	}
	// Already decided: a specific error, nothing changes.
	if r := e.run(t, "approvals", "resolve", id, "deny"); r.code == 0 || !strings.Contains(r.stderr, "already decided") {
		t.Fatalf("second resolve: %+v", r)
	}
	// Unknown id and bad decision.
	if r := e.run(t, "approvals", "resolve", "no-such-id", "allow-once"); r.code == 0 || !strings.Contains(r.stderr, "unknown approval") {
		t.Fatalf("unknown id: %+v", r)
	}
	if r := e.run(t, "approvals", "resolve", id, "maybe"); r.code != 2 {
		t.Fatalf("bad decision: %+v", r)
	}
	// The allow-once was used: the same command in another cwd, or with
	// another env, asks again and does not run.
	os.Remove(marker)
	other := t.TempDir()
	d = execJSON(t, e, "--workdir", other, "--", "touch", marker)
	if d.Status != "approval-pending" || d.ApprovalID == id {
		t.Fatalf("other cwd: %v", d)
	}
	d = execJSON(t, e, "--workdir", dir, "--env", "FOO=bar", "--", "touch", marker)
	if d.Status != "approval-pending" || d.ApprovalID == id {
		t.Fatalf("other env: %v", d)
	}
	time.Sleep(300 * time.Millisecond)
	if exists(marker) {
		t.Fatal("a reused approval ran the command")
	}
}

// TestAllowAlwaysNeverAllowlistsTheShell: allow-always on `/bin/bash -lc id`
// allowlists id, never bash.
func TestAllowAlwaysNeverAllowlistsTheShell(t *testing.T) {
	e := guardEnv(t, "")
	d := execJSON(t, e, "--", "/bin/bash -lc 'id -u'")
	if d.Status != "approval-pending" {
		t.Fatalf("%v", d)
	}
	if r := e.run(t, "approvals", "resolve", d.ApprovalID, "allow-always"); r.code != 0 {
		t.Fatalf("resolve: %+v", r)
	}
	out, _ := pollUntilDone(t, e, d.SessionID)
	if !strings.Contains(out, fmt.Sprint(os.Getuid())) {
		t.Fatalf("approved bash -lc id did not print the uid: %q", out)
	}
	// id itself is now allowlisted: it runs at once.
	if d := execJSON(t, e, "--", "id -u"); d.Status != "completed" {
		t.Fatalf("id after allow-always: %v", d)
	}
	// bash is not: another bash line still needs approval.
	marker := filepath.Join(t.TempDir(), "BASH")
	if d := execJSON(t, e, "--", "/bin/bash -lc 'touch "+marker+"'"); d.Status != "approval-pending" {
		t.Fatalf("bash got allowlisted: %v", d)
	}
	time.Sleep(300 * time.Millisecond)
	if exists(marker) {
		t.Fatal("bash ran without approval")
	}
}

// TestApprovalExpiryAppliesAskFallback: an undecided request expires into
// askFallback: deny refuses, allowlist runs only what the allowlist
// satisfies, full runs.
func TestApprovalExpiryAppliesAskFallback(t *testing.T) {
	tests := []struct {
		fallback string
		ask      string
		command  func(marker string) string
		wantRun  bool
	}{
		{"deny", "on-miss", func(m string) string { return "touch " + m }, false},
		{"allowlist", "on-miss", func(m string) string { return "touch " + m }, false},
		{"allowlist", "always", func(m string) string { return "wc -c" }, true},
		{"full", "on-miss", func(m string) string { return "touch " + m }, true},
	}
	for _, tt := range tests {
		t.Run(tt.fallback+"-"+tt.ask, func(t *testing.T) {
			t.Parallel()
			e := guardEnv(t, fmt.Sprintf("  askFallback: %s\n  approvalTimeoutSec: 1\n", tt.fallback))
			marker := filepath.Join(t.TempDir(), "M")
			d := execJSON(t, e, "--ask", tt.ask, "--", tt.command(marker))
			if d.Status != "approval-pending" {
				t.Fatalf("%v", d)
			}
			out, last := pollUntilDone(t, e, d.SessionID)
			ran := strings.Contains(last, "exited with code 0")
			if ran != tt.wantRun {
				t.Fatalf("askFallback %s: ran=%v, want %v; output %q", tt.fallback, ran, tt.wantRun, out)
			}
			if !ran && !strings.Contains(out, "askFallback") {
				t.Errorf("refusal does not name askFallback: %q", out)
			}
			if strings.Contains(tt.command(marker), "touch") && exists(marker) != tt.wantRun {
				t.Fatalf("marker exists=%v, want %v", exists(marker), tt.wantRun)
			}
		})
	}
}

// TestApprovalHookDecides: an operator's hook program gets each approval
// request on stdin and its answer decides it; an answer it cannot parse
// leaves the request to a human.
func TestApprovalHookDecides(t *testing.T) {
	tests := []struct {
		answer  string
		wantRun bool
		pending bool
	}{
		{"allow-once", true, false},
		{"deny", false, false},
		{"maybe later", false, true},
	}
	for _, tt := range tests {
		t.Run(tt.answer, func(t *testing.T) {
			dir := t.TempDir()
			seen := filepath.Join(dir, "request.json")
			hook := filepath.Join(dir, "hook.sh")
			script := fmt.Sprintf("#!/bin/sh\ncat > %s\necho %q\n", seen, tt.answer)
			if err := os.WriteFile(hook, []byte(script), 0o700); err != nil {
				t.Fatal(err)
			}
			e := guardEnv(t, "  approvalHook: "+hook+"\n")
			marker := filepath.Join(dir, "RAN")
			d := execJSON(t, e, "--", "touch", marker)
			if d.Status != "approval-pending" {
				t.Fatalf("%v", d)
			}
			if tt.pending {
				time.Sleep(time.Second)
				r := e.run(t, "--json", "approvals", "list")
				if !strings.Contains(r.stdout, `"pending"`) || exists(marker) {
					t.Fatalf("an unparsable hook answer decided the request: %s", r.stdout)
				}
				return
			}
			_, last := pollUntilDone(t, e, d.SessionID)
			if exists(marker) != tt.wantRun {
				t.Fatalf("hook %q: ran=%v, last poll %q", tt.answer, exists(marker), last)
			}
			req, err := os.ReadFile(seen)
			if err != nil || !strings.Contains(string(req), d.ApprovalID) {
				t.Fatalf("hook did not get the request: %s %v", req, err)
			}
		})
	}
}
