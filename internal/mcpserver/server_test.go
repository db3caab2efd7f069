package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/sandboxctl/sandboxctl/sessions/toolapi"

	"github.com/sandboxctl/sandboxctl/api"
	"github.com/sandboxctl/sandboxctl/vocab"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// recordingTools answers like a Manager and records what reached it. A fake
// is fine here: the claim under test is the MCP mapping, not execution.
type recordingTools struct {
	mu    sync.Mutex
	execs []api.ExecParams
	procs []api.ProcessParams
}

func (r *recordingTools) Exec(_ context.Context, p api.ExecParams) (api.Result, error) {
	r.mu.Lock()
	r.execs = append(r.execs, p)
	r.mu.Unlock()
	if strings.TrimSpace(p.Command) == "" {
		return api.Result{}, fmt.Errorf("%w: Provide a command to start.", toolapi.ErrInvalidInput)
	}
	return api.Result{
		Content: []api.Content{{Type: "text", Text: "hi\n"}},
		Details: api.Details{Status: "completed", ExitCode: api.Code(0), Aggregated: new("hi\n")},
	}, nil
}

func (r *recordingTools) Process(_ context.Context, p api.ProcessParams) (api.Result, error) {
	r.mu.Lock()
	r.procs = append(r.procs, p)
	r.mu.Unlock()
	return api.Result{Content: []api.Content{{Type: "text", Text: "No session found for " + p.SessionID}},
		Details: api.Details{Status: "failed", Error: "not_found"}}, nil
}

func connect(t *testing.T, tools Tools, id Identity) *mcp.ClientSession {
	t.Helper()
	return connectWith(t, tools, id, Options{Version: "test"})
}

// connectWith connects a client to a server built with opts; both end
// with the test.
func connectWith(t *testing.T, tools Tools, id Identity, opts Options) *mcp.ClientSession {
	t.Helper()
	ctx := context.Background()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := New(tools, id, opts).Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func TestToolsListedWithSchemas(t *testing.T) {
	cs := connect(t, &recordingTools{}, Identity{})
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, tool := range res.Tools {
		names[tool.Name] = true
		if tool.InputSchema == nil {
			t.Errorf("%s has no input schema", tool.Name)
		}
	}
	if !names["exec"] || !names["process"] || len(names) != 2 {
		t.Fatalf("tools = %v", names)
	}
}

func TestCallsMapToToolResults(t *testing.T) {
	tests := []struct {
		name     string
		tool     string
		args     map[string]any
		id       Identity
		wantText string
		wantErr  bool
		check    func(t *testing.T, r *recordingTools)
	}{
		{"exec completed", "exec", map[string]any{"command": "echo hi", "agentId": "a1"}, Identity{}, "hi\n", false,
			func(t *testing.T, r *recordingTools) {
				if r.execs[0].AgentID != "a1" {
					t.Errorf("agentId not passed: %+v", r.execs[0])
				}
			}},
		{"identity pinned", "exec", map[string]any{"command": "echo hi", "agentId": "intruder", "sessionKey": "x"}, Identity{AgentID: "owner"}, "hi\n", false,
			func(t *testing.T, r *recordingTools) {
				if r.execs[0].AgentID != "owner" || r.execs[0].SessionKey != "" {
					t.Errorf("identity not pinned: %+v", r.execs[0])
				}
			}},
		{"bad input is a tool error", "exec", map[string]any{"command": "  "}, Identity{}, "Provide a command to start.", true, nil},
		{"process unknown id", "process", map[string]any{"action": "poll", "sessionId": "nope"}, Identity{}, "No session found for nope", false,
			func(t *testing.T, r *recordingTools) {
				if r.procs[0].Action != "poll" {
					t.Errorf("action lost: %+v", r.procs[0])
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recordingTools{}
			cs := connect(t, rec, tt.id)
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tt.tool, Arguments: tt.args})
			if err != nil {
				t.Fatal(err)
			}
			if res.IsError != tt.wantErr {
				t.Errorf("IsError = %v", res.IsError)
			}
			if len(res.Content) == 0 {
				t.Fatal("no content")
			}
			text := res.Content[0].(*mcp.TextContent).Text
			if !strings.Contains(text, tt.wantText) {
				t.Errorf("text = %q, want %q", text, tt.wantText)
			}
			if tt.check != nil {
				tt.check(t, rec)
			}
		})
	}
}

func TestUnknownFieldRejected(t *testing.T) {
	cs := connect(t, &recordingTools{}, Identity{})
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "exec", Arguments: map[string]any{"command": "x", "bogus": 1}})
	if err == nil && !res.IsError {
		t.Fatal("unknown field accepted")
	}
}

