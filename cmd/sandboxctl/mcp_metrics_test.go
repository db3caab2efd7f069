package main_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestMCPOverStdio runs `sandboxctl mcp` as a real process and calls the
// exec and process tools through an MCP client; the daemon behind it is
// auto-started like for exec.
func TestMCPOverStdio(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.Command(binary, "--state", e.state, "--config", e.config, "mcp", "--agent", "mcp-agent")
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "exec", Arguments: map[string]any{"command": "echo from-mcp; exit 4"}})
	if err != nil {
		t.Fatal(err)
	}
	text := res.Content[0].(*mcp.TextContent).Text
	if !strings.Contains(text, "from-mcp") || !strings.Contains(text, "(Command exited with code 4)") {
		t.Fatalf("exec text = %q", text)
	}
	details, _ := res.StructuredContent.(map[string]any)
	if details["status"] != "completed" || details["exitCode"] != float64(4) {
		t.Fatalf("details = %v", res.StructuredContent)
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "process", Arguments: map[string]any{"action": "poll", "sessionId": "nope-nope"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Content[0].(*mcp.TextContent).Text; !strings.Contains(got, "No session found for nope-nope") {
		t.Fatalf("poll text = %q", got)
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "exec", Arguments: map[string]any{"command": ""}})
	if err != nil {
		t.Fatal(err)
	}
	if !res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "Provide a command to start.") {
		t.Fatalf("empty command: %+v", res)
	}
}

// TestMetricsEndpoint checks GET /metrics on the daemon socket counts calls.
func TestMetricsEndpoint(t *testing.T) {
	e := newEnv(t)
	// --json: one exec tool call, as an agent makes it (a waiting exec
	// runs a background session and follows it).
	if r := e.run(t, "exec", "--json", "--", "true"); r.code != 0 {
		t.Fatalf("exec: %+v", r)
	}
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", filepath.Join(e.state, "sandboxctl.sock"))
	}}}
	resp, err := hc.Get("http://sandboxctl/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !strings.Contains(string(body), `sandboxctl_exec_total{host="gateway",status="completed"} 1`) {
		t.Fatalf("metrics %d:\n%s", resp.StatusCode, body)
	}
}
