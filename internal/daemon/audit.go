package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/sandboxctl/sandboxctl/internal/audit"
)

// socketActor is the audit actor of a socket connection: its peer.
func socketActor(ctx context.Context) context.Context {
	p, ok := PeerFrom(ctx)
	if !ok {
		return audit.WithActor(ctx, audit.Actor{Via: "socket"})
	}
	uid := p.UID
	return audit.WithActor(ctx, audit.Actor{Via: "socket", UID: &uid, PID: p.PID})
}

// withActor serves next with a as the audit actor of its requests.
func withActor(a audit.Actor, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(w, r.WithContext(audit.WithActor(r.Context(), a)))
	})
}

// viaConsole marks the requests of the web console (keeping the socket
// peer's uid and pid, if any).
func viaConsole(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a := audit.ActorFrom(r.Context())
		a.Via = "console"
		next.ServeHTTP(w, r.WithContext(audit.WithActor(r.Context(), a)))
	})
}

// auditLimit bounds the records of one GET /v1/audit unless ?limit= says
// otherwise (at most auditMaxLimit).
const (
	auditLimit    = 1000
	auditMaxLimit = 100000
)

// handleAudit answers GET /v1/audit: the records of the audit log that
// pass ?agent= ?since= ?until= ?kind= (audit.ParseFilter), oldest first,
// one JSON object per line: the first ?limit= (default 1000), or with
// ?last=N the newest N. Operators
// only: an agent token is refused (pinnedRoutes), and on the socket only a
// peer that may decide approvals (not a process sandboxctl started).
func (s *Server) handleAudit(w http.ResponseWriter, r *http.Request) {
	if s.opts.AuditDir == "" {
		writeError(w, http.StatusServiceUnavailable, errors.New("the audit log is disabled (audit.enabled false)"))
		return
	}
	q := r.URL.Query()
	f, err := audit.ParseFilter(q, time.Now())
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	count := func(name string, def int) (int, bool) {
		v := q.Get(name)
		if v == "" {
			return def, true
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > auditMaxLimit {
			writeError(w, http.StatusBadRequest, fmt.Errorf("%s %q: want a whole number from 1 to %d", name, v, auditMaxLimit))
			return 0, false
		}
		return n, true
	}
	limit, ok := count("limit", auditLimit)
	if !ok {
		return
	}
	last, ok := count("last", 0)
	if !ok {
		return
	}
	var recs []audit.Record
	if last > 0 {
		// The newest last records: a ring while scanning.
		ring, n := make([]audit.Record, last), 0
		if err := audit.Scan(s.opts.AuditDir, f, func(rec audit.Record) bool { ring[n%last] = rec; n++; return true }); err != nil {
			writeError(w, http.StatusInternalServerError, err)
			return
		}
		for i := max(0, n-last); i < n; i++ {
			recs = append(recs, ring[i%last])
		}
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	enc := json.NewEncoder(w)
	if last > 0 {
		for _, rec := range recs {
			if enc.Encode(rec) != nil {
				return
			}
		}
		return
	}
	n := 0
	err = audit.Scan(s.opts.AuditDir, f, func(rec audit.Record) bool {
		if enc.Encode(rec) != nil {
			return false
		}
		n++
		return n < limit
	})
	if err != nil && n == 0 {
		writeError(w, http.StatusInternalServerError, err)
	}
}
