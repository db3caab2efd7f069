package guard

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
)

// Issue 25 finding 12: 30 pending approvals of ~0.5 MB made an 86 MiB
// approvals.json that every gateway command of every agent parsed again.
// Replayed at a small scale (limits of 3 per agent, 5 in all, 4 KiB a
// request, 4 finished kept): the store refuses what is over a limit, stores
// nothing for it, and serves reads without parsing an unchanged file again.
func TestSecurityApprovalFloodIsCapped(t *testing.T) {
	dir := t.TempDir()
	clock := &fakeClock{t: time.UnixMilli(1_700_000_000_000)}
	st := newStore(t, dir, clock.Now, WithLimits(StoreLimits{PendingPerAgent: 3, Pending: 5, RequestBytes: 4096, Retained: 4}))
	ctx := context.Background()
	as := func(agent, cmd string) PendingRequest {
		r := req(dir)
		r.AgentID, r.Command = agent, cmd
		return r
	}

	// A 0.5 MB command is refused with a clear, classed error; nothing is written.
	big := "echo " + strings.Repeat("A", 512<<10)
	_, err := st.Request(ctx, as("a", big))
	if !errors.Is(err, ErrApprovalTooLarge) || !cerrdefs.IsResourceExhausted(err) || !strings.Contains(err.Error(), "limits.approvals.requestBytes") {
		t.Fatalf("0.5 MB request: err %v, want ErrApprovalTooLarge naming the limit", err)
	}
	if _, err := os.Stat(st.Path()); !os.IsNotExist(err) {
		t.Fatalf("the refused request wrote approvals.json: %v", err)
	}
	// The environment counts as well.
	r := as("a", "echo x")
	r.Env = map[string]string{"PAD": strings.Repeat("B", 8192)}
	if _, err := st.Request(ctx, r); !errors.Is(err, ErrApprovalTooLarge) {
		t.Fatalf("8 KiB env: err %v, want ErrApprovalTooLarge", err)
	}

	// Agent a: three pending, the fourth is refused.
	for i := range 3 {
		if _, err := st.Request(ctx, as("a", "echo a"+strings.Repeat("x", i))); err != nil {
			t.Fatalf("request %d of a: %v", i, err)
		}
	}
	_, err = st.Request(ctx, as("a", "echo a4"))
	if !errors.Is(err, ErrApprovalQuota) || !cerrdefs.IsResourceExhausted(err) || !strings.Contains(err.Error(), "limits.approvals.pendingPerAgent") {
		t.Fatalf("4th request of a: err %v, want ErrApprovalQuota naming pendingPerAgent", err)
	}
	// Agent b still gets its own share, up to the global cap.
	for i := range 2 {
		if _, err := st.Request(ctx, as("b", "echo b"+strings.Repeat("x", i))); err != nil {
			t.Fatalf("request %d of b: %v", i, err)
		}
	}
	if _, err := st.Request(ctx, as("c", "echo c")); !errors.Is(err, ErrApprovalQuota) || !strings.Contains(err.Error(), "(limits.approvals.pending)") {
		t.Fatalf("6th request overall: err %v, want ErrApprovalQuota naming limits.approvals.pending", err)
	}
	list, err := st.List(ctx)
	if err != nil || len(list) != 5 {
		t.Fatalf("stored %d requests (%v), want 5: refused ones must leave nothing", len(list), err)
	}

	// Once they expire, a may ask again; finished records beyond 4 go.
	clock.Add(3 * time.Minute)
	for i := range 3 {
		if _, err := st.Request(ctx, as("a", "echo again"+strings.Repeat("x", i))); err != nil {
			t.Fatalf("request %d after expiry: %v", i, err)
		}
	}
	list, err = st.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	finished := 0
	for _, p := range list {
		if p.Status(clock.Now()) != "pending" {
			finished++
		}
	}
	if finished != 4 || len(list) != 7 {
		t.Fatalf("%d requests, %d finished; want 7 with 4 finished (limits.approvals.retained)", len(list), finished)
	}

	// A neighbour's allowlist lookups and polls do not parse the file again
	// while it is unchanged.
	before := st.parses
	for range 50 {
		if _, err := st.Allowlist(ctx, "b"); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Check(ctx, list[0].ID, Binding{Command: list[0].Command, Argv: list[0].Argv, Cwd: list[0].Cwd, AgentID: list[0].AgentID, SessionKey: list[0].SessionKey, EnvHash: list[0].EnvHash}); err != nil {
			t.Fatal(err)
		}
	}
	if st.parses != before {
		t.Fatalf("100 reads of an unchanged file parsed it %d times", st.parses-before)
	}
	// Another process's write is still seen at once.
	other, err := OpenStore(st.Path(), WithNow(clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Resolve(ctx, list[0].ID, "deny"); err != nil {
		t.Fatal(err)
	}
	got, err := st.Check(ctx, list[0].ID, Binding{Command: list[0].Command, Argv: list[0].Argv, Cwd: list[0].Cwd, AgentID: list[0].AgentID, SessionKey: list[0].SessionKey, EnvHash: list[0].EnvHash})
	if err != nil || got.Outcome != OutcomeDeny {
		t.Fatalf("decision by another store: outcome %v err %v, want deny", got.Outcome, err)
	}
}
