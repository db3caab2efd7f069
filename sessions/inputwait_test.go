package sessions

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandboxctl/sandboxctl/api"
)

// inputWaitHost is a fake host whose processes report input waits as the
// supervised sandbox does; the claim under test is the Manager's reaction.
type inputWaitHost struct {
	fakeHost
	detects bool
}

func (h *inputWaitHost) Caps() HostCaps { return HostCaps{InputWait: h.detects} }

type inputWaitProc struct {
	*fakeProc
	waiting atomic.Bool
	changed chan struct{}
}

func (p *inputWaitProc) InputWait() bool                   { return p.waiting.Load() }
func (p *inputWaitProc) InputWaitChanged() <-chan struct{} { return p.changed }

func TestForegroundReturnsEarlyWhenWaitingForInput(t *testing.T) {
	m, _ := newTestManager(t, nil)
	var proc *inputWaitProc
	h := &inputWaitHost{detects: true}
	h.startFunc = func(_ context.Context, spec StartSpec) (Process, error) {
		if !spec.KeepStdin {
			t.Errorf("foreground run on an input-wait host must keep stdin open")
		}
		proc = &inputWaitProc{fakeProc: newFakeProc(false), changed: make(chan struct{}, 1)}
		go func() {
			time.Sleep(50 * time.Millisecond)
			proc.waiting.Store(true)
			proc.changed <- struct{}{}
		}()
		return proc, nil
	}
	m.hosts["sandbox"] = h
	start := time.Now()
	r, err := m.Exec(context.Background(), api.ExecParams{Command: "read x; echo got $x", AgentID: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if time.Since(start) > 5*time.Second || r.Details.Status != api.StatusRunning || !r.Details.WaitingForInput {
		t.Fatalf("after %s: %v", time.Since(start), r.Details)
	}
	if !strings.Contains(text(r), "waiting for input") {
		t.Fatalf("text %q", text(r))
	}
	id := r.Details.SessionID
	list, _ := m.Process(context.Background(), api.ProcessParams{Action: "list", AgentID: "a"})
	if !strings.Contains(text(list), id+" waiting-for-input") {
		t.Fatalf("list %q", text(list))
	}
	poll, _ := m.Process(context.Background(), api.ProcessParams{Action: "poll", SessionID: id, AgentID: "a", TimeoutMs: ptr(10000.0)})
	if !strings.Contains(text(poll), "waiting for input") {
		t.Fatalf("poll %q", text(poll))
	}
	if _, err := m.Process(context.Background(), api.ProcessParams{Action: "write", SessionID: id, AgentID: "a", Data: "hi\n", EOF: true}); err != nil {
		t.Fatalf("write: %v", err)
	}
	proc.waiting.Store(false)
	proc.say("got hi\n")
	proc.exit(0, "")
	deadline := time.Now().Add(5 * time.Second)
	for {
		poll, _ = m.Process(context.Background(), api.ProcessParams{Action: "poll", SessionID: id, AgentID: "a", TimeoutMs: ptr(1000.0)})
		if strings.Contains(text(poll), "exited with code 0") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("poll %q", text(poll))
		}
	}
}

func TestForegroundStdinClosedWithoutInputWait(t *testing.T) {
	m, _ := newTestManager(t, nil)
	tests := []struct {
		name    string
		detects bool // the host claims input-wait detection; the started process never reports it
	}{
		{"host cannot detect", false},
		{"host fell back to a path that cannot tell", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var fp *fakeProc
			h := &inputWaitHost{detects: tt.detects}
			h.startFunc = func(_ context.Context, spec StartSpec) (Process, error) {
				fp = newFakeProc(false)
				go func() {
					// A host starts a process without stdin as reading EOF
					// at once; with stdin kept, EOF comes from CloseStdin.
					for spec.KeepStdin && !fp.stdinIsClosed() {
						time.Sleep(5 * time.Millisecond)
					}
					fp.exit(0, "")
				}()
				return fp, nil
			}
			m.hosts["sandbox"] = h
			r, err := m.Exec(context.Background(), api.ExecParams{Command: "cat", AgentID: "b"})
			if err != nil || r.Details.Status != api.StatusCompleted {
				t.Fatalf("%v %v", r.Details, err)
			}
		})
	}
}

func (p *fakeProc) stdinIsClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stdinClosed
}
