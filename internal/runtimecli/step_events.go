package runtimecli

import (
	"sync/atomic"
	"time"

	"github.com/sandboxctl/sandboxctl/api"

	"github.com/sandboxctl/sandboxctl/sandbox"
	"github.com/sandboxctl/sandboxctl/sessions"
	"github.com/sandboxctl/sandboxctl/vocab"
)

// stepEvents publishes the sandbox manager's steps (image build, sandbox
// creation) as "step" events of the daemon (issue 15: progress in the
// API). The sandbox manager is made before the sessions manager that
// publishes, so the publisher is bound later (publishTo); steps before it
// are not published.
type stepEvents struct {
	pub atomic.Pointer[sessions.Manager]
}

var _ sandbox.StepObserver = (*stepEvents)(nil)

// publishTo makes m publish the steps from now on.
func (e *stepEvents) publishTo(m *sessions.Manager) { e.pub.Store(m) }

// StepStarted implements sandbox.StepObserver.
func (e *stepEvents) StepStarted(s sandbox.Scope, step sandbox.Step) func(error) {
	start := time.Now()
	e.publish(s, step, "start", "started", api.Details{})
	return func(err error) {
		d := api.Details{DurationMs: new(time.Since(start).Milliseconds())}
		text := "done"
		if err != nil {
			d.Error, text = err.Error(), "failed: "+err.Error()
		}
		e.publish(s, step, "end", text, d)
	}
}

func (e *stepEvents) publish(s sandbox.Scope, step sandbox.Step, phase, text string, details api.Details) {
	m := e.pub.Load()
	if m == nil {
		return
	}
	details.Step, details.Phase = string(step), phase
	m.Publish(api.Event{Type: vocab.EventStep, Text: string(step) + " " + text,
		AgentID: s.AgentID, SessionKey: s.SessionKey, Details: details})
}
