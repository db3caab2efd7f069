package sessions

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/sandboxctl/sandboxctl/api"
	"github.com/sandboxctl/sandboxctl/sessions/toolapi"
	"github.com/sandboxctl/sandboxctl/vocab"
)

// callLog is an Observer that records the tool calls it is told about.
type callLog struct {
	mu    sync.Mutex
	execs []execCall
	procs []string // actions
}

type execCall struct {
	status string
	err    error
	took   time.Duration
}

func (o *callLog) ExecAnswered(res api.Result, err error, took time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.execs = append(o.execs, execCall{res.Details.Status, err, took})
}

func (o *callLog) ProcessAnswered(p api.ProcessParams, _ api.Result, _ error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.procs = append(o.procs, p.Action)
}

func (o *callLog) CommandFinished(vocab.Host, string, time.Duration)   {}
func (o *callLog) ApprovalDecided(vocab.Decision, bool, time.Duration) {}

// Every exec call is reported as it answers, streamed or not, refused or
// run, and every process call: the daemon's metrics count them here, with
// no layer of their own on the request's path.
func TestObserverToldOfEveryToolCall(t *testing.T) {
	obs := &callLog{}
	m, _ := newTestManager(t, nil, func(o *Options) { o.Observer = obs })
	ctx := context.Background()
	if _, err := m.Exec(ctx, api.ExecParams{Command: "true"}); err != nil {
		t.Fatal(err)
	}
	var followed toolapi.Follower
	if _, err := m.ExecStream(ctx, api.ExecParams{Command: "true"}, func(f toolapi.Follower) { followed = f }); err != nil {
		t.Fatal(err)
	}
	if followed == nil {
		t.Fatal("ExecStream did not call started")
	}
	followed.Close()
	_, badErr := m.Exec(ctx, api.ExecParams{Command: "  "})
	if !errors.Is(badErr, toolapi.ErrInvalidInput) {
		t.Fatalf("blank command: %v, want invalid input", badErr)
	}
	_, _ = m.Process(ctx, api.ProcessParams{Action: "poll", SessionID: "nope"})
	_, _ = m.Process(ctx, api.ProcessParams{Action: "list"})

	obs.mu.Lock()
	defer obs.mu.Unlock()
	if len(obs.execs) != 3 {
		t.Fatalf("exec calls reported: %+v, want 3", obs.execs)
	}
	for i, want := range []string{api.StatusCompleted, api.StatusCompleted} {
		if c := obs.execs[i]; c.err != nil || c.status != want || c.took <= 0 {
			t.Errorf("exec call %d reported as %+v, want status %s, no error and a duration", i, c, want)
		}
	}
	if c := obs.execs[2]; !errors.Is(c.err, toolapi.ErrInvalidInput) {
		t.Errorf("the refused exec was reported as %+v, want its invalid-input error", c)
	}
	if len(obs.procs) != 2 || obs.procs[0] != "poll" || obs.procs[1] != "list" {
		t.Errorf("process calls reported: %q, want [poll list]", obs.procs)
	}
}
