package egress

import "time"

// Decision is what the gateway decided about one connection, request or
// DNS question of a sandbox; every one is reported to the Observer.
type Decision struct {
	ScopeKey string
	// Kind is how the sandbox asked: "dns", "connect" (the proxy's CONNECT),
	// "http" (a plain-HTTP request, through the proxy or transparent), "tls"
	// (a TLS connection to the gateway's port, transparent).
	Kind string
	// Host is the name (or IP literal) asked for, Port its port.
	Host string
	Port uint16
	// Upstream is the address the proxy connected to ("" when none).
	Upstream string
	Allowed  bool
	// Rule is the allow rule that let it through ("" when denied), Reason
	// why it was denied.
	Rule   string
	Reason string
	// BytesOut went from the sandbox upstream, BytesIn came back.
	BytesOut, BytesIn int64
	Duration          time.Duration
}

// Observer receives every Decision (the events journal and metrics).
type Observer interface {
	EgressDecided(Decision)
}

// Decision kinds.
const (
	KindDNS     = "dns"
	KindConnect = "connect"
	KindHTTP    = "http"
	KindTLS     = "tls"
)
