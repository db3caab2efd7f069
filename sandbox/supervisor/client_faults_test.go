package supervisor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestOpenDuringReconnectRunsOnce replays issue 13 item 1 at the client:
// a command is opened while the connection is down. When the client
// reconnects it must not re-attach that never-opened command (the refused
// attach used to fail the Open with ErrRefused, "never ran", while the
// queued Open ran it: the caller then ran it a second time). The Open
// succeeds and the command runs exactly once.
func TestOpenDuringReconnectRunsOnce(t *testing.T) {
	// One server for every round: servers in one process reap each
	// other's children.
	e, _ := startServer(t)
	for i := range 5 {
		gate := make(chan struct{})
		dials := 0
		dial := func(ctx context.Context) (Conn, error) {
			dials++
			if dials > 1 {
				select {
				case <-gate:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			return e.dial(ctx)
		}
		ctx := ctxT(t)
		c, err := NewClient(ctx, ClientOptions{Dial: dial, Logf: t.Logf})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		c.CloseConn()
		waitFor(t, func() bool { return !c.Connected() }, "disconnected")

		marker := filepath.Join(t.TempDir(), "runs.txt")
		type result struct {
			p   *Proc
			err error
		}
		res := make(chan result, 1)
		go func() {
			p, err := c.Open(ctx, OpenSpec{ID: fmt.Sprintf("once-%d", i), Argv: []string{"sh", "-c", "echo T >> " + marker}, Env: hostEnv()})
			res <- result{p, err}
		}()
		waitFor(t, func() bool {
			c.mu.Lock()
			defer c.mu.Unlock()
			return len(c.procs) == 1
		}, "the Open queued")
		close(gate)
		r := <-res
		if errors.Is(r.err, ErrRefused) || errors.Is(r.err, ErrNotSent) {
			t.Fatalf("round %d: Open failed with %v: the caller would run the command again", i, r.err)
		}
		if r.err != nil {
			t.Fatalf("round %d: Open: %v", i, r.err)
		}
		wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
		if _, _, err := r.p.Wait(wctx); err != nil {
			data, _ := os.ReadFile(marker)
			c.mu.Lock()
			n := len(c.procs)
			c.mu.Unlock()
			t.Fatalf("round %d: wait: %v (marker %q, procs %d, connected %v, pid %d)", i, err, data, n, c.Connected(), r.p.PID())
		}
		wcancel()
		data, _ := os.ReadFile(marker)
		if n := strings.Count(string(data), "T\n"); n != 1 {
			t.Fatalf("round %d: the command ran %d times", i, n)
		}
		_ = c.Close()
	}
}
