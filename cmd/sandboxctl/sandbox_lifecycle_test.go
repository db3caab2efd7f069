package main_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/sandboxctl/sandboxctl/api"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sandboxctl/sandboxctl/internal/apiclient"
	"github.com/sandboxctl/sandboxctl/internal/apiclient/tcpclient"
	"github.com/sandboxctl/sandboxctl/internal/dockertest"
	"github.com/sandboxctl/sandboxctl/sandbox/sandboxconfig"
)

// lifecycleEnv is filesEnv with a template "small" and, when explicit,
// sandbox.explicit set.
func lifecycleEnv(t *testing.T, explicit bool, extra ...string) (*env, string, string) {
	t.Helper()
	dockertest.Require(t, sandboxconfig.DefaultConfig().Docker.Image)
	e, alice, bob := filesEnv(t)
	cfg := strings.Join(extra, "") + fmt.Sprintf("sandbox:\n  explicit: %v\n  workspaceRoot: %s\n  docker:\n    containerPrefix: sbxl-%d-\n"+
		"  templates:\n    small:\n      memory: 256m\n      pidsLimit: 64\n      env: {TPL: small-env}\n",
		explicit, filepath.Join(e.state, "ws"), time.Now().UnixNano()%1e6)
	if err := os.WriteFile(e.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return e, alice, bob
}

type sandboxObject struct {
	ID        string            `json:"id"`
	Name      string            `json:"name"`
	AgentID   string            `json:"agentId"`
	State     string            `json:"state"`
	Template  string            `json:"template"`
	Image     string            `json:"image"`
	Labels    map[string]string `json:"labels"`
	CreatedAt time.Time         `json:"createdAt"`
	ExpiresAt time.Time         `json:"expiresAt"`
}

func decodeInto[T any](t *testing.T, what string, b []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s: %v: %s", what, err, b)
	}
	return v
}

func jsonBody(v any) []byte { b, _ := json.Marshal(v); return b }

