package guard

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	cerrdefs "github.com/containerd/errdefs"

	"github.com/sandboxctl/sandboxctl/vocab"
)

// Quota errors of the approvals store: an agent cannot grow approvals.json
// (which every gateway command of every agent reads) without bound.
// Both are errdefs resource-exhausted (HTTP 429); nothing is stored.
var (
	ErrApprovalQuota    = fmt.Errorf("%w: too many pending approval requests", cerrdefs.ErrResourceExhausted)
	ErrApprovalTooLarge = fmt.Errorf("%w: approval request too large", cerrdefs.ErrResourceExhausted)
)

// StoreLimits bound what approvals.json holds.
type StoreLimits struct {
	// PendingPerAgent and Pending cap the requests awaiting a decision
	// (undecided, not expired) of one agent and of all agents.
	PendingPerAgent int
	Pending         int
	// RequestBytes caps the command line plus its environment (names and
	// values) of one request.
	RequestBytes int
	// Retained caps the finished requests kept for the record (decided,
	// used or expired); the oldest go first.
	Retained int
}

// DefaultStoreLimits are the limits of a store opened without WithLimits
// (and the configuration's defaults under limits.approvals).
func DefaultStoreLimits() StoreLimits {
	return StoreLimits{PendingPerAgent: 8, Pending: 64, RequestBytes: 64 << 10, Retained: 512}
}

// WithLimits sets the store's quotas; a zero field keeps its default.
func WithLimits(l StoreLimits) StoreOption {
	return func(s *Store) error {
		if l.PendingPerAgent < 0 || l.Pending < 0 || l.RequestBytes < 0 || l.Retained < 0 {
			return fmt.Errorf("WithLimits: a limit is negative: %+v", l)
		}
		d := DefaultStoreLimits()
		s.lim = StoreLimits{
			PendingPerAgent: cmp.Or(l.PendingPerAgent, d.PendingPerAgent),
			Pending:         cmp.Or(l.Pending, d.Pending),
			RequestBytes:    cmp.Or(l.RequestBytes, d.RequestBytes),
			Retained:        cmp.Or(l.Retained, d.Retained),
		}
		return nil
	}
}

// requestBytes is what a request costs against StoreLimits.RequestBytes.
func requestBytes(req PendingRequest) int {
	n := len(req.Command) + len(req.Cwd)
	for k, v := range req.Env {
		n += len(k) + len(v)
	}
	return n
}

func (p *Pending) awaiting(now time.Time) bool {
	return p.Decision == "" && now.UnixMilli() < p.ExpiresAtMs
}

// checkPendingQuota refuses a new request of agentID when it or all agents
// have as many awaiting a decision as the limits allow.
func (s *Store) checkPendingQuota(st *fileState, agentID string, now time.Time) error {
	mine, all := 0, 0
	for _, p := range st.Approvals {
		if !p.awaiting(now) {
			continue
		}
		all++
		if p.AgentID == agentID {
			mine++
		}
	}
	if mine >= s.lim.PendingPerAgent {
		return fmt.Errorf("agent %q has %d approval requests awaiting a decision, the limit (limits.approvals.pendingPerAgent) is %d; decide or let them expire first: %w", agentID, mine, s.lim.PendingPerAgent, ErrApprovalQuota)
	}
	if all >= s.lim.Pending {
		return fmt.Errorf("%d approval requests are awaiting a decision, the limit (limits.approvals.pending) is %d: %w", all, s.lim.Pending, ErrApprovalQuota)
	}
	return nil
}

// finished reports whether p can no longer run anything: used, denied, or
// expired undecided.
func (p *Pending) finished(now time.Time) bool {
	return p.Consumed || p.Decision == vocab.DenyOnce || (p.Decision == "" && now.UnixMilli() >= p.ExpiresAtMs)
}

// pruneRetained drops the oldest finished requests beyond s.lim.Retained.
// Requests awaiting a decision, or approved and not yet used, are never
// dropped (the pending quota bounds them).
func (s *Store) pruneRetained(st *fileState, now time.Time) {
	var old []*Pending
	for _, p := range st.Approvals {
		if p.finished(now) {
			old = append(old, p)
		}
	}
	excess := len(old) - s.lim.Retained
	if excess <= 0 {
		return
	}
	slices.SortStableFunc(old, func(a, b *Pending) int {
		return cmp.Compare(max(a.ExpiresAtMs, a.DecidedAtMs), max(b.ExpiresAtMs, b.DecidedAtMs))
	})
	drop := map[*Pending]bool{}
	for _, p := range old[:excess] {
		drop[p] = true
	}
	st.Approvals = slices.DeleteFunc(st.Approvals, func(p *Pending) bool { return drop[p] })
}
