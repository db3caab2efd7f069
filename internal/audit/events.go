package audit

import (
	"context"
	"fmt"

	"github.com/sandboxctl/sandboxctl/sessions/toolapi"
	"github.com/sandboxctl/sandboxctl/vocab"
)

// FromEvent is the record of an event of the daemon's event stream that
// no explicit record covers: a sandbox made for a command (a "step" event
// of step sandbox-create, phase end), a refused node. ok is false for
// every other event: exec, approval, exit and sandbox lifecycle events
// have records of their own, made where the actor is known.
func FromEvent(ev toolapi.Event) (r Record, ok bool) {
	str := func(k string) string {
		if v, ok := ev.Details[k]; ok && v != nil {
			return fmt.Sprint(v)
		}
		return ""
	}
	base := Record{Kind: KindSandbox, Actor: Actor{Via: "daemon"}, AgentID: ev.AgentID, SessionKey: ev.SessionKey, SessionID: ev.SessionID}
	switch ev.Type {
	case vocab.EventStep:
		if str("step") != "sandbox-create" || str("phase") != "end" {
			return Record{}, false
		}
		base.Sandbox = &Sandbox{Action: "create", Name: str("name"), Error: str("error")}
		return base, true
	case vocab.EventNodeRefused:
		return Record{Kind: KindNodeRefused, Actor: Actor{Via: "node-link"},
			Daemon: &Daemon{Node: str("nodeId") + " " + str("name"), Remote: str("remote"), Error: str("error")}}, true
	}
	return Record{}, false
}

// EventJournal is the events journal (eventjournal.Journal) as the
// session manager appends to it.
type EventJournal interface {
	Append(ev toolapi.Event) (toolapi.Event, error)
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
func (t Tap) Append(ev toolapi.Event) (toolapi.Event, error) {
	if r, ok := FromEvent(ev); ok {
		_ = t.Log.Record(context.Background(), r)
	}
	return t.Next.Append(ev)
}
