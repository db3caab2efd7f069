package main_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxctl/sandboxctl/api"
)

// TestSecurityAgentPinnedClientSeesOnlyItsAgent replays the default of
// issue 12 through a real daemon on TCP: a client holding alice's agent
// token reads /v1/approvals and /v1/events; bob's approval request (its
// command, cwd and env) and bob's events never reach it, and an exec that
// claims to be bob runs as alice.
func TestSecurityAgentPinnedClientSeesOnlyItsAgent(t *testing.T) {
	e := guardEnv(t, "")
	const aliceTok = "alice-agent-token-0123456789"
	if err := os.WriteFile(filepath.Join(e.state, "agent-tokens.json"), []byte(`{"alice":"`+aliceTok+`"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	base := serveTCP(t, e, "SANDBOXCTL_TOKEN=tool-token-0123456789abcdef")
	call := func(method, path string, body any) (int, []byte) {
		t.Helper()
		return callTCP(t, base, aliceTok, method, path, body)
	}

	// alice follows the event stream from now on.
	req, _ := http.NewRequestWithContext(t.Context(), "GET", base+"/v1/events", nil)
	req.Header.Set("Authorization", "Bearer "+aliceTok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("events: %v %v", resp, err)
	}
	defer resp.Body.Close()
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()

	// bob (a person's CLI on the socket, unpinned) asks for approval with a
	// secret in its env; then alice does.
	dir := t.TempDir()
	d := execJSON(t, e, "--agent", "bob", "--workdir", dir, "--env", "BOB_SECRET=hunter2", "--", "touch", filepath.Join(dir, "bob"))
	if d.Status != "approval-pending" {
		t.Fatalf("bob: %v", d)
	}
	code, raw := call("POST", "/v1/tools/exec", map[string]any{"command": "touch " + filepath.Join(dir, "alice"), "agentId": "bob", "workdir": dir})
	if code != http.StatusOK || !strings.Contains(string(raw), "approval-pending") {
		t.Fatalf("alice's exec: %d %s", code, raw)
	}

	// The stream shows alice's approval event, never bob's.
	timeout := time.After(20 * time.Second)
	for got := false; !got; {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("event stream ended")
			}
			if strings.Contains(l, `"bob"`) || strings.Contains(l, "hunter2") {
				t.Fatalf("alice's stream carries bob's event: %s", l)
			}
			got = strings.Contains(l, `"agentId":"alice"`) && strings.Contains(l, "approval")
		case <-timeout:
			t.Fatal("alice's approval event did not arrive")
		}
	}

	code, raw = call("GET", "/v1/approvals", nil)
	if code != http.StatusOK || strings.Contains(string(raw), "bob") || strings.Contains(string(raw), "hunter2") || !strings.Contains(string(raw), `"agentId":"alice"`) {
		t.Fatalf("alice's approvals list: %d %s", code, raw)
	}
	// The daemon-wide session list shows alice her own sessions only; the
	// tool token (an operator) sees every agent's, or one agent's on asking.
	code, raw = call("GET", "/v1/sessions?agent=bob", nil)
	if code != http.StatusOK || strings.Contains(string(raw), `"bob"`) || !strings.Contains(string(raw), `"agentId":"alice"`) {
		t.Fatalf("alice's session list: %d %s", code, raw)
	}
	code, raw = callTCP(t, base, "tool-token-0123456789abcdef", "GET", "/v1/sessions", nil)
	if code != http.StatusOK || !strings.Contains(string(raw), `"agentId":"bob"`) || !strings.Contains(string(raw), `"agentId":"alice"`) {
		t.Fatalf("the operator's session list: %d %s", code, raw)
	}
	code, raw = callTCP(t, base, "tool-token-0123456789abcdef", "GET", "/v1/sessions?agent=bob", nil)
	if code != http.StatusOK || !strings.Contains(string(raw), `"agentId":"bob"`) || strings.Contains(string(raw), `"alice"`) {
		t.Fatalf("the operator's list of bob's sessions: %d %s", code, raw)
	}
	// Nor can the agent token decide, or reach other endpoints.
	if code, raw := call("POST", "/v1/approvals/"+d.ApprovalID, map[string]string{"decision": "allow-once"}); code == http.StatusOK {
		t.Fatalf("alice decided bob's approval: %s", raw)
	}
	// (Its own agent's sandboxes it may list and change: TestSandboxLifecycleCLIAndHTTP.)
	if code, _ := call("GET", "/metrics", nil); code != http.StatusForbidden {
		t.Fatalf("alice's /metrics: %d, want 403", code)
	}
}

// serveTCP runs the env's daemon in the foreground on a loopback port with
// the extra environment, and returns its base URL once it answers.
func serveTCP(t *testing.T, e *env, environ ...string) string {
	t.Helper()
	return serveTCPArgs(t, e, nil, environ...)
}

// serveTCPArgs is serveTCP with extra serve flags.
func serveTCPArgs(t *testing.T, e *env, args []string, environ ...string) string {
	t.Helper()
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	serve := exec.Command(binary, append([]string{"--state", e.state, "--config", e.config, "serve", "--listen", addr}, args...)...)
	serve.Env = append(os.Environ(), environ...)
	serve.Stderr = os.Stderr
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Gracefully, so the daemon also ends its host supervisor.
		_ = serve.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = serve.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = serve.Process.Kill()
			<-done
			t.Errorf("daemon did not stop on SIGTERM")
		}
	})
	base := "http://" + addr
	deadline := time.Now().Add(20 * time.Second)
	for {
		if resp, err := http.Get(base + "/healthz"); err == nil {
			resp.Body.Close()
			return base
		}
		if time.Now().After(deadline) {
			t.Fatal("daemon did not answer on TCP")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// callTCP sends one request with a bearer token and returns status and body.
func callTCP(t *testing.T, base, token, method, path string, body any) (int, []byte) {
	t.Helper()
	var b []byte
	if body != nil {
		var err error
		if b, err = json.Marshal(body); err != nil {
			t.Fatal(err)
		}
	}
	req, err := http.NewRequestWithContext(t.Context(), method, base+path, bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(resp.Body)
	return resp.StatusCode, buf.Bytes()
}

// TestSecurityTCPApprovalsNeedTheApproverToken: over TCP the tool token
// (what agent runtimes hold) cannot decide an approval; the approver token
// can. Neither token reaches the commands the daemon runs (before, every
// gateway command inherited SANDBOXCTL_TOKEN).
func TestSecurityTCPApprovalsNeedTheApproverToken(t *testing.T) {
	e := guardEnv(t, "")
	const tool, approver = "tool-token-0123456789abcdef", "approver-token-0123456789abcdef"
	base := serveTCP(t, e, "SANDBOXCTL_TOKEN="+tool, "SANDBOXCTL_APPROVER_TOKEN="+approver)
	dir := t.TempDir()
	marker := filepath.Join(dir, "M")
	code, raw := callTCP(t, base, tool, "POST", "/v1/tools/exec", map[string]any{"command": "touch " + marker, "workdir": dir})
	var res struct{ Details api.Details }
	if err := json.Unmarshal(raw, &res); code != http.StatusOK || err != nil || res.Details.Status != "approval-pending" {
		t.Fatalf("exec: %d %s", code, raw)
	}
	id := res.Details.ApprovalID
	if code, raw := callTCP(t, base, tool, "POST", "/v1/approvals/"+id, map[string]string{"decision": "allow-always"}); code != http.StatusUnauthorized {
		t.Fatalf("the tool token decided: %d %s", code, raw)
	}
	if st := approvalStatus(t, e, id); st != "pending" {
		t.Fatalf("status after the tool token tried: %q", st)
	}
	if code, raw := callTCP(t, base, approver, "POST", "/v1/approvals/"+id, map[string]string{"decision": "allow-once"}); code != http.StatusOK {
		t.Fatalf("the approver token: %d %s", code, raw)
	}
	if _, last := pollUntilDone(t, e, res.Details.SessionID); !strings.Contains(last, "exited with code 0") || !exists(marker) {
		t.Fatalf("approved command: %q", last)
	}

	// What a command sees of the daemon's environment.
	d := execJSON(t, e, "--ask", "off", "--security", "full", "--", "env")
	if d.Status == "approval-pending" {
		if r := e.run(t, "approvals", "resolve", d.ApprovalID, "allow-once"); r.code != 0 {
			t.Fatalf("resolve env: %+v", r)
		}
		out, _ := pollUntilDone(t, e, d.SessionID)
		d = api.Details{Aggregated: new(out)}
	}
	out := fmt.Sprint(*d.Aggregated)
	if strings.Contains(out, tool) || strings.Contains(out, approver) || !strings.Contains(out, "PATH=") {
		t.Fatalf("a command sees the daemon's tokens (or ran no env): %s", out)
	}
}
