package supervisor

import (
	"io"
	"testing"
	"time"
)

// BenchmarkLoopbackOutput is the protocol's own cost for 100 MB of output
// (no Engine in between: an in-process pipe stands in for attach).
func BenchmarkLoopbackOutput(b *testing.B) {
	t := &testing.T{}
	_ = t
	e, _ := startServerB(b)
	c := newClientB(b, e)
	for range b.N {
		t0 := time.Now()
		p, err := c.Open(b.Context(), OpenSpec{Argv: []string{"dd", "if=/dev/zero", "bs=1000000", "count=100", "status=none"}, Env: hostEnv()})
		if err != nil {
			b.Fatal(err)
		}
		go func() { _, _ = io.Copy(io.Discard, p.Stderr()) }()
		n, _ := io.Copy(io.Discard, p.Stdout())
		if n != 100000000 {
			b.Fatalf("got %d", n)
		}
		b.ReportMetric(float64(n)/1e6/time.Since(t0).Seconds(), "MB/s")
	}
}
