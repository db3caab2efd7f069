package supervisor

import (
	"io"
	"os"
	"slices"
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

// BenchmarkStartTrue times Open to exit of /bin/true through the server,
// a pause between commands: started through a ready spare launcher,
// through a launcher forked for it, and forked directly (no launcher).
//
//	go test -run '^$' -bench StartTrue ./sandbox/supervisor/
func BenchmarkStartTrue(b *testing.B) {
	self, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	for _, mode := range []struct {
		name     string
		launcher string
		noSpare  bool
	}{{"spare", self, false}, {"launcher", self, true}, {"direct", "", false}} {
		b.Run(mode.name, func(b *testing.B) {
			// State on a tmpfs, as /run/sandboxctl is in a container
			// (on a disk, the session files' fsyncs are the figure).
			dir, err := os.MkdirTemp("/dev/shm", "sandboxctl-bench-")
			if err != nil {
				b.Skipf("no tmpfs at /dev/shm: %v", err)
			}
			b.Cleanup(func() { _ = os.RemoveAll(dir) })
			e, s := startServerOpts(b, ServerOptions{Dirs: []string{dir}, Launcher: mode.launcher})
			if mode.noSpare {
				s.mu.Lock()
				s.spareClosed = true
				s.mu.Unlock()
			}
			c := newClientB(b, e)
			var times []time.Duration
			for range b.N {
				time.Sleep(50 * time.Millisecond) // a spare is ready
				t0 := time.Now()
				p, err := c.Open(b.Context(), OpenSpec{Argv: []string{"/bin/true"}, Env: hostEnv()})
				if err != nil {
					b.Fatal(err)
				}
				go func() { _, _ = io.Copy(io.Discard, p.Stderr()) }()
				_, _ = io.Copy(io.Discard, p.Stdout())
				if code, _, err := p.Wait(b.Context()); err != nil || code != 0 {
					b.Fatalf("true: %d %v", code, err)
				}
				times = append(times, time.Since(t0))
			}
			slices.Sort(times)
			b.ReportMetric(float64(times[len(times)/2].Microseconds())/1000, "ms-median")
		})
	}
}