// TestSandboxLifecycleCLIAndHTTP drives the lifecycle through the CLI and
// the HTTP API of a real daemon and Engine: create from a template with
// labels and a TTL, list with filters and formats, pause (a command is
// refused until resume), extend, TTL expiry, delete with and without the
// workspace, an agent token held to its own agent, and bad input that
// changes nothing.
func TestSandboxLifecycleCLIAndHTTP(t *testing.T) {
	e, alice, bob := lifecycleEnv(t, false)
	base := serveFiles(t, e)
	carol := "carol" + alice
	t.Cleanup(func() {
		for _, a := range []string{alice, bob, carol} {
			e.run(t, "sandbox", "rm", "--agent", a)
		}
	})
	call := func(token, method, path string, body any) (int, []byte) {
		t.Helper()
		var raw []byte
		if body != nil {
			raw = jsonBody(body)
		}
		return filesCall(t, base, token, method, path, "application/json", raw)
	}

	// CLI create from a template, with labels and a TTL.
	r := e.run(t, "--json", "sandbox", "create", "--agent", bob, "--template", "small", "--label", "team=red", "--label", "tier=1", "--ttl", "1h")
	if r.code != 0 {
		t.Fatalf("sandbox create: %+v", r)
	}
	b := decodeInto[sandboxObject](t, "create", []byte(r.stdout))
	if b.ID == "" || b.Template != "small" || b.Labels["team"] != "red" || b.State != "running" || time.Until(b.ExpiresAt) < 50*time.Minute {
		t.Fatalf("created: %+v", b)
	}
	if r := e.run(t, "sandbox", "create", "--agent", bob, "--template", "small"); r.code == 0 || !strings.Contains(r.stderr, "has a sandbox already") {
		t.Fatalf("second create: %+v", r)
	}
	for _, bad := range [][]string{{"--template", "nope"}, {"--label", "no-equals"}, {"--ttl", "-1s"}} {
		if r := e.run(t, append([]string{"sandbox", "create", "--agent", carol}, bad...)...); r.code == 0 {
			t.Fatalf("create %v: %+v", bad, r)
		}
	}
	if r := e.run(t, "sandbox", "ls", "--filter", "agent="+carol, "--format", "{{.ID}}"); r.code != 0 || strings.TrimSpace(r.stdout) != "" {
		t.Fatalf("bad creates made a sandbox: %+v", r)
	}
	// The template's env is the container's (its limits: sandbox.TestObjectLifecycle).
	if r := e.run(t, "exec", "--agent", bob, "--", "echo $TPL"); r.code != 0 || strings.TrimSpace(r.stdout) != "small-env" {
		t.Fatalf("exec in the template's sandbox: %+v", r)
	}

	// HTTP create (201), conflict (409), bad input (400, nothing made).
	code, body := call(filesToolToken, "POST", "/v1/sandboxes", map[string]any{"agentId": carol, "labels": map[string]string{"team": "blue"}})
	if code != http.StatusCreated {
		t.Fatalf("POST /v1/sandboxes: %d %s", code, body)
	}
	c := decodeInto[sandboxObject](t, "POST", body)
	if c.ID == "" || c.Template != "default" || c.Labels["team"] != "blue" || !c.ExpiresAt.IsZero() {
		t.Fatalf("created over HTTP: %+v", c)
	}
	if code, body := call(filesToolToken, "POST", "/v1/sandboxes", map[string]any{"agentId": carol}); code != http.StatusConflict || !strings.Contains(string(body), "has a sandbox already") {
		t.Fatalf("second POST: %d %s", code, body)
	}
	_, before := call(filesToolToken, "GET", "/v1/sandboxes", nil)
	for _, bad := range []map[string]any{
		{"agentId": "nobody", "template": "nope"},
		{"agentId": "nobody", "labels": map[string]string{"bad key": "x"}},
		{"agentId": "nobody", "ttlSeconds": -5},
		{"agentId": "nobody", "ttlSeconds": 1 << 40},
		{"agentId": "nobody", "colour": "red"},
	} {
		if code, body := call(filesToolToken, "POST", "/v1/sandboxes", bad); code != http.StatusBadRequest {
			t.Errorf("POST %v: %d %s, want 400", bad, code, body)
		}
	}
	if _, after := call(filesToolToken, "GET", "/v1/sandboxes", nil); len(decodeInto[[]sandboxObject](t, "list", after)) != len(decodeInto[[]sandboxObject](t, "list", before)) {
		t.Fatalf("bad input changed the sandboxes: before %s after %s", before, after)
	}

	// List with filters: CLI and HTTP.
	if r := e.run(t, "sandbox", "ls", "--filter", "label=team=red", "--format", "{{.ID}} {{.Template}}"); strings.TrimSpace(r.stdout) != b.ID[:12]+" small" {
		t.Fatalf("ls --filter label=team=red: %+v", r)
	}
	if r := e.run(t, "sandbox", "ls", "--filter", "template=default", "--filter", "agent="+carol, "--format", "json"); !strings.Contains(r.stdout, c.ID) || strings.Contains(r.stdout, b.ID) {
		t.Fatalf("ls --filter template=default: %+v", r)
	}
	if r := e.run(t, "sandbox", "ls"); !strings.Contains(r.stdout, "team=red,tier=1") || !strings.Contains(r.stdout, "TEMPLATE") {
		t.Fatalf("ls table: %+v", r)
	}
	if code, body := call(filesToolToken, "GET", "/v1/sandboxes?label=team=blue", nil); code != 200 || len(decodeInto[[]sandboxObject](t, "list", body)) != 1 || !strings.Contains(string(body), c.ID) {
		t.Fatalf("GET ?label=team=blue: %d %s", code, body)
	}
	if code, _ := call(filesToolToken, "GET", "/v1/sandboxes?label=bad%20key=x", nil); code != http.StatusBadRequest {
		t.Fatalf("GET with a bad filter: %d", code)
	}
	code, body = call(filesToolToken, "GET", "/v1/sandboxes/"+b.ID[:12], nil)
	if d := decodeInto[struct {
		sandboxObject
		Explain map[string]any `json:"explain"`
	}](t, "detail", body); code != 200 || d.ID != b.ID || d.Template != "small" || d.Explain["recreate"] == nil || !strings.HasPrefix(d.Explain["recreate"].(string), "no") {
		t.Fatalf("GET detail: %d %s", code, body)
	}

	// Pause: a command is refused until resume.
	if r := e.run(t, "sandbox", "pause", b.ID[:12]); r.code != 0 || !strings.Contains(r.stdout, "paused") {
		t.Fatalf("pause: %+v", r)
	}
	code, body = call(filesToolToken, "POST", "/v1/tools/exec", map[string]any{"command": "echo ran", "agentId": bob})
	if code != http.StatusConflict || !strings.Contains(string(body), "paused") || strings.Contains(string(body), "ran\\n") {
		t.Fatalf("exec in a paused sandbox: %d %s", code, body)
	}
	if code, body := call(filesToolToken, "POST", "/v1/sandboxes/"+b.ID+"/resume", nil); code != 200 || decodeInto[sandboxObject](t, "resume", body).State != "running" {
		t.Fatalf("resume: %d %s", code, body)
	}
	if r := e.run(t, "exec", "--agent", bob, "--", "echo ran"); r.code != 0 || strings.TrimSpace(r.stdout) != "ran" {
		t.Fatalf("exec after resume: %+v", r)
	}
	if code, body := call(filesToolToken, "POST", "/v1/sandboxes/"+b.ID+"/pause", nil); code != 200 {
		t.Fatalf("HTTP pause: %d %s", code, body)
	}
	if r := e.run(t, "sandbox", "resume", b.Name); r.code != 0 {
		t.Fatalf("CLI resume: %+v", r)
	}

	// Extend.
	r = e.run(t, "--json", "sandbox", "extend", b.ID, "--ttl", "3h")
	if ext := decodeInto[sandboxObject](t, "extend", []byte(r.stdout)); r.code != 0 || time.Until(ext.ExpiresAt) < 2*time.Hour {
		t.Fatalf("extend: %+v", r)
	}
	if code, _ := call(filesToolToken, "POST", "/v1/sandboxes/"+b.ID+"/timeout", map[string]any{"ttlSeconds": 0}); code != http.StatusBadRequest {
		t.Fatalf("timeout 0: %d", code)
	}
	code, body = call(filesToolToken, "POST", "/v1/sandboxes/"+b.ID+"/timeout", map[string]any{"ttlSeconds": 7200})
	if ext := decodeInto[sandboxObject](t, "timeout", body); code != 200 || time.Until(ext.ExpiresAt) > 2*time.Hour || time.Until(ext.ExpiresAt) < time.Hour {
		t.Fatalf("timeout 7200: %d %s", code, body)
	}

	// An agent token sees and changes only its own agent's sandboxes.
	code, body = call(filesAliceToken, "POST", "/v1/sandboxes", map[string]any{"agentId": bob, "labels": map[string]string{"who": "alice"}})
	if a := decodeInto[sandboxObject](t, "alice's create", body); code != http.StatusCreated || a.AgentID != alice {
		t.Fatalf("alice's create (agentId %s asked): %d %s", bob, code, body)
	}
	if code, body := call(filesAliceToken, "GET", "/v1/sandboxes", nil); code != 200 || strings.Contains(string(body), b.ID) || !strings.Contains(string(body), `"`+alice+`"`) {
		t.Fatalf("alice's list: %d %s", code, body)
	}
	for _, req := range [][2]string{{"GET", ""}, {"DELETE", ""}, {"POST", "/pause"}, {"POST", "/resume"}} {
		if code, body := call(filesAliceToken, req[0], "/v1/sandboxes/"+b.ID+req[1], nil); code != http.StatusNotFound {
			t.Errorf("alice %s bob's sandbox%s: %d %s, want 404", req[0], req[1], code, body)
		}
	}
	if code, _ := call(filesAliceToken, "POST", "/v1/sandboxes/"+b.ID+"/timeout", map[string]any{"ttlSeconds": 1}); code != http.StatusNotFound {
		t.Errorf("alice extends bob's sandbox: %d, want 404", code)
	}
	if r := e.run(t, "sandbox", "ls", "--filter", "agent="+bob, "--format", "{{.State}}"); strings.TrimSpace(r.stdout) != "running" {
		t.Fatalf("bob's sandbox after alice's attempts: %+v", r)
	}

	// Delete without the workspace (CLI), then with it (HTTP).
	wsOf := func(id string) string {
		t.Helper()
		_, body := call(filesToolToken, "GET", "/v1/sandboxes/"+id, nil)
		d := decodeInto[struct {
			Explain struct {
				Config struct {
					Layout struct {
						AgentDir string `json:"agentDir"`
					} `json:"layout"`
				} `json:"config"`
			} `json:"explain"`
		}](t, "detail", body)
		if d.Explain.Config.Layout.AgentDir == "" {
			t.Fatalf("no workspace in the detail: %s", body)
		}
		return d.Explain.Config.Layout.AgentDir
	}
	bws, cws := wsOf(b.ID), wsOf(c.ID)
	for _, a := range []string{bob, carol} {
		if r := e.run(t, "exec", "--agent", a, "--", "echo data > /workspace/f"); r.code != 0 {
			t.Fatalf("write in %s's workspace: %+v", a, r)
		}
	}
	if r := e.run(t, "sandbox", "rm", b.ID[:12]); r.code != 0 {
		t.Fatalf("rm: %+v", r)
	}
	if _, err := os.Stat(filepath.Join(bws, "f")); err != nil {
		t.Fatalf("rm without --workspace removed the workspace: %v", err)
	}
	if code, body := call(filesToolToken, "DELETE", "/v1/sandboxes/"+c.ID+"?workspace=true", nil); code != 200 || !strings.Contains(string(body), `"workspaceRemoved":true`) {
		t.Fatalf("DELETE ?workspace=true: %d %s", code, body)
	}
	if _, err := os.Stat(cws); !os.IsNotExist(err) {
		t.Fatalf("DELETE ?workspace=true left %s: %v", cws, err)
	}
	if code, _ := call(filesToolToken, "GET", "/v1/sandboxes/"+c.ID, nil); code != http.StatusNotFound {
		t.Fatalf("GET a deleted sandbox: %d", code)
	}

	// TTL expiry: the daemon removes the sandbox.
	code, body = call(filesToolToken, "POST", "/v1/sandboxes", map[string]any{"agentId": carol, "ttlSeconds": 2})
	if code != http.StatusCreated {
		t.Fatalf("create with a 2 s TTL: %d %s", code, body)
	}
	short := decodeInto[sandboxObject](t, "short", body)
	deadline := time.Now().Add(90 * time.Second)
	for {
		code, _ := call(filesToolToken, "GET", "/v1/sandboxes/"+short.ID, nil)
		if code == http.StatusNotFound {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the sandbox with a 2 s TTL is still there after 90 s (%d)", code)
		}
		time.Sleep(500 * time.Millisecond)
	}

	// Events of the lifecycle.
	want := map[string]bool{"created": false, "paused": false, "resumed": false, "extended": false, "removed": false, "expired": false}
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
				want[fmt.Sprint(ev.Details["action"])] = true
			}
			done := true
			for _, seen := range want {
				done = done && seen
			}
			if done {
				break
			}
		}
		resp.Body.Close()
	}
	for action, seen := range want {
		if !seen {
			t.Errorf("no sandbox event with action %s", action)
		}
	}

	// MCP: the sandbox tools are off unless mcp.sandboxLifecycle.
	if names := mcpToolNames(t, mcpSession(t, base, filesAliceToken)); names["sandbox_create"] || names["sandbox_delete"] || !names["exec"] {
		t.Fatalf("MCP tools without mcp.sandboxLifecycle: %v", names)
	}

	// The Go client.
	gc := tcpclient.New(base, filesToolToken, nil)
	gctx := t.Context()
	sb, err := gc.CreateSandbox(gctx, api.CreateSandboxRequest{AgentID: carol, Template: "small", Labels: map[string]string{"client": "go"}, TTLSeconds: 600})
	if err != nil || sb.ID == "" || sb.Template != "small" || sb.Labels["client"] != "go" || time.Until(sb.ExpiresAt) < 9*time.Minute {
		t.Fatalf("Go CreateSandbox: %+v %v", sb, err)
	}
	var apiErr *apiclient.APIError
	if _, err := gc.CreateSandbox(gctx, api.CreateSandboxRequest{AgentID: carol}); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusConflict {
		t.Fatalf("Go CreateSandbox twice: %v", err)
	}
	if _, err := gc.CreateSandbox(gctx, api.CreateSandboxRequest{AgentID: "nobody", TTLSeconds: -1}); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest {
		t.Fatalf("Go CreateSandbox with a negative TTL: %v", err)
	}
	if list, err := gc.ListSandboxes(gctx, apiclient.SandboxFilter{Labels: map[string]string{"client": "go"}, Template: "small"}); err != nil || len(list) != 1 || list[0].ID != sb.ID {
		t.Fatalf("Go ListSandboxes: %+v %v", list, err)
	}
	if got, err := gc.GetSandbox(gctx, sb.ID[:12]); err != nil || got.ID != sb.ID {
		t.Fatalf("Go GetSandbox: %+v %v", got, err)
	}
	if p, err := gc.PauseSandbox(gctx, sb.ID); err != nil || p.State != "paused" {
		t.Fatalf("Go PauseSandbox: %+v %v", p, err)
	}
	if r, err := gc.ResumeSandbox(gctx, sb.ID); err != nil || r.State != "running" {
		t.Fatalf("Go ResumeSandbox: %+v %v", r, err)
	}
	if x, err := gc.ExtendSandbox(gctx, sb.ID, 2*time.Hour); err != nil || time.Until(x.ExpiresAt) < 90*time.Minute {
		t.Fatalf("Go ExtendSandbox: %+v %v", x, err)
	}
	if err := gc.DeleteSandbox(gctx, sb.ID, true); err != nil {
		t.Fatalf("Go DeleteSandbox: %v", err)
	}
	if _, err := gc.GetSandbox(gctx, sb.ID); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound {
		t.Fatalf("Go GetSandbox after delete: %v", err)
	}
}

