package metrics

import (
	"context"
	"fmt"
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sandboxctl/sandboxctl/api"

	"github.com/sandboxctl/sandboxctl/sessions/toolapi"
)

// stubTools returns canned results; the claim under test is the counting.
type stubTools struct{}

func (stubTools) Exec(_ context.Context, p api.ExecParams) (api.Result, error) {
	if p.Command == "" {
		return api.Result{}, fmt.Errorf("%w: empty", toolapi.ErrInvalidInput)
	}
	return api.Result{Details: api.Details{Status: "completed", Host: p.Host}}, nil
}

func (stubTools) Process(_ context.Context, p api.ProcessParams) (api.Result, error) {
	return api.Result{Details: api.Details{Status: "failed", Error: "not_found"}}, nil
}

func TestCountsAppearInExposition(t *testing.T) {
	in := New(stubTools{})
	ctx := context.Background()
	_, _ = in.Exec(ctx, api.ExecParams{Command: "true", Host: "sandbox"})
	_, _ = in.Exec(ctx, api.ExecParams{Command: "true", Host: "sandbox"})
	_, _ = in.Exec(ctx, api.ExecParams{})
	_, _ = in.Process(ctx, api.ProcessParams{Action: "poll", SessionID: "x"})
	rec := httptest.NewRecorder()
	in.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	for _, want := range []string{
		`sandboxctl_exec_total{host="sandbox",status="completed"} 2`,
		`sandboxctl_exec_total{host="none",status="invalid"} 1`,
		`sandboxctl_process_total{action="poll",outcome="not_found"} 1`,
		`sandboxctl_exec_call_seconds_count{host="sandbox"} 2`,
		`go_goroutines`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("exposition lacks %q", want)
		}
	}
}

// stubStreamer answers a streamed exec like stubTools' Exec.
type stubStreamer struct{ stubTools }

func (s stubStreamer) ExecStream(ctx context.Context, p api.ExecParams, _ func(toolapi.Follower)) (api.Result, error) {
	return s.Exec(ctx, p)
}

func (stubStreamer) Follow(_, _, id string) (toolapi.Follower, error) {
	return nil, fmt.Errorf("%s: %w", id, api.ErrNoSession)
}

func (stubStreamer) FollowRaw(_, _, id string) (toolapi.Follower, error) {
	return nil, fmt.Errorf("%s: %w", id, api.ErrNoSession)
}

// A streamed exec ("stream": true) is counted like any other exec call.
func TestStreamedExecIsCounted(t *testing.T) {
	set := NewSet()
	in := set.Wrap(stubTools{}, Sources{})
	st := set.Streams(stubStreamer{})
	ctx := context.Background()
	_, _ = in.Exec(ctx, api.ExecParams{Command: "true", Host: "gateway"})
	_, _ = st.ExecStream(ctx, api.ExecParams{Command: "true", Host: "gateway"}, nil)
	_, _ = st.ExecStream(ctx, api.ExecParams{}, nil)
	if _, err := st.Follow("a", "", "nope"); err == nil {
		t.Error("Follow of an unknown session answered no error")
	}
	rec := httptest.NewRecorder()
	in.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	for _, want := range []string{
		`sandboxctl_exec_total{host="gateway",status="completed"} 2`,
		`sandboxctl_exec_total{host="none",status="invalid"} 1`,
		`sandboxctl_exec_call_seconds_count{host="gateway"} 2`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("exposition lacks %q", want)
		}
	}
}
