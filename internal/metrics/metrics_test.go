package metrics

import (
	"context"
	"fmt"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sandboxctl/sandboxctl/api"
	"github.com/sandboxctl/sandboxctl/hostexec"
	"github.com/sandboxctl/sandboxctl/sessions"
	"github.com/sandboxctl/sandboxctl/sessions/config"
	"github.com/sandboxctl/sandboxctl/sessions/toolapi"
	"github.com/sandboxctl/sandboxctl/vocab"
)

// stubTools returns canned results; the claim under test is the counting.
// Its answers reach the Set as the sessions.Manager reports them
// (sessions.Observer).
type stubTools struct{ set *Set }

func (s stubTools) Exec(_ context.Context, p api.ExecParams) (api.Result, error) {
	res, err := api.Result{Details: api.Details{Status: "completed", Host: p.Host}}, error(nil)
	if p.Command == "" {
		res, err = api.Result{}, fmt.Errorf("%w: empty", toolapi.ErrInvalidInput)
	}
	s.set.ExecAnswered(res, err, time.Millisecond)
	return res, err
}

func (s stubTools) Process(_ context.Context, p api.ProcessParams) (api.Result, error) {
	res := api.Result{Details: api.Details{Status: "failed", Error: "not_found"}}
	s.set.ProcessAnswered(p, res, nil)
	return res, nil
}

var _ sessions.Observer = (*Set)(nil)

func TestCountsAppearInExposition(t *testing.T) {
	set := NewSet()
	set.AddSources(Sources{})
	in := stubTools{set}
	ctx := context.Background()
	_, _ = in.Exec(ctx, api.ExecParams{Command: "true", Host: "sandbox"})
	_, _ = in.Exec(ctx, api.ExecParams{Command: "true", Host: "sandbox"})
	_, _ = in.Exec(ctx, api.ExecParams{})
	_, _ = in.Process(ctx, api.ProcessParams{Action: "poll", SessionID: "x"})
	rec := httptest.NewRecorder()
	set.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
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

// A streamed exec ("stream": true) is counted like any other exec call:
// the sessions.Manager reports both to the Set, its Observer, as the
// daemon wires them.
func TestStreamedExecIsCounted(t *testing.T) {
	runner, err := hostexec.NewRunner(t.Context(), hostexec.Options{
		Shell:   "/bin/sh",
		Environ: []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + t.TempDir(), "LANG=C.UTF-8"},
		Logf:    t.Logf,
	})
	if err != nil {
		t.Skipf("gateway host not available on this system: %v", err)
	}
	cfg := config.Default()
	cfg.Exec.Host, cfg.Exec.Security, cfg.Exec.Ask = "gateway", "full", "off"
	set := NewSet()
	mgr, err := sessions.New(sessions.Options{
		Config:   cfg,
		Hosts:    map[vocab.Host]sessions.Host{"gateway": sessions.NewGatewayHost(runner, t.TempDir())},
		Logf:     t.Logf,
		Observer: set,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mgr.Close(context.Background()) })
	ctx := t.Context()
	_, _ = mgr.Exec(ctx, api.ExecParams{Command: "true", Host: "gateway"})
	_, _ = mgr.ExecStream(ctx, api.ExecParams{Command: "true", Host: "gateway"}, func(f toolapi.Follower) { f.Close() })
	_, _ = mgr.ExecStream(ctx, api.ExecParams{}, nil)
	if _, err := mgr.Follow("a", "", "nope"); err == nil {
		t.Error("Follow of an unknown session answered no error")
	}
	rec := httptest.NewRecorder()
	set.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
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
