package audit

import (
	"context"
	"strings"

	"github.com/sandboxctl/sandboxctl/api"
	"github.com/sandboxctl/sandboxctl/vocab"
)

// FromEvent is the record of an event of the daemon's event stream that
// no explicit record covers: a sandbox made for a command (a "step" event
// of step sandbox-create, phase end), a refused node. ok is false for
// every other event: exec, approval, exit and sandbox lifecycle events
// have records of their own, made where the actor is known.
func FromEvent(ev api.Event) (r Record, ok bool) {
	d := ev.Details
	deref := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	switch ev.Type {
	case vocab.EventStep:
		if d.Step != "sandbox-create" || d.Phase != "end" {
			return Record{}, false
		}
		return Record{Kind: KindSandbox, Actor: Actor{Via: "daemon"}, AgentID: ev.AgentID, SessionKey: ev.SessionKey, SessionID: ev.SessionID,
			Host: "sandbox", Sandbox: &Sandbox{Action: "create", Error: d.Error}}, true
	case vocab.EventNodeRefused:
		return Record{Kind: KindNodeRefused, Actor: Actor{Via: "node-link"},
			Daemon: &Daemon{Node: strings.TrimSpace(deref(d.NodeID) + " " + deref(d.Name)), Remote: d.Remote, Error: d.Error}}, true
	}
	return Record{}, false
}

// EventJournal is the events journal (eventjournal.Journal) as the
// session manager appends to it.
type EventJournal interface {
	Append(ev api.Event) (api.Event, error)
}

// Tap is an EventJournal that also records the events FromEvent maps,
// in the order they are journalled: whatever publishes an event (the
// session manager, the sandbox lifecycle API, the node registry) is
// audited by construction.
type Tap struct {
	Next EventJournal
	Log  Recorder
}

// Append implements EventJournal.
func (t Tap) Append(ev api.Event) (api.Event, error) {
	if r, ok := FromEvent(ev); ok {
		_ = t.Log.Record(context.Background(), r)
	}
	return t.Next.Append(ev)
}