// TestSchemasDescribeFields: every advertised field has a description,
// the closed vocabularies are enums, whole numbers are integers, and a
// pinned server does not advertise the fields it replaces.
func TestSchemasDescribeFields(t *testing.T) {
	for _, id := range []Identity{{}, {AgentID: "owner"}} {
		cs := connect(t, &recordingTools{}, id)
		res, err := cs.ListTools(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, tool := range res.Tools {
			raw, _ := json.Marshal(tool.InputSchema)
			var s struct {
				Properties map[string]struct {
					Type        any    `json:"type"`
					Description string `json:"description"`
					Enum        []any  `json:"enum"`
				} `json:"properties"`
			}
			if err := json.Unmarshal(raw, &s); err != nil {
				t.Fatal(err)
			}
			for name, p := range s.Properties {
				if p.Description == "" {
					t.Errorf("%s.%s has no description", tool.Name, name)
				}
				if integerFields[name] && p.Type != "integer" {
					t.Errorf("%s.%s type %v, want integer", tool.Name, name, p.Type)
				}
			}
			_, hasAgent := s.Properties["agentId"]
			if hasAgent == (id.AgentID != "") {
				t.Errorf("pinned=%v: %s advertises agentId=%v", id.AgentID != "", tool.Name, hasAgent)
			}
			want := map[string]string{"exec": "host", "process": "action"}[tool.Name]
			if want != "" && fmt.Sprint(s.Properties[want].Enum) != fmt.Sprint(enumsOf(want)) {
				t.Errorf("%s.%s enum = %v", tool.Name, want, s.Properties[want].Enum)
			}
			if tool.Name == "exec" && (len(s.Properties["security"].Enum) != 3 || len(s.Properties["ask"].Enum) != 3) {
				t.Errorf("exec security/ask enums: %s", raw)
			}
		}
	}
	// Whole numbers only, and an enum is enforced.
	cs := connect(t, &recordingTools{}, Identity{})
	for _, args := range []map[string]any{
		{"command": "x", "yieldMs": 1.5},
		{"command": "x", "host": "elsewhere"},
	} {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "exec", Arguments: args})
		if err == nil && !res.IsError {
			t.Errorf("%v accepted", args)
		}
	}
}

func enumsOf(name string) []any {
	var out []any
	for _, v := range enums[name] {
		out = append(out, v)
	}
	return out
}

// TestPinnedRefusesUnknownFields: a pinned server accepts the fields it
// replaces but still refuses others.
func TestPinnedRefusesUnknownFields(t *testing.T) {
	rec := &recordingTools{}
	cs := connect(t, rec, Identity{AgentID: "owner"})
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "exec", Arguments: map[string]any{"command": "x", "bogus": 1}})
	if err == nil && !res.IsError {
		t.Fatal("unknown field accepted by a pinned server")
	}
	if len(rec.execs) != 0 {
		t.Fatalf("ran: %+v", rec.execs)
	}
}

// panickingTools panics in Process: the injected fault of a handler bug.
type panickingTools struct{ recordingTools }

func (*panickingTools) Process(context.Context, api.ProcessParams) (api.Result, error) {
	var s []string
	_ = s[len(s)-1] // index out of range, like the log window overflow of issue 25
	return api.Result{}, nil
}

// TestSecurityMCPHandlerPanicRecovered: a panic in a tool handler runs on
// the SDK's goroutine, where nothing recovered it and the process serving
// MCP (the daemon, at /mcp) died (issue 25 finding 11). Now the call
// answers an error, the panic is logged with its stack, and the same
// session goes on serving.
func TestSecurityMCPHandlerPanicRecovered(t *testing.T) {
	var mu sync.Mutex
	var logged []string
	logf := func(format string, args ...any) {
		mu.Lock()
		logged = append(logged, fmt.Sprintf(format, args...))
		mu.Unlock()
	}
	ctx := context.Background()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := New(&panickingTools{}, Identity{}, Options{Version: "test", Logf: logf}).Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "process", Arguments: map[string]any{"action": "list"}})
	if err == nil || !strings.Contains(err.Error(), "internal error in tools/call") {
		t.Fatalf("a panicking tool answered %v, want an internal error", err)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "exec", Arguments: map[string]any{"command": "echo hi"}})
	if err != nil || res.IsError {
		t.Fatalf("the server stopped serving after a recovered panic: %v %+v", err, res)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(logged) != 1 || !strings.Contains(logged[0], "index out of range") || !strings.Contains(logged[0], "panickingTools") {
		t.Fatalf("logged %q, want the panic and its stack", logged)
	}
}

