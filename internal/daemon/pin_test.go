package daemon

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/sandboxctl/sandboxctl/api"

	"github.com/sandboxctl/sandboxctl/internal/apiclient"
	"github.com/sandboxctl/sandboxctl/internal/apiclient/tcpclient"
)

// TestAgentTokenPinsTheClient: a TCP client with alice's agent token acts
// as alice whatever agentId it sends, sees only alice's events and
// approvals, and reaches nothing else; the tool token still sees all.
func TestAgentTokenPinsTheClient(t *testing.T) {
	const tool, aliceTok = "tool-token-for-the-tests", "alice-token-for-the-tests"
	var mu sync.Mutex
	var gotAgents []string
	tools := &fakeTools{
		execFunc: func(_ context.Context, p api.ExecParams) (api.Result, error) {
			mu.Lock()
			gotAgents = append(gotAgents, p.AgentID)
			mu.Unlock()
			return api.Result{}, nil
		},
		processFunc: func(_ context.Context, p api.ProcessParams) (api.Result, error) {
			mu.Lock()
			gotAgents = append(gotAgents, p.AgentID)
			mu.Unlock()
			return api.Result{}, nil
		},
	}
	feed := []api.Event{
		{Type: "exit", AgentID: "bob", SessionID: "bob-1"},
		{Type: "approval", AgentID: "alice", SessionID: "alice-1"},
	}
	events := subscribeFunc(func(ctx context.Context) <-chan api.Event {
		ch := make(chan api.Event, len(feed))
		for _, ev := range feed {
			ch <- ev
		}
		return ch
	})
	approvals := fakeApprovals{list: []api.Approval{
		{ApprovalRequest: api.ApprovalRequest{ID: "a1", AgentID: "alice"}}, {ApprovalRequest: api.ApprovalRequest{ID: "b1", AgentID: "bob"}},
	}}
	secret := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { writeJSON(w, http.StatusOK, "secret") })
	r := startServer(t, Options{Tools: tools, Events: events, Listen: "127.0.0.1:0", Token: tool,
		AgentTokens: map[string]string{aliceTok: "alice"},
		Approvals:   approvals, Metrics: secret})
	base := "http://" + r.srv.TCPAddr().String()
	alice := tcpclient.New(base, aliceTok, nil)
	defer alice.CloseIdleConnections()

	if _, err := alice.Exec(t.Context(), api.ExecParams{Command: "id", AgentID: "bob"}); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Process(t.Context(), api.ProcessParams{Action: "list", AgentID: "bob"}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if strings.Join(gotAgents, ",") != "alice,alice" {
		t.Errorf("alice's token acted as %v, want alice both times", gotAgents)
	}
	mu.Unlock()

	stream, err := alice.Events(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var ev api.Event
	if err := stream.Next(&ev); err != nil || ev.AgentID != "alice" || ev.SessionID != "alice-1" {
		t.Fatalf("alice's first event: %+v %v (bob's must be filtered out)", ev, err)
	}
	stream.Close()

	raw, err := alice.Call(t.Context(), "GET", "/v1/approvals", nil)
	if err != nil || !strings.Contains(string(raw), `"agentId":"alice"`) || strings.Contains(string(raw), `"bob"`) {
		t.Fatalf("approvals for alice: %s %v", raw, err)
	}
	var apiErr *apiclient.APIError
	for _, path := range []string{"/metrics", "/v1/sandboxes"} {
		if _, err := alice.Call(t.Context(), "GET", path, nil); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusForbidden {
			t.Errorf("alice GET %s: %v, want 403", path, err)
		}
	}

	// The tool token is not pinned.
	all := tcpclient.New(base, tool, nil)
	defer all.CloseIdleConnections()
	if raw, err := all.Call(t.Context(), "GET", "/v1/approvals", nil); err != nil || !strings.Contains(string(raw), `"agentId":"bob"`) {
		t.Fatalf("tool token: %s %v", raw, err)
	}
}

func TestLoadAgentTokens(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, AgentTokensFileName)
	if got, err := LoadAgentTokens(path); err != nil || got != nil {
		t.Fatalf("missing file: %v %v", got, err)
	}
	write := func(body string, mode os.FileMode) {
		t.Helper()
		if err := os.WriteFile(path, []byte(body), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"alice":"alice-token-0123456789"}`, 0o600)
	if got, err := LoadAgentTokens(path); err != nil || got["alice-token-0123456789"] != "alice" {
		t.Fatalf("good file: %v %v", got, err)
	}
	for body, want := range map[string]string{
		`{"alice":"short"}`: "shorter than",
		`{"a":"same-token-0123456789","b":"same-token-0123456789"}`: "share a token",
		`["x"]`:                         "JSON object",
		`{"":"alice-token-0123456789"}`: "empty agent id",
	} {
		write(body, 0o600)
		if _, err := LoadAgentTokens(path); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", body, err, want)
		}
	}
	write(`{"alice":"alice-token-0123456789"}`, 0o644)
	if _, err := LoadAgentTokens(path); err == nil || !strings.Contains(err.Error(), "readable by others") {
		t.Errorf("mode 0644: %v", err)
	}
}
