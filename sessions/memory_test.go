package sessions

import (
	"context"
	"io"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandboxctl/sandboxctl/api"

	"github.com/sandboxctl/sandboxctl/sessions/config"
	"github.com/sandboxctl/sandboxctl/vocab"
)

// floodReader produces n bytes of log-like text as fast as it is read.
type floodReader struct {
	left    atomic.Int64
	pattern []byte
	off     int
}

func newFlood(n int64) *floodReader {
	f := &floodReader{pattern: []byte(strings.Repeat("2026-01-02 build step ok: compiling package ünïcode 世界\n", 2048))}
	f.left.Store(n)
	return f
}

func (f *floodReader) Read(p []byte) (int, error) {
	left := f.left.Load()
	if left <= 0 {
		return 0, io.EOF
	}
	n := 0
	for n < len(p) && left > 0 {
		c := copy(p[n:min(len(p), n+int(left))], f.pattern[f.off:])
		f.off = (f.off + c) % len(f.pattern)
		n += c
		left -= int64(c)
	}
	f.left.Store(left)
	return n, nil
}

// floodProc is a process that prints a flood on stdout and stderr, then exits.
type floodProc struct {
	*fakeProc
	out, err io.Reader
}

func (p *floodProc) Stdout() io.Reader { return p.out }
func (p *floodProc) Stderr() io.Reader { return p.err }

func floodSize() int64 {
	if raceEnabled || testing.Short() {
		return 20 << 20
	}
	return 200 << 20
}

// TestOutputMemoryBounded pushes a flood of output through a background
// session that nobody polls and checks that every buffer stays within its
// cap (README, "Performance": daemon memory bounded by the output caps).
func TestOutputMemoryBounded(t *testing.T) {
	m, hosts := newTestManager(t, nil)
	size := floodSize()
	fp := &floodProc{fakeProc: newFakeProc(false), out: newFlood(size), err: newFlood(size / 4)}
	hosts["sandbox"].startFunc = func(context.Context, StartSpec) (Process, error) { return fp, nil }

	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)

	r, err := m.Exec(context.Background(), api.ExecParams{Command: "yes", Background: true})
	if err != nil {
		t.Fatal(err)
	}
	id := r.Details.SessionID
	s := m.lookup(id, scopeKey("", ""))
	lim := m.Limits()
	// Sample the buffers while the flood runs, then let it finish.
	deadline := time.Now().Add(2 * time.Minute)
	peakHeap := uint64(0)
	for {
		s.mu.Lock()
		aggCap, outCap, errCap := s.agg.CapBytes(), s.pendOut.CapBytes(), s.pendErr.CapBytes()
		s.mu.Unlock()
		// 4 bytes per char at most, doubled for the compaction slack, plus
		// one read chunk.
		if aggCap > 8*lim.MaxOutputChars+2*readChunk || outCap > 8*lim.PendingMaxOutputChars+2*readChunk || errCap > 8*lim.PendingMaxOutputChars+2*readChunk {
			t.Fatalf("buffers grew past their caps: agg %d, pending %d/%d bytes", aggCap, outCap, errCap)
		}
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		peakHeap = max(peakHeap, ms.HeapInuse)
		if fp.out.(*floodReader).left.Load() == 0 && fp.err.(*floodReader).left.Load() == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("flood did not drain")
		}
		time.Sleep(10 * time.Millisecond)
	}
	fp.exit(0, "")
	waitDone(t, m, id)
	s.mu.Lock()
	aggLen, dropped := s.agg.Len(), s.agg.Dropped()
	pendLen := s.pendOut.Len()
	s.mu.Unlock()
	if aggLen != lim.MaxOutputChars || pendLen != lim.PendingMaxOutputChars || dropped <= 0 {
		t.Fatalf("agg %d chars (dropped %d), pending %d", aggLen, dropped, pendLen)
	}
	lr, _ := m.Process(context.Background(), api.ProcessParams{Action: "log", SessionID: id, Limit: ptr(1)})
	if !*lr.Details.Truncated || *lr.Details.TotalChars != lim.MaxOutputChars {
		t.Fatalf("log details %v", lr.Details)
	}
	pr, _ := m.Process(context.Background(), api.ProcessParams{Action: "poll", SessionID: id})
	if !strings.HasPrefix(text(pr), "[... ") || !strings.Contains(text(pr), " chars dropped ...]") {
		t.Fatalf("poll lacks the dropped marker: %.80q", text(pr))
	}
	t.Logf("flood %d MiB stdout + %d MiB stderr: heap in use before %d MiB, peak %d MiB",
		size>>20, (size/4)>>20, before.HeapInuse>>20, peakHeap>>20)
	// The heap figure includes garbage the GC has not collected yet (it lags
	// on a loaded machine), so it is only a coarse guard: unbounded buffering
	// of the 250 MiB flood would exceed it; the exact bound is the buffer
	// check above.
	if size >= 200<<20 && peakHeap > before.HeapInuse+150<<20 {
		t.Errorf("heap grew by %d MiB during the flood", (peakHeap-before.HeapInuse)>>20)
	}
}

// BenchmarkExecFlood measures output throughput through a session
// (decode + sanitize + caps) and reports the heap in use.
func BenchmarkExecFlood(b *testing.B) {
	cfg := config.Default()
	h := &fakeHost{}
	m, err := New(Options{Config: cfg, Hosts: map[vocab.Host]Host{"sandbox": h}})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close(context.Background())
	const size = 64 << 20
	b.SetBytes(size)
	for b.Loop() {
		fp := &floodProc{fakeProc: newFakeProc(false), out: newFlood(size), err: newFlood(0)}
		h.startFunc = func(context.Context, StartSpec) (Process, error) { return fp, nil }
		go func() {
			for fp.out.(*floodReader).left.Load() > 0 {
				time.Sleep(time.Millisecond)
			}
			fp.exit(0, "")
		}()
		if _, err := m.Exec(context.Background(), api.ExecParams{Command: "yes", YieldMs: ptr(120000.0)}); err != nil {
			b.Fatal(err)
		}
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(ms.HeapInuse)/(1<<20), "heap-MiB")
}
