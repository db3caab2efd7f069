package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sandboxctl/sandboxctl/api"
	"github.com/sandboxctl/sandboxctl/internal/apiclient"
)

// memFiles is an in-memory Files keyed by agent and path (the claim under
// test is the MCP mapping and pinning, not file storage).
type memFiles map[string][]byte

func (m memFiles) ReadFile(_ context.Context, f api.FileRef, limit int64) ([]byte, error) {
	b, ok := m[f.AgentID+":"+f.Path]
	if !ok {
		return nil, &apiclient.APIError{StatusCode: 404, Message: "no such file"}
	}
	return readLimited(bytes.NewReader(b), f.Path, limit)
}

func (m memFiles) WriteFile(_ context.Context, f api.FileRef, data []byte) error {
	m[f.AgentID+":"+f.Path] = data
	return nil
}

func (m memFiles) ListFiles(_ context.Context, f api.FileRef) (api.FileList, error) {
	l := api.FileList{Path: f.Path}
	for k := range m {
		if agent, p, _ := strings.Cut(k, ":"); agent == f.AgentID && strings.HasPrefix(p, f.Path+"/") {
			l.Entries = append(l.Entries, api.FileInfo{Name: strings.TrimPrefix(p, f.Path+"/"), Type: "file"})
		}
	}
	return l, nil
}

func TestFileToolsPinned(t *testing.T) {
	files := memFiles{}
	ctx := context.Background()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := New(&recordingTools{}, Identity{AgentID: "owner"}, Options{Version: "test", Files: files}).Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	call := func(name string, args map[string]any) *mcp.CallToolResult {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if r := call("write_file", map[string]any{"path": "/workspace/a", "content": "AAEC", "encoding": "base64", "agentId": "intruder"}); r.IsError {
		t.Fatalf("write_file: %+v", r)
	}
	if got := files["owner:/workspace/a"]; !bytes.Equal(got, []byte{0, 1, 2}) || len(files) != 1 {
		t.Fatalf("written: %v", files)
	}
	if r := call("read_file", map[string]any{"path": "/workspace/a"}); r.IsError || r.Content[0].(*mcp.TextContent).Text != "AAEC" {
		t.Fatalf("read_file of binary: %+v", r)
	}
	files["owner:/workspace/t.txt"] = []byte("text\n")
	if r := call("read_file", map[string]any{"path": "/workspace/t.txt"}); r.Content[0].(*mcp.TextContent).Text != "text\n" {
		t.Fatalf("read_file of text: %+v", r)
	}
	if r := call("list_files", map[string]any{"path": "/workspace"}); !strings.Contains(r.Content[0].(*mcp.TextContent).Text, "t.txt") {
		t.Fatalf("list_files: %+v", r)
	}
	files["owner:/workspace/big"] = make([]byte, MaxReadBytes+1)
	if r := call("read_file", map[string]any{"path": "/workspace/big"}); !r.IsError || !strings.Contains(r.Content[0].(*mcp.TextContent).Text, "larger than") {
		t.Fatalf("read_file over the limit: %+v", r)
	}
}

// TestSecurityMCPSessionOfAnotherIdentity: over HTTP, a caller with one
// identity replays the Mcp-Session-Id of another identity's session (say
// it leaked). The request must not reach the other identity's pinned
// server: its write must not land in the other agent's files.
func TestSecurityMCPSessionOfAnotherIdentity(t *testing.T) {
	files := memFiles{}
	h := Handler(&recordingTools{}, func(r *http.Request) Identity {
		return Identity{AgentID: r.Header.Get("X-Test-Agent")}
	}, Options{Version: "test", Files: files})
	srv := httptest.NewServer(h)
	defer srv.Close()
	post := func(agent, session string, body any) (*http.Response, string) {
		t.Helper()
		raw, _ := json.Marshal(body)
		req, _ := http.NewRequest("POST", srv.URL, bytes.NewReader(raw))
		req.Header.Set("X-Test-Agent", agent)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
			req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, string(b)
	}
	resp, body := post("alice", "", map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize",
		"params": map[string]any{"protocolVersion": "2025-06-18", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "t", "version": "1"}}})
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != 200 || sid == "" {
		t.Fatalf("initialize: %d %s", resp.StatusCode, body)
	}
	post("alice", sid, map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"})
	// mallory replays alice's session id.
	resp, body = post("mallory", sid, map[string]any{"jsonrpc": "2.0", "id": 2, "method": "tools/call",
		"params": map[string]any{"name": "write_file", "arguments": map[string]any{"path": "/workspace/pwned", "content": "x"}}})
	if _, ok := files["alice:/workspace/pwned"]; ok {
		t.Fatalf("mallory wrote into alice's sandbox through her session (%d %s)", resp.StatusCode, body)
	}
	if resp.StatusCode == 200 {
		t.Fatalf("a replayed session id of another identity was served: %s", body)
	}
}
