package main_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandboxctl/sandboxctl/api"

	"github.com/google/jsonschema-go/jsonschema"
	"go.yaml.in/yaml/v3"
)

// openAPIDoc is api/openapi.yaml, decoded.
type openAPIDoc struct {
	raw   map[string]any
	paths map[string]map[string]any // path → method → operation
	defs  any                       // components.schemas, refs rewritten to #/$defs/
}

func loadOpenAPI(t *testing.T) *openAPIDoc {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "api", "openapi.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]any
	if err := yaml.Unmarshal(data, &raw); err != nil {
		t.Fatalf("openapi.yaml: %v", err)
	}
	if raw["openapi"] != "3.1.0" {
		t.Fatalf("openapi version %v, want 3.1.0", raw["openapi"])
	}
	doc := &openAPIDoc{raw: raw, paths: map[string]map[string]any{}}
	for p, item := range raw["paths"].(map[string]any) {
		doc.paths[p] = map[string]any{}
		for m, op := range item.(map[string]any) {
			if m != "parameters" {
				doc.paths[p][strings.ToUpper(m)] = op
			}
		}
	}
	comps := raw["components"].(map[string]any)
	b, _ := json.Marshal(comps["schemas"])
	b = bytes.ReplaceAll(b, []byte("#/components/schemas/"), []byte("#/$defs/"))
	_ = json.Unmarshal(b, &doc.defs)
	return doc
}

// responseSchema returns the JSON schema documented for an operation's
// status in the media type (application/json, application/x-ndjson: the
// schema of each line), nil when it documents none, and whether the status
// is documented.
func (d *openAPIDoc) responseSchema(t *testing.T, method, path string, status int, mediaType string) (*jsonschema.Resolved, bool) {
	t.Helper()
	op, ok := d.paths[path][method].(map[string]any)
	if !ok {
		t.Fatalf("%s %s is not in openapi.yaml", method, path)
	}
	resp, ok := op["responses"].(map[string]any)[fmt.Sprint(status)].(map[string]any)
	if !ok {
		return nil, false
	}
	if ref, ok := resp["$ref"].(string); ok {
		name := strings.TrimPrefix(ref, "#/components/responses/")
		resp = d.raw["components"].(map[string]any)["responses"].(map[string]any)[name].(map[string]any)
	}
	content, _ := resp["content"].(map[string]any)
	js, _ := content[mediaType].(map[string]any)
	if js == nil {
		return nil, true
	}
	b, _ := json.Marshal(js["schema"])
	b = bytes.ReplaceAll(b, []byte("#/components/schemas/"), []byte("#/$defs/"))
	var s map[string]any
	_ = json.Unmarshal(b, &s)
	s["$defs"] = d.defs
	b, _ = json.Marshal(s)
	var sch jsonschema.Schema
	if err := json.Unmarshal(b, &sch); err != nil {
		t.Fatalf("schema of %s %s %d: %v", method, path, status, err)
	}
	rs, err := sch.Resolve(nil)
	if err != nil {
		t.Fatalf("schema of %s %s %d: %v", method, path, status, err)
	}
	return rs, true
}

