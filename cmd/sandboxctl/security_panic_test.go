package main_test

import (
	"context"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestSecurityMCPHugeLogWindowKeepsDaemon replays issue 25 finding 11: one
// MCP tools/call of process {"action":"log","offset":2^62,"limit":2^62}
// on the daemon's /mcp endpoint overflowed offset+limit into a negative
// slice bound, and the panic on the MCP SDK's handler goroutine ended the
// daemon. Now the window is clamped without overflow and the daemon serves
// on: the same call answers an empty page, a sane one still pages, and
// /healthz and the daemon's pid are alive afterwards.
func TestSecurityMCPHugeLogWindowKeepsDaemon(t *testing.T) {
	e := newEnv(t)
	if r := e.run(t, "exec", "--", "true"); r.code != 0 { // auto-starts the daemon
		t.Fatalf("exec: %+v", r)
	}
	pid, err := readPID(e.state)
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(e.state, "sandboxctl.sock")
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "attacker"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: "http://sandboxctl/mcp", HTTPClient: hc, DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "exec", Arguments: map[string]any{"command": "printf 'l1\\nl2\\nl3\\n'", "background": true}})
	if err != nil {
		t.Fatal(err)
	}
	id, _ := res.StructuredContent.(map[string]any)["sessionId"].(string)
	if id == "" {
		t.Fatalf("exec gave no session id: %+v", res.StructuredContent)
	}
	// Wait for it to end, so the log holds its three lines.
	for deadline := time.Now().Add(30 * time.Second); ; {
		res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "process", Arguments: map[string]any{"action": "poll", "sessionId": id, "timeoutMs": 5000}})
		if err != nil {
			t.Fatal(err)
		}
		if st, _ := res.StructuredContent.(map[string]any)["status"].(string); st != "running" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the printf session did not end")
		}
	}
	const huge = 1 << 62
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "process", Arguments: map[string]any{"action": "log", "sessionId": id, "offset": huge, "limit": huge}})
	if err != nil {
		t.Fatalf("the huge log window: %v (daemon alive: %v)", err, syscall.Kill(pid, 0) == nil)
	}
	if d, _ := res.StructuredContent.(map[string]any); d["offset"] != float64(3) || d["limit"] != float64(0) {
		t.Fatalf("huge window: details %v, want offset 3 (the end) and limit 0", res.StructuredContent)
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "process", Arguments: map[string]any{"action": "log", "sessionId": id, "offset": 1, "limit": huge}})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Content[0].(*mcp.TextContent).Text; got != "l2\nl3" {
		t.Fatalf("offset 1, huge limit: %q, want l2 and l3", got)
	}
	if err := syscall.Kill(pid, 0); err != nil {
		t.Fatalf("daemon pid %d is gone: %v", pid, err)
	}
	resp, err := hc.Get("http://sandboxctl/healthz")
	if err != nil {
		t.Fatalf("daemon no longer answers: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("healthz: %d", resp.StatusCode)
	}
	if r := e.run(t, "exec", "--", "echo", "still-serving"); !strings.Contains(r.stdout, "still-serving") {
		t.Fatalf("exec after the attack: %+v", r)
	}
}
