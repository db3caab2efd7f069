package daemon

import (
	"testing"

	"github.com/sandboxctl/sandboxctl/api"
)

// BenchmarkSocketHealth measures the bare HTTP round trip over the unix
// socket with no tool work: the daemon's own overhead.
func BenchmarkSocketHealth(b *testing.B) {
	r := startServer(b, Options{})
	for b.Loop() {
		if _, err := r.client.Health(b.Context()); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSocketExecTrue measures `true` through the daemon's socket on the
// gateway host: client encode, HTTP over the unix socket, sessions.Manager,
// fork/exec, and back. the README ("Performance") sets ≤ 15 ms through the socket for the
// sandbox host; this is the same path with the local host underneath.
func BenchmarkSocketExecTrue(b *testing.B) {
	r, _ := startGatewayDaemon(b)
	for b.Loop() {
		res, err := r.client.Exec(b.Context(), api.ExecParams{Command: "true"})
		if err != nil {
			b.Fatal(err)
		}
		if res.Details.Status != api.StatusCompleted {
			b.Fatalf("details %v", res.Details)
		}
	}
}