// TestOpenAPIMatchesServer checks api/openapi.yaml against a running
// daemon: every documented operation is called, answers with a documented
// status, and its JSON body validates against the documented schema.
func TestOpenAPIMatchesServer(t *testing.T) {
	doc := loadOpenAPI(t)
	e, alice, _ := filesEnv(t)
	base := serveFiles(t, e)
	t.Cleanup(func() {
		e.run(t, "sandbox", "rm", "--agent", alice)
		e.run(t, "sandbox", "rm", "--agent", alice+"-obj")
	})
	fq := func(p string, extra ...string) string {
		return "?agent=" + alice + "&path=" + p + strings.Join(extra, "")
	}
	type call struct {
		method, path, query, contentType string
		body                             any
		want                             int
	}
	calls := []call{
		{"GET", "/healthz", "", "", nil, 200},
		{"POST", "/v1/tools/exec", "", "", map[string]any{"command": "echo hi", "agentId": alice}, 200},
		{"POST", "/v1/tools/exec", "", "", map[string]any{"command": "true", "host": "elsewhere"}, 400},
		{"POST", "/v1/tools/process", "", "", map[string]any{"action": "list", "agentId": alice}, 200},
		{"POST", "/v1/tools/process", "", "", map[string]any{"action": "frobnicate"}, 400},
		{"GET", "/v1/sessions", "", "", nil, 200},
		{"GET", "/v1/sessions", "?agent=" + alice, "", nil, 200},
		{"GET", "/v1/sandboxes", "", "", nil, 200},
		{"GET", "/v1/sandboxes", "?label=team=red&state=running", "", nil, 200},
		{"GET", "/v1/sandboxes", "?state=sleepy", "", nil, 400},
		{"GET", "/v1/sandboxes/{name}", "", "", nil, 404},
		{"POST", "/v1/sandboxes", "", "", map[string]any{"agentId": alice + "-obj", "labels": map[string]string{"team": "red"}, "ttlSeconds": 600}, 201},
		{"POST", "/v1/sandboxes", "", "", map[string]any{"agentId": alice + "-obj"}, 409},
		{"POST", "/v1/sandboxes", "", "", map[string]any{"agentId": alice + "-bad", "template": "nope"}, 400},
		{"DELETE", "/v1/sandboxes/{name}", "", "", nil, 404},
		{"DELETE", "/v1/sandboxes/{name}", "?workspace=maybe", "", nil, 400},
		{"POST", "/v1/sandboxes/{name}/pause", "", "", nil, 404},
		{"POST", "/v1/sandboxes/{name}/resume", "", "", nil, 404},
		{"POST", "/v1/sandboxes/{name}/timeout", "", "", map[string]any{"ttlSeconds": 60}, 404},
		{"POST", "/v1/sandboxes/{name}/timeout", "", "", map[string]any{"ttlSeconds": -1}, 400},
		{"POST", "/v1/sandboxes/{name}/snapshots", "", "", map[string]any{"name": "s1"}, 404},
		{"POST", "/v1/sandboxes/{name}/snapshots", "", "", map[string]any{"nme": "s1"}, 400},
		{"GET", "/v1/sandboxes/{name}/snapshots", "", "", nil, 404},
		{"GET", "/v1/sandboxes/{name}/snapshots/{snapshot}", "", "", nil, 404},
		{"DELETE", "/v1/sandboxes/{name}/snapshots/{snapshot}", "", "", nil, 404},
		{"POST", "/v1/sandboxes/{name}/rollback", "", "", map[string]any{"snapshot": "s1"}, 404},
		{"POST", "/v1/sandboxes/{name}/rollback", "", "", map[string]any{"snapshot": "../x"}, 400},
		{"POST", "/v1/sandboxes/{name}/fork", "", "", map[string]any{"agentId": alice + "-fork"}, 404},
		{"POST", "/v1/sandboxes/{name}/fork", "", "", map[string]any{"snapshot": "a b"}, 400},
		{"POST", "/v1/previews", "", "", map[string]any{"agentId": alice, "port": 8080}, 201},
		{"POST", "/v1/previews", "", "", map[string]any{"agentId": alice, "port": 0}, 400},
		{"GET", "/v1/previews", "", "", nil, 200},
		{"DELETE", "/v1/previews/{id}", "", "", nil, 404},
		{"GET", "/preview/{id}/", "", "", nil, 404},
		{"GET", "/v1/approvals", "", "", nil, 200},
		{"POST", "/v1/approvals/{id}", "", "", map[string]any{"decision": "allow-once"}, 403}, // the tool token decides nothing
		{"PUT", "/v1/files", fq("/workspace/o.txt", "&mode=0640"), "application/octet-stream", "openapi", 200},
		{"GET", "/v1/files", fq("/workspace/o.txt"), "", nil, 200},
		{"GET", "/v1/files", fq("/workspace/none"), "", nil, 404},
		{"GET", "/v1/files/stat", fq("/workspace/o.txt"), "", nil, 200},
		{"GET", "/v1/files/list", fq("/workspace"), "", nil, 200},
		{"GET", "/v1/files/list", fq("relative"), "", nil, 400},
		{"DELETE", "/v1/files", fq("/workspace/o.txt"), "", nil, 200},
		{"DELETE", "/v1/files", fq("/workspace/o.txt"), "", nil, 404},
		{"GET", "/metrics", "", "", nil, 200},
		{"GET", "/v1/nodes", "", "", nil, 200},
		{"GET", "/v1/audit", "?kind=exec.request", "", nil, 200},
		{"GET", "/v1/audit", "?since=yesterday", "", nil, 400},
		{"POST", "/mcp", "", "application/json", map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize",
			"params": map[string]any{"protocolVersion": "2025-06-18", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "t", "version": "1"}}}, 200},
		{"GET", "/v1/events", "", "", nil, 200},
		{"POST", "/v1/tools/exec", "", "", map[string]any{"command": "echo out; echo err >&2; exit 3", "agentId": alice, "stream": true}, 200},
		{"POST", "/v1/tools/exec", "", "", map[string]any{"command": "true", "host": "elsewhere", "stream": true}, 400},
		{"GET", "/v1/sessions/{id}/stream", "?agent=" + alice, "", nil, 200},
		{"GET", "/v1/sessions/{id}/stream", "?agent=" + alice + "&from=-1", "", nil, 400},
		{"GET", "/v1/sessions/{id}/stream", "?agent=" + alice, "", nil, 404},
		{"POST", "/v1/sessions/{id}/stdin", "?agent=" + alice, "application/octet-stream", "\x00\xff", 400}, // it has exited
		{"POST", "/v1/sessions/{id}/stdin", "?agent=" + alice, "application/octet-stream", "x", 404},
		{"POST", "/v1/tools/exec", "", "", map[string]any{"command": "printf '\\000\\377'", "agentId": alice, "stream": true, "raw": true}, 200},
	}
	// bgID is a background session of alice's for the 200 of the session stream.
	var bgID string
	{
		raw, _ := json.Marshal(map[string]any{"command": "echo bg; exit 2", "agentId": alice, "background": true})
		req, err := http.NewRequestWithContext(t.Context(), "POST", base+"/v1/tools/exec", bytes.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+filesToolToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var res struct {
			Details struct {
				SessionID string `json:"sessionId"`
			} `json:"details"`
		}
		err = json.NewDecoder(resp.Body).Decode(&res)
		resp.Body.Close()
		if err != nil || res.Details.SessionID == "" {
			t.Fatalf("background exec: %v, session %q", err, res.Details.SessionID)
		}
		bgID = res.Details.SessionID
	}
	called := map[string]bool{}
	for _, c := range calls {
		var body io.Reader
		switch b := c.body.(type) {
		case nil:
		case string:
			body = strings.NewReader(b)
		default:
			raw, _ := json.Marshal(b)
			body = bytes.NewReader(raw)
		}
		id := "no-such-approval"
		if strings.HasPrefix(c.path, "/v1/sessions/{id}/") && c.want != 404 {
			id = bgID
		}
		urlPath := strings.NewReplacer("{id}", id, "{name}", "no-such-sandbox", "{snapshot}", "no-such-snapshot").Replace(c.path)
		req, err := http.NewRequestWithContext(t.Context(), c.method, base+urlPath+c.query, body)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+filesToolToken)
		if c.contentType != "" {
			req.Header.Set("Content-Type", c.contentType)
		}
		if c.path == "/mcp" {
			req.Header.Set("Accept", "application/json, text/event-stream")
		}
		client := http.DefaultClient
		if c.path == "/v1/events" {
			client = &http.Client{Timeout: 2 * time.Second}
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", c.method, c.path, err)
		}
		var got []byte
		if c.path != "/v1/events" {
			got, _ = io.ReadAll(resp.Body)
		}
		resp.Body.Close()
		called[c.method+" "+c.path] = true
		if resp.StatusCode != c.want {
			t.Errorf("%s %s%s: status %d, want %d: %.300s", c.method, c.path, c.query, resp.StatusCode, c.want, got)
			continue
		}
		if ct := resp.Header.Get("Content-Type"); ct == api.ContentTypeFrames {
			// A raw stream: binary frames, the first a JSON start frame.
			if sch, documented := doc.responseSchema(t, c.method, c.path, resp.StatusCode, ct); !documented || sch == nil {
				t.Errorf("%s %s %d: answered %s, not documented", c.method, c.path, resp.StatusCode, ct)
			}
			if len(got) < 5 || got[0] != api.FrameKindJSON {
				t.Errorf("%s %s: raw frames start with %.20q, want a JSON start frame", c.method, c.path, got)
			}
			continue
		}
		media := "application/json"
		if ct := resp.Header.Get("Content-Type"); strings.HasPrefix(ct, "application/x-ndjson") && c.path != "/v1/events" {
			media = "application/x-ndjson"
		}
		schema, documented := doc.responseSchema(t, c.method, c.path, resp.StatusCode, media)
		if !documented {
			t.Errorf("%s %s: status %d is not documented", c.method, c.path, resp.StatusCode)
			continue
		}
		if media == "application/x-ndjson" {
			if schema == nil {
				t.Errorf("%s %s %d: answered NDJSON, not documented", c.method, c.path, resp.StatusCode)
				continue
			}
			lines := strings.Split(strings.TrimSpace(string(got)), "\n")
			last := map[string]any{}
			for _, line := range lines {
				var inst any
				if err := json.Unmarshal([]byte(line), &inst); err != nil {
					t.Errorf("%s %s: line %q is not JSON: %v", c.method, c.path, line, err)
					continue
				}
				if err := schema.Validate(inst); err != nil {
					t.Errorf("%s %s %d: a frame does not match the documented schema: %v\n%s", c.method, c.path, resp.StatusCode, err, line)
				}
				last, _ = inst.(map[string]any)
			}
			// Streams of frames start and end with their own frames; a
			// listing (/v1/audit) is records only.
			wantLast, framed := map[string]string{"/v1/tools/exec": "result", "/v1/sessions/{id}/stream": "exit"}[c.path]
			if framed && (len(lines) < 2 || last["type"] != wantLast) {
				t.Errorf("%s %s: frames %q, want a start and last %q", c.method, c.path, lines, wantLast)
			}
			continue
		}
		if schema == nil || c.path == "/v1/events" || c.path == "/mcp" {
			continue
		}
		if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
			t.Errorf("%s %s: Content-Type %q, documented application/json", c.method, c.path, ct)
			continue
		}
		var inst any
		if err := json.Unmarshal(got, &inst); err != nil {
			t.Errorf("%s %s: body is not JSON: %v", c.method, c.path, err)
			continue
		}
		if err := schema.Validate(inst); err != nil {
			t.Errorf("%s %s %d: the body does not match the documented schema: %v\n%.500s", c.method, c.path, resp.StatusCode, err, got)
		}
	}
	for p, ops := range doc.paths {
		for m := range ops {
			if !called[m+" "+p] && m+" "+p != "POST /v1/shutdown" { // shutdown: the socket only; the daemon's own tests
				t.Errorf("%s %s is documented but not checked", m, p)
			}
		}
	}
}