// execSchema lists exec's advertised properties and host enum for a
// server built with id and policy.
func execSchema(t *testing.T, id Identity, policy Policy) (props map[string]bool, hosts []string) {
	t.Helper()
	ctx := context.Background()
	cs := connectWith(t, &recordingTools{}, id, Options{Version: "test", Policy: policy})
	res, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range res.Tools {
		if tool.Name != "exec" {
			continue
		}
		raw, _ := json.Marshal(tool.InputSchema)
		var s struct {
			Properties map[string]struct {
				Enum []string `json:"enum"`
			} `json:"properties"`
		}
		if err := json.Unmarshal(raw, &s); err != nil {
			t.Fatal(err)
		}
		props = map[string]bool{}
		for name := range s.Properties {
			props[name] = true
		}
		return props, s.Properties["host"].Enum
	}
	t.Fatal("no exec tool")
	return nil, nil
}

// TestPinnedSchemaFollowsPolicy: a pinned server offers only the exec
// choices its configuration lets the agent use; an unpinned one offers all.
func TestPinnedSchemaFollowsPolicy(t *testing.T) {
	owner := Identity{AgentID: "owner"}
	for _, c := range []struct {
		name     string
		id       Identity
		policy   Policy
		hosts    string
		elevated bool
		node     bool
	}{
		{"unpinned", Identity{}, Policy{Host: vocab.HostSandbox}, "[sandbox gateway node]", true, true},
		{"pinned, policy unknown", owner, Policy{}, "[sandbox gateway node]", true, true},
		{"pinned, sandbox, no elevated", owner, Policy{Host: vocab.HostSandbox}, "[sandbox]", false, false},
		{"pinned, elevated for another agent", owner, Policy{Host: vocab.HostSandbox, ElevatedEnabled: true, ElevatedAllowFrom: []string{"other"}}, "[sandbox]", false, false},
		{"pinned, elevated listed but disabled", owner, Policy{Host: vocab.HostSandbox, ElevatedAllowFrom: []string{"owner"}}, "[sandbox]", false, false},
		{"pinned, elevated for it", owner, Policy{Host: vocab.HostSandbox, ElevatedEnabled: true, ElevatedAllowFrom: []string{"owner"}}, "[sandbox gateway]", true, false},
		{"pinned, elevated for all, gateway host", owner, Policy{Host: vocab.HostGateway, ElevatedEnabled: true, ElevatedAllowFrom: []string{"*"}}, "[gateway]", true, false},
		{"pinned, node host", owner, Policy{Host: vocab.HostNode}, "[node]", false, true},
	} {
		props, hosts := execSchema(t, c.id, c.policy)
		if fmt.Sprint(hosts) != c.hosts || props["elevated"] != c.elevated || props["node"] != c.node {
			t.Errorf("%s: hosts %v elevated %v node %v; want %s %v %v", c.name, hosts, props["elevated"], props["node"], c.hosts, c.elevated, c.node)
		}
	}
}

// TestHiddenFieldStillReachesTheManager: a field a pinned server does not
// advertise is not refused as unknown; the manager decides (and answers as
// it does over HTTP).
func TestHiddenFieldStillReachesTheManager(t *testing.T) {
	rec := &recordingTools{}
	ctx := context.Background()
	cs := connectWith(t, rec, Identity{AgentID: "owner"}, Options{Version: "test", Policy: Policy{Host: vocab.HostSandbox}})
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "exec", Arguments: map[string]any{"command": "x", "elevated": true}}); err != nil {
		t.Fatal(err)
	}
	if len(rec.execs) != 1 || !rec.execs[0].Elevated {
		t.Fatalf("manager saw %+v", rec.execs)
	}
}

// noSandboxes lists the sandbox tools; they are not called here.
type noSandboxes struct{ Sandboxes }

// TestToolAnnotations: every tool says what a client may assume of it.
func TestToolAnnotations(t *testing.T) {
	cs := connectWith(t, &recordingTools{}, Identity{}, Options{Version: "test", Files: memFiles{}, Sandboxes: noSandboxes{}})
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	// read-only, destructive
	want := map[string][2]bool{
		"exec": {false, true}, "process": {false, true},
		"read_file": {true, false}, "list_files": {true, false}, "write_file": {false, true},
		"sandbox_create": {false, false}, "sandbox_info": {true, false}, "sandbox_delete": {false, true},
	}
	if len(res.Tools) != len(want) {
		t.Fatalf("%d tools listed, want %d", len(res.Tools), len(want))
	}
	for _, tool := range res.Tools {
		a, w := tool.Annotations, want[tool.Name]
		if a == nil || a.Title == "" {
			t.Errorf("%s has no annotations/title", tool.Name)
			continue
		}
		if a.ReadOnlyHint != w[0] {
			t.Errorf("%s readOnlyHint = %v", tool.Name, a.ReadOnlyHint)
		}
		if !w[0] && (a.DestructiveHint == nil || *a.DestructiveHint != w[1]) {
			t.Errorf("%s destructiveHint = %v, want %v", tool.Name, a.DestructiveHint, w[1])
		}
	}
}
