package main_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestSandboxSnapshotsHTTPAndCLI drives snapshots, rollback and fork
// through a real daemon and Engine: snapshot over HTTP and the CLI, list,
// rollback (byte for byte), fork by an agent token into its own agent only,
// another agent's sandbox out of reach, removal, and the events.
func TestSandboxSnapshotsHTTPAndCLI(t *testing.T) {
	e, alice, bob := filesEnv(t)
	cfg := fmt.Sprintf("mcp:\n  sandboxLifecycle: true\nsandbox:\n  scope: session\n  workspaceRoot: %s\n  docker:\n    containerPrefix: sbxs-%d-\n", filepath.Join(e.state, "ws"), time.Now().UnixNano()%1e6)
	if err := os.WriteFile(e.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	base := serveFiles(t, e)
	t.Cleanup(func() {
		for _, s := range []string{"s1", "s2"} {
			e.run(t, "sandbox", "rm", "--agent", alice, "--session", s)
		}
		e.run(t, "sandbox", "rm", "--agent", bob)
		e.run(t, "sandbox", "rm", "--agent", alice)
		e.run(t, "sandbox", "rm", "--agent", alice, "--session", "m2")
	})
	call := func(token, method, path string, body any) (int, []byte) {
		t.Helper()
		var raw []byte
		if body != nil {
			raw = jsonBody(body)
		}
		return filesCall(t, base, token, method, path, "application/json", raw)
	}
	exec := func(session, command string) string {
		t.Helper()
		code, body := call(filesToolToken, "POST", "/v1/tools/exec", map[string]any{"command": command, "agentId": alice, "sessionKey": session})
		if code != 200 || !strings.Contains(string(body), `"status":"completed"`) {
			t.Fatalf("exec %q: %d %s", command, code, body)
		}
		var res struct {
			Details struct {
				Aggregated string `json:"aggregated"`
			} `json:"details"`
		}
		if err := json.Unmarshal(body, &res); err != nil {
			t.Fatalf("exec %q: %v: %s", command, err, body)
		}
		return res.Details.Aggregated
	}

	code, body := call(filesToolToken, "POST", "/v1/sandboxes", map[string]any{"agentId": alice, "sessionKey": "s1"})
	if code != http.StatusCreated {
		t.Fatalf("create: %d %s", code, body)
	}
	a := decodeInto[sandboxObject](t, "create", body)
	exec("s1", "head -c 100000 /dev/urandom > /workspace/r.bin; head -c 1000 /dev/urandom > /tmp/t.bin")
	sums := "cd / && sha256sum workspace/r.bin tmp/t.bin | tr -s ' ' | tr ' ' =" // one word per file
	want := exec("s1", sums)
	wantSums := strings.Fields(want)
	if len(wantSums) != 2 {
		t.Fatalf("sums: %s", want)
	}

	code, body = call(filesToolToken, "POST", "/v1/sandboxes/"+a.ID+"/snapshots", map[string]any{"name": "base"})
	if code != http.StatusCreated || !strings.Contains(string(body), `"name":"base"`) || !strings.Contains(string(body), `"method":`) {
		t.Fatalf("snapshot: %d %s", code, body)
	}
	if r := e.run(t, "--json", "sandbox", "snapshot", alice, "--session", "s1", "--name", "cli"); r.code != 0 || !strings.Contains(r.stdout, `"name": "cli"`) {
		t.Fatalf("CLI snapshot: %+v", r)
	}
	if r := e.run(t, "sandbox", "snapshots", alice, "--session", "s1"); r.code != 0 || !strings.Contains(r.stdout, "base") || !strings.Contains(r.stdout, "cli") {
		t.Fatalf("CLI snapshots: %+v", r)
	}
	if code, body := call(filesToolToken, "GET", "/v1/sandboxes/"+a.ID+"/snapshots", nil); code != 200 || len(decodeInto[[]map[string]any](t, "list", body)) != 2 {
		t.Fatalf("list: %d %s", code, body)
	}
	if r := e.run(t, "sandbox", "explain", "--agent", alice, "--session", "s1"); r.code != 0 || !strings.Contains(r.stdout, "snapshots:") {
		t.Fatalf("explain: %+v", r)
	}

	exec("s1", "rm /workspace/r.bin; echo x > /tmp/t.bin")
	code, body = call(filesToolToken, "POST", "/v1/sandboxes/"+a.ID+"/rollback", map[string]any{"snapshot": "base"})
	if code != 200 {
		t.Fatalf("rollback: %d %s", code, body)
	}
	a = decodeInto[sandboxObject](t, "rollback", body)
	if got := exec("s1", sums); !strings.Contains(got, wantSums[0]) || !strings.Contains(got, wantSums[1]) {
		t.Fatalf("after rollback: %s, want %v", got, wantSums)
	}

	// An agent token forks into its own agent only, and never reaches
	// another agent's sandbox.
	if code, body := call(filesAliceToken, "POST", "/v1/sandboxes/"+a.ID+"/fork", map[string]any{"agentId": bob, "snapshot": "base"}); code != http.StatusForbidden {
		t.Fatalf("fork into another agent: %d %s", code, body)
	}
	code, body = call(filesAliceToken, "POST", "/v1/sandboxes/"+a.ID+"/fork", map[string]any{"sessionKey": "s2", "snapshot": "base"})
	if code != http.StatusCreated {
		t.Fatalf("fork: %d %s", code, body)
	}
	if f := decodeInto[sandboxObject](t, "fork", body); f.AgentID != alice || f.ID == a.ID {
		t.Fatalf("fork: %+v", f)
	}
	if got := exec("s2", sums); !strings.Contains(got, wantSums[0]) || !strings.Contains(got, wantSums[1]) {
		t.Fatalf("fork: %s, want %v", got, wantSums)
	}
	code, body = call(filesToolToken, "POST", "/v1/sandboxes", map[string]any{"agentId": bob})
	if code != http.StatusCreated {
		t.Fatalf("create bob: %d %s", code, body)
	}
	b := decodeInto[sandboxObject](t, "create", body)
	for _, req := range [][2]string{{"POST", "/snapshots"}, {"GET", "/snapshots"}, {"POST", "/fork"}, {"POST", "/rollback"}} {
		var body any
		if req[1] == "/rollback" {
			body = map[string]any{"snapshot": "base"}
		}
		if code, got := call(filesAliceToken, req[0], "/v1/sandboxes/"+b.ID+req[1], body); code != http.StatusNotFound {
			t.Errorf("alice %s %s on bob's sandbox: %d %s", req[0], req[1], code, got)
		}
	}

	if code, body := call(filesToolToken, "DELETE", "/v1/sandboxes/"+a.ID+"/snapshots/cli", nil); code != 200 {
		t.Fatalf("delete snapshot: %d %s", code, body)
	}
	if code, _ := call(filesToolToken, "DELETE", "/v1/sandboxes/"+a.ID+"/snapshots/cli", nil); code != http.StatusNotFound {
		t.Fatalf("delete twice: %d", code)
	}

	// MCP, an agent's session (agent token): snapshot, fork into its own
	// agent only, rollback.
	if code, body := call(filesToolToken, "POST", "/v1/sandboxes", map[string]any{"agentId": alice}); code != http.StatusCreated {
		t.Fatalf("create alice's agent sandbox: %d %s", code, body)
	}
	cs := mcpSession(t, base, filesAliceToken)
	if names := mcpToolNames(t, cs); !names["snapshot"] || !names["rollback"] || !names["fork"] {
		t.Fatalf("MCP tools: %v", names)
	}
	mcall := func(name string, args map[string]any) (bool, string) {
		t.Helper()
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return res.IsError, mcpText(res)
	}
	if isErr, text := mcall("snapshot", map[string]any{"name": "m1"}); isErr || !strings.Contains(text, "Snapshot m1") {
		t.Fatalf("MCP snapshot: %s", text)
	}
	if isErr, text := mcall("fork", map[string]any{"snapshot": "m1", "newAgentId": bob}); !isErr || !strings.Contains(text, "only into its own agent") {
		t.Fatalf("MCP fork into bob: %v %s", isErr, text)
	}
	if isErr, text := mcall("fork", map[string]any{"snapshot": "m1", "newSessionKey": "m2"}); isErr || !strings.Contains(text, "Forked into") {
		t.Fatalf("MCP fork: %s", text)
	}
	if isErr, text := mcall("rollback", map[string]any{"snapshot": "m1"}); isErr || !strings.Contains(text, "Rolled back") {
		t.Fatalf("MCP rollback: %s", text)
	}
	if isErr, text := mcall("rollback", map[string]any{"snapshot": "nope"}); !isErr || !strings.Contains(text, "no snapshot") {
		t.Fatalf("MCP rollback to a missing snapshot: %v %s", isErr, text)
	}

	want2 := map[string]bool{"snapshotted": false, "rolled-back": false, "forked": false, "snapshot-removed": false}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", base+"/v1/events?since=0", nil)
	req.Header.Set("Authorization", "Bearer "+filesToolToken)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			var ev struct {
				Type    string         `json:"type"`
				Details map[string]any `json:"details"`
			}
			if json.Unmarshal(sc.Bytes(), &ev) == nil && ev.Type == "sandbox" {
				switch action := fmt.Sprint(ev.Details["action"]); action {
				case "snapshotted", "snapshot-removed", "rolled-back":
					if ev.Details["snapshot"] == nil {
						t.Errorf("%s event without details.snapshot: %v", action, ev.Details)
					}
					want2[action] = true
				case "forked":
					want2[action] = true
				}
			}
			done := true
			for _, seen := range want2 {
				done = done && seen
			}
			if done {
				break
			}
		}
		resp.Body.Close()
	}
	for action, seen := range want2 {
		if !seen {
			t.Errorf("no sandbox event with action %s", action)
		}
	}
}
