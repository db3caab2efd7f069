package daemon

import (
	"context"
	"io"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/sandboxctl/sandboxctl/api"
)

// TestFaultClientsThatNeverRead replays issue 32 item 10: connections that
// send a request and never read the answer each pinned a handler and its
// encoded answer (2,000 of them raised the daemon's RSS by 194 MiB). With
// the bounds, at most MaxConns are served at once, a write that stalls for
// WriteStall drops its connection, and the daemon then answers a fresh
// client again.
func TestFaultClientsThatNeverRead(t *testing.T) {
	const (
		conns    = 200
		maxConns = 20
		answer   = 512 << 10
		stall    = 500 * time.Millisecond
	)
	tools := &fakeTools{execFunc: func(context.Context, api.ExecParams) (api.Result, error) {
		// A fresh answer per call, as a real session's output is.
		return api.Result{Content: []api.Content{{Type: "text", Text: strings.Repeat("x", answer)}}}, nil
	}}
	r := startServer(t, Options{Tools: tools, MaxConns: maxConns, WriteStall: stall})

	base := heapInUse()
	var held []net.Conn
	t.Cleanup(func() {
		for _, c := range held {
			_ = c.Close()
		}
	})
	req := "POST /v1/tools/exec HTTP/1.1\r\nHost: sandboxctl\r\nContent-Type: application/json\r\nContent-Length: 16\r\n\r\n{\"command\":\"x\"}\n"
	for range conns {
		c, err := net.Dial("unix", r.srv.SocketPath())
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
		held = append(held, c)
		if _, err := io.WriteString(c, req); err != nil {
			t.Fatalf("write request: %v", err)
		}
	}
	// The most the daemon holds for them, sampled while they never read.
	peak := uint64(0)
	for range 10 {
		peak = max(peak, heapInUse())
		time.Sleep(100 * time.Millisecond)
	}
	grew := int64(peak) - int64(base)
	t.Logf("heap grew by %d MiB for %d connections that never read (answer %d KiB, cap %d)", grew>>20, conns, answer>>10, maxConns)
	if limit := int64(4 * maxConns * answer); grew > limit {
		t.Errorf("heap grew by %d MiB, more than %d MiB: the connections are not bounded", grew>>20, limit>>20)
	}

	// Stalled connections are dropped, so a fresh client is answered.
	start := time.Now()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	if _, err := r.client.Health(ctx); err != nil {
		t.Fatalf("a fresh client was not answered: %v", err)
	}
	t.Logf("a fresh client was answered after %v", time.Since(start).Round(time.Millisecond))
	// The first connection's answer was cut off, not delivered later.
	_ = held[0].SetReadDeadline(time.Now().Add(10 * time.Second))
	got, _ := io.ReadAll(held[0])
	if len(got) >= answer {
		t.Errorf("a connection that stalled for %v still got its whole answer (%d bytes)", stall, len(got))
	}
}

// heapInUse is the heap in use after a collection.
func heapInUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}
