package audit

import (
	"context"
	"testing"
)

// BenchmarkRecord is the cost of one record (an exec.request as the
// session manager writes it): encode, hash, one write call.
func BenchmarkRecord(b *testing.B) {
	l, err := Open(b.TempDir(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	uid := 1000
	r := Record{Kind: KindExecRequest, Actor: Actor{Via: "socket", UID: &uid, PID: 4242}, AgentID: "agent-1", RequestID: "85bc16166f8004ea",
		Exec: &Exec{Command: "go test ./...", EnvNames: []string{"GOFLAGS", "HOME"}, Cwd: "/workspace"}}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := l.Record(ctx, r); err != nil {
			b.Fatal(err)
		}
	}
}