// TestSandboxExplicitOnly: with sandbox.explicit an agent's first command
// does not create its sandbox: the error names the scope and says how to
// create it; after `sandbox create` it runs.
func TestSandboxExplicitOnly(t *testing.T) {
	e, alice, _ := lifecycleEnv(t, true)
	base := serveFiles(t, e)
	t.Cleanup(func() { e.run(t, "sandbox", "rm", "--agent", alice) })
	code, body := filesCall(t, base, filesToolToken, "POST", "/v1/tools/exec", "application/json", jsonBody(map[string]any{"command": "echo ran", "agentId": alice}))
	if code == http.StatusOK || !strings.Contains(string(body), "agent:"+alice) || !strings.Contains(string(body), "sandbox.explicit") || !strings.Contains(string(body), "sandbox create") {
		t.Fatalf("implicit exec: %d %s", code, body)
	}
	if r := e.run(t, "sandbox", "ls", "--filter", "agent="+alice, "--format", "{{.ID}}"); strings.TrimSpace(r.stdout) != "" {
		t.Fatalf("the refused exec made a sandbox: %+v", r)
	}
	if r := e.run(t, "sandbox", "create", "--agent", alice); r.code != 0 {
		t.Fatalf("sandbox create: %+v", r)
	}
	if r := e.run(t, "exec", "--agent", alice, "--", "echo ran"); r.code != 0 || strings.TrimSpace(r.stdout) != "ran" {
		t.Fatalf("exec after create: %+v", r)
	}
}

