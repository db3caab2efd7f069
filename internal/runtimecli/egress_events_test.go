package runtimecli

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sandboxctl/sandboxctl/egress"
	"github.com/sandboxctl/sandboxctl/internal/eventjournal"
	"github.com/sandboxctl/sandboxctl/internal/metrics"
	"github.com/sandboxctl/sandboxctl/sessions"
	"github.com/sandboxctl/sandboxctl/sessions/config"
	"github.com/sandboxctl/sandboxctl/vocab"
)

// TestEgressDecisionsJournalled: a gateway's decisions reach the events
// journal (connections allowed and denied, refused DNS names; not allowed
// DNS answers) with their details, and every one reaches the metrics.
func TestEgressDecisionsJournalled(t *testing.T) {
	j, err := eventjournal.Open(t.TempDir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	mgr, err := sessions.New(sessions.Options{Config: config.Default(), Hosts: map[vocab.Host]sessions.Host{}, Journal: j})
	if err != nil {
		t.Fatal(err)
	}
	set := metrics.NewSet()
	ev := &egressEvents{metrics: set}
	ev.publishTo(mgr)
	for _, d := range []egress.Decision{
		{ScopeKey: "agent:a", Kind: egress.KindConnect, Host: "api.example.com", Port: 443, Allowed: true, Rule: "api.example.com", Upstream: "10.0.0.1:443", BytesOut: 100, BytesIn: 2000, Duration: time.Second},
		{ScopeKey: "agent:a", Kind: egress.KindTLS, Host: "evil.example", Port: 443, Reason: "no allow rule names it"},
		{ScopeKey: "agent:a", Kind: egress.KindDNS, Host: "api.example.com", Allowed: true},
		{ScopeKey: "agent:a", Kind: egress.KindDNS, Host: "data.evil.example", Reason: "no allow rule names it"},
	} {
		ev.EgressDecided(d)
	}
	evs, _, _, _ := j.Read(0, 100)
	if len(evs) != 3 {
		t.Fatalf("journalled %d events, want 3: %+v", len(evs), evs)
	}
	a, d, dns := evs[0], evs[1], evs[2]
	if a.Type != vocab.EventEgress || a.Details.Egress == nil || a.Details.Egress.Decision != "allowed" || a.Details.Egress.BytesIn != 2000 ||
		a.Details.Egress.Rule != "api.example.com" || a.Details.Egress.ScopeKey != "agent:a" || !strings.Contains(a.Text, "allowed connect api.example.com:443") {
		t.Errorf("allowed event: %+v %+v", a, a.Details.Egress)
	}
	if d.Details.Egress == nil || d.Details.Egress.Decision != "denied" || d.Details.Egress.Reason == "" || d.Details.Egress.Host != "evil.example" {
		t.Errorf("denied event: %+v", d.Details.Egress)
	}
	if dns.Details.Egress == nil || dns.Details.Egress.Kind != "dns" || dns.Details.Egress.Host != "data.evil.example" {
		t.Errorf("dns event: %+v", dns.Details.Egress)
	}
	rec := httptest.NewRecorder()
	set.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body := rec.Body.String()
	for _, want := range []string{
		`sandboxctl_egress_decisions_total{decision="allowed",kind="connect"} 1`,
		`sandboxctl_egress_decisions_total{decision="denied",kind="tls"} 1`,
		`sandboxctl_egress_decisions_total{decision="allowed",kind="dns"} 1`,
		`sandboxctl_egress_decisions_total{decision="denied",kind="dns"} 1`,
		`sandboxctl_egress_bytes_total{direction="in"} 2000`,
		`sandboxctl_egress_bytes_total{direction="out"} 100`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}
