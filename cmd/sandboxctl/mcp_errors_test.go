package main_test

import (
	"context"
	"net/http"
	"os/exec"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// bearer adds an agent token to every request of the MCP HTTP client.
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// TestMCPSameErrorTextOverStdioAndHTTP: one bad argument gets one error
// text, whichever MCP front door it came through: `sandboxctl mcp` (stdio,
// which calls the daemon's HTTP API) or the daemon's own /mcp endpoint.
func TestMCPSameErrorTextOverStdioAndHTTP(t *testing.T) {
	e, alice, _ := filesEnv(t)
	base := serveFiles(t, e)
	t.Cleanup(func() { e.run(t, "sandbox", "rm", "--agent", alice) })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	client := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil)
	stdio, err := client.Connect(ctx, &mcp.CommandTransport{Command: exec.Command(binary, "--state", e.state, "--config", e.config, "mcp", "--agent", alice)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer stdio.Close()
	overHTTP, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: base + "/mcp", HTTPClient: &http.Client{Transport: bearer{filesAliceToken}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer overHTTP.Close()

	calls := []struct {
		tool string
		args map[string]any
	}{
		{"exec", map[string]any{"command": ""}},
		{"exec", map[string]any{"command": "true", "timeout": -1}},
		{"exec", map[string]any{"command": "true", "timeout": 1e12}},
		{"exec", map[string]any{"command": "true", "yieldMs": 1e9}},
		{"exec", map[string]any{"command": "true", "workdir": "/etc"}},
		{"exec", map[string]any{"command": "true", "env": map[string]any{"LD_PRELOAD": "/x.so"}}},
		{"exec", map[string]any{"command": "true", "bogus": 1}},
		{"process", map[string]any{"action": "poll", "sessionId": "no-such-session"}},
		{"process", map[string]any{"action": "write"}},
		{"process", map[string]any{"action": "send-keys", "sessionId": "no-such-session", "keys": []any{"no-such-key"}}},
		{"read_file", map[string]any{"path": "relative/path"}},
	}
	for _, c := range calls {
		var texts [2]string
		for i, cs := range []*mcp.ClientSession{stdio, overHTTP} {
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: c.tool, Arguments: c.args})
			switch {
			case err != nil:
				texts[i] = "protocol error: " + err.Error()
			case len(res.Content) == 0:
				texts[i] = "(no content)"
			default:
				texts[i] = res.Content[0].(*mcp.TextContent).Text
			}
		}
		if texts[0] != texts[1] {
			t.Errorf("%s %v:\n  stdio: %q\n  http:  %q", c.tool, c.args, texts[0], texts[1])
		} else {
			t.Logf("%s %v: %q", c.tool, c.args, texts[0])
		}
	}
}
