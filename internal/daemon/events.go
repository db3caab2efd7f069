package daemon

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/sandboxctl/sandboxctl/api"
	"github.com/sandboxctl/sandboxctl/internal/eventjournal"
)

// EventJournal is the daemon's numbered event history
// (eventjournal.Journal).
type EventJournal interface {
	Read(since int64, max int) (evs []api.Event, last int64, gap *eventjournal.Gap, changed <-chan struct{})
}

// eventBatch is the most events read from the journal at once.
const eventBatch = 256

// serveJournal answers GET /v1/events from the journal:
//
//   - ?since=CURSOR replays the events after CURSOR, then goes on live;
//     without it only new events come. A client that reconnects with the
//     last cursor it saw misses nothing, or gets a "gap" event first
//     saying how many events the journal no longer holds.
//   - ?agent=ID shows only that agent's events (and gaps). A pinned
//     client sees only its own agent's, whatever it asks.
//
// Each reader keeps only its cursor: events wait in the bounded journal,
// never in a per-client queue, so a slow reader costs no memory and loses
// nothing the journal still holds.
func (s *Server) serveJournal(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	since := int64(-1)
	if v := q.Get("since"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			writeError(w, http.StatusBadRequest, fmt.Errorf("since %q: want an event cursor, a whole number from 0", v))
			return
		}
		since = n
	}
	agent, filter := q.Get("agent"), q.Has("agent")
	pin, pinned := PinFrom(r.Context())
	if pinned {
		if filter && agent != pin.AgentID {
			writeError(w, http.StatusForbidden, fmt.Errorf("agent %q: this token is pinned to agent %q and sees only its events", agent, pin.AgentID))
			return
		}
		agent, filter = pin.AgentID, true
	}
	ctx, cancel := s.untilStopping(r.Context())
	defer cancel()
	j := s.opts.Journal
	if since < 0 {
		_, since, _, _ = j.Read(0, 0)
	}
	out, err := startNDJSON(r.Context(), w)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err)
		return
	}
	for {
		evs, _, gap, changed := j.Read(since, eventBatch)
		if gap != nil {
			if err := out.write(gapEvent(gap, pinned)); err != nil {
				return
			}
			if !gap.Reset {
				since = gap.Oldest - 1
			} else {
				since = 0
			}
		}
		for _, ev := range evs {
			since = ev.Cursor
			if filter && ev.AgentID != agent {
				continue
			}
			if err := out.write(ev); err != nil {
				return
			}
		}
		if len(evs) > 0 {
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		}
	}
}

// gapEvent tells a reader what it missed. A pinned reader is not told how
// many events there were: they may be other agents'.
func gapEvent(g *eventjournal.Gap, pinned bool) api.Event {
	ev := api.Event{Type: api.EventGap, Details: api.Details{Since: new(g.Since), Oldest: new(g.Oldest)}}
	switch {
	case g.Reset:
		ev.Text = fmt.Sprintf("The event journal restarted after cursor %d: events before the ones that follow were lost, how many is unknown; cursors start again.", g.Since)
		ev.Details.Reset = true
	case pinned:
		ev.Cursor = g.Oldest - 1
		ev.Text = fmt.Sprintf("Events after cursor %d and before %d are no longer in the journal (it keeps the most recent); some may have been yours.", g.Since, g.Oldest)
	default:
		ev.Cursor = g.Oldest - 1
		ev.Text = fmt.Sprintf("%d event(s) after cursor %d are no longer in the journal (it keeps the most recent); the next is %d.", g.Missed, g.Since, g.Oldest)
		ev.Details.Missed = new(g.Missed)
	}
	return ev
}
