package audit

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"
)

var updateGolden = flag.Bool("update", false, "rewrite the testdata/*.golden files")

// TestChainGolden: a fixed sequence of records (every kind that carries an
// approval, and the records around it) is written byte for byte as
// before, so every line's hash and the chain's last hash are unchanged.
func TestChainGolden(t *testing.T) {
	dir := t.TempDir()
	clock := time.Date(2026, 11, 28, 1, 0, 0, 0, time.UTC)
	l, err := Open(dir, Options{Host: "golden-host", Now: func() time.Time {
		clock = clock.Add(1500 * time.Millisecond)
		return clock
	}})
	if err != nil {
		t.Fatal(err)
	}
	uid, code := 1000, 0
	actor := Actor{Via: "socket", UID: &uid, PID: 42}
	scope := func(r Record) Record {
		r.Actor, r.AgentID, r.SessionKey, r.SessionID, r.RequestID, r.Host = actor, "agent-a", "s1", "sess-1", "req-1", "gateway"
		return r
	}
	for _, r := range []Record{
		scope(Record{Kind: KindExecRequest, Exec: &Exec{Command: "rm -rf build", Argv: []string{"/bin/sh", "-c", "rm -rf build"},
			EnvNames: []string{"A"}, Cwd: "/work", Security: "allowlist", Ask: "on-miss"}}),
		scope(Record{Kind: KindGuardDecision, Guard: &Guard{Decision: "approval-pending", Rule: "rm is not allowlisted", Security: "allowlist", Ask: "on-miss"}}),
		scope(Record{Kind: KindApprovalRequest, Node: "build-box", Approval: &Approval{ID: "0b6f2c1e-1", Slug: "0b6f2c1e", Command: "rm -rf build"}}),
		{Kind: KindApprovalDecide, Actor: Actor{Via: "approver-token", Token: "approver"}, Approval: &Approval{ID: "0b6f2c1e-1", Decision: "allow-once"}},
		{Kind: KindApprovalDecide, Actor: Actor{Via: "console"}, Approval: &Approval{ID: "nope", Decision: "deny", Reason: "unknown approval"}},
		scope(Record{Kind: KindApprovalOutcome, Approval: &Approval{ID: "0b6f2c1e-1", Slug: "0b6f2c1e", Decision: "run"}}),
		scope(Record{Kind: KindApprovalOutcome, Approval: &Approval{ID: "0b6f2c1e-2", Slug: "0b6f2c1f", Decision: "deny", Reason: "expired", Expired: true}}),
		scope(Record{Kind: KindSessionExit, Session: &Session{Command: "rm -rf build", Status: "completed", ExitCode: &code, DurationMs: 12}}),
		{Kind: KindDaemonStop, Actor: Actor{Via: "daemon"}},
	} {
		if err := l.Record(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	segs, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if err != nil || len(segs) != 1 {
		t.Fatalf("segments %v, %v", segs, err)
	}
	got, err := os.ReadFile(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("testdata", "chain.golden")
	if *updateGolden {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("the audit lines changed:\n got %s\nwant %s", got, want)
	}
	if rep, err := Verify(dir, nil, false); err != nil || rep.Problem != nil || rep.Records != 9 {
		t.Fatalf("verify: %v (%+v)", err, rep)
	}
}
