package sessions

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sandboxctl/sandboxctl/api"

	"github.com/sandboxctl/sandboxctl/sessions/config"
)

// recoveringHost is a fakeHost that also recovers sessions.
type recoveringHost struct {
	*fakeHost
	recoverFunc func(ctx context.Context) ([]RecoveredSession, error)
}

func (h recoveringHost) Recover(ctx context.Context) ([]RecoveredSession, error) {
	return h.recoverFunc(ctx)
}

func (h recoveringHost) Caps() HostCaps { return HostCaps{Recover: h.Recover} }

func TestRecover(t *testing.T) {
	clk := newClock()
	live := newFakeProc(false)
	boom := errors.New("one container unreadable")
	host := recoveringHost{fakeHost: &fakeHost{}, recoverFunc: func(context.Context) ([]RecoveredSession, error) {
		return []RecoveredSession{
			{ID: "brisk-otter", Command: "make test", Dir: "/workspace", SessionKey: "s1", PID: 7,
				StartedAt: clk.Now().Add(-time.Minute), Output: []byte("ok 1\nok 2\n"), Covered: 110,
				Finished: true, ExitCode: 0, EndedAt: clk.Now().Add(-time.Second)},
			{ID: "calm-heron", Command: "npm run dev", Dir: "/workspace", SessionKey: "s1", PID: 9,
				StartedAt: clk.Now().Add(-2 * time.Minute), Output: []byte("listening\n"), StdinOpen: true, Started: Started{Process: live}},
			{ID: "bad-one", Command: "x", SessionKey: "s1"}, // running without a process
		}, boom
	}}
	m, _ := newTestManager(t, func(c *config.File) {}, func(o *Options) {
		o.Now = clk.Now
		o.Hosts["sandbox"] = host
	})
	n, err := m.Recover(context.Background())
	if n != 2 || !errors.Is(err, boom) || !strings.Contains(err.Error(), "bad-one") {
		t.Fatalf("Recover = %d, %v", n, err)
	}
	r, _ := m.Process(context.Background(), api.ProcessParams{Action: "list", SessionKey: "s1"})
	if text(r) != "brisk-otter completed 59s :: make test\ncalm-heron running 2m00s :: npm run" {
		t.Fatalf("list = %q", text(r))
	}
	r, _ = m.Process(context.Background(), api.ProcessParams{Action: "log", SessionID: "brisk-otter", SessionKey: "s1"})
	if text(r) != "[... 100 chars dropped ...]\nok 1\nok 2" || r.Details.ExitCode != api.Code(0) {
		t.Fatalf("log = %q %v", text(r), r.Details)
	}
	// Other scopes still see nothing.
	if r, _ := m.Process(context.Background(), api.ProcessParams{Action: "log", SessionID: "brisk-otter"}); r.Details.Error != "not_found" {
		t.Fatal("recovered session visible to another scope")
	}
	// The running one streams on, accepts input and can be killed.
	live.say("request 1\n")
	r, _ = m.Process(context.Background(), api.ProcessParams{Action: "poll", SessionID: "calm-heron", SessionKey: "s1", TimeoutMs: ptr(2000.0)})
	if !strings.HasPrefix(text(r), "listening") || !strings.HasSuffix(text(r), "Process still running.") {
		t.Fatalf("poll = %q", text(r))
	}
	if _, err := m.Process(context.Background(), api.ProcessParams{Action: "write", SessionID: "calm-heron", SessionKey: "s1", Data: "q"}); err != nil {
		t.Fatal(err)
	}
	r, _ = m.Process(context.Background(), api.ProcessParams{Action: "kill", SessionID: "calm-heron", SessionKey: "s1"})
	if r.Details.Status != api.StatusFailed || live.stdinString() != "q" {
		t.Fatalf("kill = %v", r.Details)
	}
}
