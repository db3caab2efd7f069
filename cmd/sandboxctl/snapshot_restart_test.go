package main_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSandboxSnapshotAcrossDaemonRestart: a snapshot taken through one
// daemon outlives its SIGKILL. The next daemon on the same state directory
// lists it, rolls the sandbox back to it byte for byte and forks another
// agent's sandbox from it.
func TestSandboxSnapshotAcrossDaemonRestart(t *testing.T) {
	e, alice, bob := filesEnv(t)
	base := serveFiles(t, e)
	t.Cleanup(func() {
		e.run(t, "sandbox", "rm", "--agent", alice)
		e.run(t, "sandbox", "rm", "--agent", bob)
	})
	call := func(method, path string, body any) (int, []byte) {
		t.Helper()
		var raw []byte
		if body != nil {
			raw = jsonBody(body)
		}
		return filesCall(t, base, filesToolToken, method, path, "application/json", raw)
	}
	exec := func(agent, command string) string {
		t.Helper()
		code, body := call("POST", "/v1/tools/exec", map[string]any{"command": command, "agentId": agent})
		var res struct {
			Details struct {
				Status     string `json:"status"`
				Aggregated string `json:"aggregated"`
			} `json:"details"`
		}
		if code != 200 || json.Unmarshal(body, &res) != nil || res.Details.Status != "completed" {
			t.Fatalf("exec %q as %s: %d %s", command, agent, code, body)
		}
		return res.Details.Aggregated
	}

	code, body := call("POST", "/v1/sandboxes", map[string]any{"agentId": alice})
	if code != http.StatusCreated {
		t.Fatalf("create: %d %s", code, body)
	}
	sb := decodeInto[sandboxObject](t, "create", body)
	exec(alice, "head -c 200000 /dev/urandom > /workspace/r.bin")
	want := exec(alice, "sha256sum < /workspace/r.bin")
	if len(strings.Fields(want)) == 0 || len(strings.Fields(want)[0]) != 64 {
		t.Fatalf("sha256sum: %q", want)
	}
	if code, body := call("POST", "/v1/sandboxes/"+sb.ID+"/snapshots", map[string]any{"name": "keep"}); code != http.StatusCreated {
		t.Fatalf("snapshot: %d %s", code, body)
	}

	pid, err := readPID(e.state)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := waitGone(pid, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	base = serveFiles(t, e)

	code, body = call("GET", "/v1/sandboxes/"+sb.ID+"/snapshots", nil)
	if code != http.StatusOK || !strings.Contains(string(body), `"name":"keep"`) {
		t.Fatalf("snapshots after the restart: %d %s", code, body)
	}
	exec(alice, "echo changed > /workspace/r.bin")
	if got := exec(alice, "sha256sum < /workspace/r.bin"); got == want {
		t.Fatal("the file did not change")
	}
	code, body = call("POST", "/v1/sandboxes/"+sb.ID+"/rollback", map[string]any{"snapshot": "keep"})
	if code != http.StatusOK {
		t.Fatalf("rollback after the restart: %d %s", code, body)
	}
	if got := exec(alice, "sha256sum < /workspace/r.bin"); got != want {
		t.Fatalf("after the rollback: %q, want %q", got, want)
	}
	rolled := decodeInto[sandboxObject](t, "rollback", body)
	code, body = call("POST", "/v1/sandboxes/"+rolled.ID+"/fork", map[string]any{"agentId": bob, "snapshot": "keep"})
	if code != http.StatusCreated {
		t.Fatalf("fork after the restart: %d %s", code, body)
	}
	if got := exec(bob, "sha256sum < /workspace/r.bin"); got != want {
		t.Fatalf("the fork's file: %q, want %q", got, want)
	}
}
