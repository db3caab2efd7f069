package sessions_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sandboxctl/sandboxctl/sessions/toolapi"

	"github.com/sandboxctl/sandboxctl/api"
)

// TestKillSignalRealGateway replays issue 13 item 7 (signals) on real
// processes: an unknown signal is refused and changes nothing; SIGUSR1
// reaches a trap and the session runs on; SIGINT ends it and is recorded.
func TestKillSignalRealGateway(t *testing.T) {
	m := realGatewayManager(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := m.Exec(ctx, api.ExecParams{Command: `trap 'echo got-usr1' USR1; echo ready; while :; do sleep 0.05; done`, Background: true})
	if err != nil {
		t.Fatal(err)
	}
	id := res.Details.SessionID
	poll := func() string {
		ms := 2000.0
		r, err := m.Process(ctx, api.ProcessParams{Action: "poll", SessionID: id, TimeoutMs: &ms})
		if err != nil {
			t.Fatal(err)
		}
		return r.Content[0].Text
	}
	for !strings.Contains(poll(), "ready") {
	}
	_, err = m.Process(ctx, api.ProcessParams{Action: "kill", SessionID: id, Signal: "SIGFOO"})
	if !errors.Is(err, toolapi.ErrInvalidInput) || !strings.Contains(err.Error(), "SIGFOO") {
		t.Fatalf("kill SIGFOO: %v, want an invalid-input error naming it", err)
	}
	r, err := m.Process(ctx, api.ProcessParams{Action: "kill", SessionID: id, Signal: "SIGUSR1"})
	if err != nil {
		t.Fatal(err)
	}
	if txt := r.Content[0].Text; !strings.Contains(txt, "still running") {
		t.Fatalf("kill SIGUSR1: %q", txt)
	}
	if out := poll(); !strings.Contains(out, "got-usr1") || !strings.Contains(out, "Process still running.") {
		t.Fatalf("after SIGUSR1: %q", out)
	}
	r, err = m.Process(ctx, api.ProcessParams{Action: "kill", SessionID: id, Signal: "int"})
	if err != nil {
		t.Fatal(err)
	}
	if txt := r.Content[0].Text; !strings.Contains(txt, "signal SIGINT") || r.Details.Status != api.StatusFailed {
		t.Fatalf("kill SIGINT: %q %v", txt, r.Details)
	}
}

// TestPollHugeTimeoutIsClamped: a timeoutMs whose Duration would overflow
// waits like the longest poll, not not at all.
func TestPollHugeTimeoutIsClamped(t *testing.T) {
	m := realGatewayManager(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := m.Exec(ctx, api.ExecParams{Command: `sleep 1.5; echo late`, Background: true})
	if err != nil {
		t.Fatal(err)
	}
	id := res.Details.SessionID
	ms := 1e16
	start := time.Now()
	r, err := m.Process(ctx, api.ProcessParams{Action: "poll", SessionID: id, TimeoutMs: &ms})
	if err != nil {
		t.Fatal(err)
	}
	if txt := r.Content[0].Text; !strings.Contains(txt, "late") && time.Since(start) < time.Second {
		t.Fatalf("poll with timeoutMs 1e16 returned at once: %q", txt)
	}
}