// TestPythonClient runs clients/python/check_client.py (the standard
// library client, driven by python3) against a live daemon, over the unix
// socket and over TCP with the tool token.
func TestPythonClient(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Fatal("python3 is not installed: run scripts/toolchain.sh (make toolchain)")
	}
	e, alice, bob := filesEnv(t)
	base := serveFiles(t, e)
	t.Cleanup(func() {
		for _, a := range []string{alice, bob, alice + "-py", bob + "-py"} {
			e.run(t, "sandbox", "rm", "--agent", a)
		}
	})
	for _, args := range [][]string{
		{alice, "socket", filepath.Join(e.state, "sandboxctl.sock")},
		{bob, "tcp", base, filesToolToken},
	} {
		cmd := exec.Command(py, append([]string{"check_client.py"}, args...)...)
		cmd.Dir = filepath.Join("..", "..", "clients", "python")
		out, err := cmd.CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != "ok" {
			t.Fatalf("python client over %s: %v\n%s", args[1], err, out)
		}
	}
}

// TestTypeScriptClient installs clients/typescript with npm from the repo
// into a fresh project and runs its check (clients/typescript/test) with
// Node against a live daemon, holding an agent token.
func TestTypeScriptClient(t *testing.T) {
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed: run scripts/toolchain.sh (make toolchain)", tool)
		}
	}
	pkg, err := filepath.Abs(filepath.Join("..", "..", "clients", "typescript"))
	if err != nil {
		t.Fatal(err)
	}
	proj := t.TempDir()
	if err := os.WriteFile(filepath.Join(proj, "package.json"), []byte(`{"name":"tsclient-check","private":true,"type":"module"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	install := exec.Command("npm", "install", "--no-audit", "--no-fund", "--install-links", pkg)
	install.Dir = proj
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("npm install %s: %v\n%s", pkg, err, out)
	}
	check, err := os.ReadFile(filepath.Join(pkg, "test", "check.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(proj, "check.mjs"), check, 0o644); err != nil {
		t.Fatal(err)
	}
	e, alice, _ := filesEnv(t)
	base := serveFiles(t, e)
	t.Cleanup(func() {
		e.run(t, "sandbox", "rm", "--agent", alice)
		e.run(t, "sandbox", "rm", "--agent", alice+"-obj")
	})
	cmd := exec.Command("node", "check.mjs", base, filesAliceToken, alice)
	cmd.Dir = proj
	out, err := cmd.CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "ok" {
		t.Fatalf("TypeScript client: %v\n%s", err, out)
	}
}
