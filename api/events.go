package api

import (
	"time"

	"github.com/sandboxctl/sandboxctl/vocab"
)

// Event is an asynchronous notification on GET /v1/events: a background
// session's end, approvals, steps (docs/tools.md).
type Event struct {
	// Cursor numbers the event in the daemon's event journal: reconnect
	// with GET /v1/events?since=CURSOR to get the events after it.
	Cursor     int64           `json:"cursor,omitempty"`
	Type       vocab.EventType `json:"type"`
	Text       string          `json:"text"`
	SessionID  string          `json:"sessionId,omitempty"`
	AgentID    string          `json:"agentId,omitempty"`
	SessionKey string          `json:"sessionKey,omitempty"`
	Time       time.Time       `json:"time"`
	Details    Details         `json:"details,omitzero"`
}

// EventGap is the type of the event that tells a client reconnecting with
// ?since=CURSOR that events after its cursor are no longer in the journal;
// details.missed counts them.
const EventGap vocab.EventType = "gap"
