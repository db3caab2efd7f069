package api

// EgressDetails is details.egress of an egress event: one decision of a
// sandbox's egress gateway (docs/egress.md).
type EgressDetails struct {
	// ScopeKey is the sandbox's scope.
	ScopeKey string `json:"scopeKey"`
	// Kind is how the sandbox asked: dns, connect, http or tls.
	Kind string `json:"kind"`
	Host string `json:"host"`
	Port int    `json:"port,omitempty"`
	// Decision is "allowed" or "denied".
	Decision string `json:"decision"`
	// Rule is the allow rule that let it through, Reason why it was denied.
	Rule     string `json:"rule,omitempty"`
	Reason   string `json:"reason,omitempty"`
	Upstream string `json:"upstream,omitempty"`
	// BytesOut went from the sandbox upstream, BytesIn came back.
	BytesOut   int64 `json:"bytesOut"`
	BytesIn    int64 `json:"bytesIn"`
	DurationMs int64 `json:"durationMs,omitempty"`
}
