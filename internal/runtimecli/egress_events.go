package runtimecli

import (
	"fmt"
	"sync/atomic"

	"github.com/sandboxctl/sandboxctl/api"
	"github.com/sandboxctl/sandboxctl/egress"
	"github.com/sandboxctl/sandboxctl/internal/metrics"
	"github.com/sandboxctl/sandboxctl/sessions"
	"github.com/sandboxctl/sandboxctl/vocab"
)

// egressEvents reports the egress gateways' decisions: every one to the
// metrics; every connection or request, and every refused DNS name, to the
// events journal (an allowed name is not journalled: a program resolves
// names far more often than it connects, and its connection is).
type egressEvents struct {
	metrics *metrics.Set
	pub     atomic.Pointer[sessions.Manager]
}

var _ egress.Observer = (*egressEvents)(nil)

// publishTo makes m publish the decisions from now on.
func (e *egressEvents) publishTo(m *sessions.Manager) { e.pub.Store(m) }

// EgressDecided implements egress.Observer.
func (e *egressEvents) EgressDecided(d egress.Decision) {
	e.metrics.EgressDecided(d)
	if d.Kind == egress.KindDNS && d.Allowed {
		return
	}
	m := e.pub.Load()
	if m == nil {
		return
	}
	m.Publish(api.Event{Type: vocab.EventEgress, Text: egressText(d), Details: api.Details{Egress: egressDetails(d)}})
}

func egressDetails(d egress.Decision) *api.EgressDetails {
	x := &api.EgressDetails{ScopeKey: d.ScopeKey, Kind: d.Kind, Host: d.Host, Port: int(d.Port), Decision: "denied",
		Rule: d.Rule, Reason: d.Reason, Upstream: d.Upstream, BytesOut: d.BytesOut, BytesIn: d.BytesIn, DurationMs: d.Duration.Milliseconds()}
	if d.Allowed {
		x.Decision = "allowed"
	}
	return x
}

func egressText(d egress.Decision) string {
	dest := d.Host
	if d.Port != 0 {
		dest = fmt.Sprintf("%s:%d", d.Host, d.Port)
	}
	if d.Allowed {
		return fmt.Sprintf("egress %s: allowed %s %s (rule %s): %d bytes out, %d in", d.ScopeKey, d.Kind, dest, d.Rule, d.BytesOut, d.BytesIn)
	}
	return fmt.Sprintf("egress %s: denied %s %s: %s", d.ScopeKey, d.Kind, dest, d.Reason)
}
