package sessions_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandboxctl/sandboxctl/api"

	cerrdefs "github.com/containerd/errdefs"

	"github.com/sandboxctl/sandboxctl/hostexec"
	"github.com/sandboxctl/sandboxctl/hostexec/guard"
	"github.com/sandboxctl/sandboxctl/sessions"
	"github.com/sandboxctl/sandboxctl/sessions/config"
	"github.com/sandboxctl/sandboxctl/vocab"
)

// Issue 25 finding 12, replayed against a real Manager on the gateway with
// the real GateGuard (ask on-miss): agent A floods approval requests with
// 0.5 MB commands, then with many small ones. The big ones are refused with
// a classed error and the small ones stop at A's quota; approvals.json stays
// small, and agent B's allowlisted command still runs at once.
func TestSecurityApprovalFloodIsRefusedAndNeighbourRuns(t *testing.T) {
	r, err := hostexec.NewRunner(context.Background(), hostexec.Options{Shell: "/bin/sh", Environ: []string{"PATH=/usr/bin:/bin", "HOME=" + t.TempDir()}, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	store, err := guard.OpenStore(filepath.Join(t.TempDir(), "approvals.json"),
		guard.WithLimits(guard.StoreLimits{PendingPerAgent: 3, Pending: 10, RequestBytes: 16 << 10, Retained: 10}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.AddAllowlist(context.Background(), "agent-b", "/usr/bin/true"); err != nil {
		t.Fatal(err)
	}
	gate := &guard.Gate{Store: store, Config: guard.GateConfig{Security: vocab.SecurityAllowlist, Ask: vocab.AskOnMiss, AskFallback: vocab.SecurityDeny}}
	wd := t.TempDir()
	cfg := config.Default()
	cfg.Exec.Host, cfg.Exec.Security, cfg.Exec.Ask = "gateway", "allowlist", "on-miss"
	m, err := sessions.New(sessions.Options{
		Config: cfg, Hosts: map[vocab.Host]sessions.Host{"gateway": sessions.NewGatewayHost(r, wd)},
		Guard: sessions.NewGateGuard(gate, r), Logf: t.Logf, Getenv: func(string) string { return "" },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_ = m.Close(ctx)
	})
	ctx := context.Background()
	yield := new(float64(100))
	marker := filepath.Join(wd, "RAN")

	big := "touch " + marker + " # " + strings.Repeat("A", 512<<10)
	_, err = m.Exec(ctx, api.ExecParams{Command: big, AgentID: "agent-a", YieldMs: yield})
	if !errors.Is(err, guard.ErrApprovalTooLarge) || !cerrdefs.IsResourceExhausted(err) {
		t.Fatalf("0.5 MB command: err %v, want a resource-exhausted ErrApprovalTooLarge", err)
	}
	for i := range 3 {
		res, err := m.Exec(ctx, api.ExecParams{Command: "touch " + marker + strings.Repeat("x", i), AgentID: "agent-a", YieldMs: yield})
		if err != nil || res.Details.Status != api.StatusApprovalPending && res.Details.Status != api.StatusRunning {
			t.Fatalf("request %d of agent-a: status %v err %v, want approval pending", i, res.Details.Status, err)
		}
	}
	_, err = m.Exec(ctx, api.ExecParams{Command: "touch " + marker + "4", AgentID: "agent-a", YieldMs: yield})
	if !errors.Is(err, guard.ErrApprovalQuota) || !strings.Contains(err.Error(), "pendingPerAgent") {
		t.Fatalf("4th request of agent-a: err %v, want ErrApprovalQuota naming pendingPerAgent", err)
	}
	fi, err := os.Stat(store.Path())
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() > 64<<10 {
		t.Errorf("approvals.json is %d bytes after the flood, want it bounded by the limits (< 64 KiB)", fi.Size())
	}
	res, err := m.Exec(ctx, api.ExecParams{Command: "true", AgentID: "agent-b", YieldMs: new(float64(20000))})
	if err != nil || res.Details.Status != api.StatusCompleted || res.Details.ExitCode != api.Code(0) {
		t.Fatalf("agent-b's allowlisted true: status %v exit %v err %v, want completed 0", res.Details.Status, res.Details.ExitCode, err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("an unapproved command ran")
	}
}