// bearerTransport adds a bearer token to every request.
type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// mcpSession connects to the daemon's /mcp over TCP with token.
func mcpSession(t *testing.T, base, token string) *mcp.ClientSession {
	t.Helper()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(t.Context(),
		&mcp.StreamableClientTransport{Endpoint: base + "/mcp", HTTPClient: &http.Client{Transport: bearerTransport{token}}, DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func mcpToolNames(t *testing.T, cs *mcp.ClientSession) map[string]bool {
	t.Helper()
	res, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, tool := range res.Tools {
		names[tool.Name] = true
	}
	return names
}

func mcpText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// TestSandboxMCPLifecycle: with mcp.sandboxLifecycle, an agent's MCP
// session (agent token) creates, describes and deletes its own sandbox,
// and never another agent's; without it the tools are not offered.
func TestSandboxMCPLifecycle(t *testing.T) {
	e, alice, bob := lifecycleEnv(t, false, "mcp:\n  sandboxLifecycle: true\n")
	base := serveFiles(t, e)
	t.Cleanup(func() {
		e.run(t, "sandbox", "rm", "--agent", alice)
		e.run(t, "sandbox", "rm", "--agent", bob)
	})
	cs := mcpSession(t, base, filesAliceToken)
	if names := mcpToolNames(t, cs); !names["sandbox_create"] || !names["sandbox_info"] || !names["sandbox_delete"] {
		t.Fatalf("tools: %v", names)
	}
	call := func(name string, args map[string]any) *mcp.CallToolResult {
		t.Helper()
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return res
	}
	// Bob's sandbox, made by the operator: alice's tools never reach it.
	if r := e.run(t, "sandbox", "create", "--agent", bob, "--label", "owner=bob"); r.code != 0 {
		t.Fatalf("create bob's: %+v", r)
	}
	if res := call("sandbox_info", map[string]any{"agentId": bob}); !res.IsError || !strings.Contains(mcpText(res), "no sandbox for scope agent:"+alice) {
		t.Fatalf("alice's sandbox_info naming bob: %+v %s", res, mcpText(res))
	}
	if res := call("sandbox_create", map[string]any{"template": "nope"}); !res.IsError || !strings.Contains(mcpText(res), "nope") {
		t.Fatalf("sandbox_create with an unknown template: %s", mcpText(res))
	}
	res := call("sandbox_create", map[string]any{"agentId": bob, "template": "small", "labels": map[string]any{"via": "mcp"}, "ttlSeconds": 600})
	if res.IsError || !strings.Contains(mcpText(res), "template small") {
		t.Fatalf("sandbox_create: %s", mcpText(res))
	}
	if r := e.run(t, "sandbox", "ls", "--filter", "label=via=mcp", "--format", "{{.Agent}} {{.Template}}"); strings.TrimSpace(r.stdout) != alice+" small" {
		t.Fatalf("the MCP-made sandbox: %+v", r)
	}
	if res := call("sandbox_create", nil); !res.IsError || !strings.Contains(mcpText(res), "has a sandbox already") {
		t.Fatalf("sandbox_create twice: %s", mcpText(res))
	}
	if res := call("sandbox_info", nil); res.IsError || !strings.Contains(mcpText(res), "expires") {
		t.Fatalf("sandbox_info: %s", mcpText(res))
	}
	if res := call("sandbox_delete", map[string]any{"agentId": bob, "workspace": true}); res.IsError || !strings.Contains(mcpText(res), "Removed") {
		t.Fatalf("sandbox_delete: %s", mcpText(res))
	}
	if r := e.run(t, "sandbox", "ls", "--format", "{{.Agent}}"); strings.TrimSpace(r.stdout) != bob {
		t.Fatalf("after alice's sandbox_delete (naming bob): %+v", r)
	}

	// The stdio server of an agent (sandboxctl mcp --agent bob), through
	// the daemon's API.
	cmd := exec.Command(binary, "--state", e.state, "--config", e.config, "mcp", "--agent", bob)
	ss, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(t.Context(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	stdio := func(name string, args map[string]any) *mcp.CallToolResult {
		t.Helper()
		res, err := ss.CallTool(t.Context(), &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatalf("stdio %s: %v", name, err)
		}
		return res
	}
	if res := stdio("sandbox_info", map[string]any{"agentId": alice}); res.IsError || !strings.Contains(mcpText(res), "template default") {
		t.Fatalf("stdio sandbox_info: %s", mcpText(res))
	}
	if res := stdio("sandbox_create", nil); !res.IsError || !strings.Contains(mcpText(res), "has a sandbox already") {
		t.Fatalf("stdio sandbox_create: %s", mcpText(res))
	}
	if res := stdio("sandbox_delete", nil); res.IsError {
		t.Fatalf("stdio sandbox_delete: %s", mcpText(res))
	}
	if r := e.run(t, "sandbox", "ls", "--format", "{{.Agent}}"); strings.TrimSpace(r.stdout) != "" {
		t.Fatalf("after bob's stdio sandbox_delete: %+v", r)
	}
	if res := stdio("sandbox_info", nil); !res.IsError || !strings.Contains(mcpText(res), "no sandbox for scope agent:"+bob) {
		t.Fatalf("stdio sandbox_info after delete: %s", mcpText(res))
	}
}
