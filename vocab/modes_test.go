package vocab

import (
	"errors"
	"strings"
	"testing"
)

// TestParsers: every name parses to itself; anything else is a *ModeError
// naming the kind, the value and the valid names.
func TestParsers(t *testing.T) {
	for _, s := range []string{"deny", "allowlist", "full"} {
		if m, err := ParseSecurity(s); err != nil || string(m) != s {
			t.Errorf("ParseSecurity(%q) = %q, %v", s, m, err)
		}
	}
	for _, s := range []string{"sandbox", "gateway", "node"} {
		if h, err := ParseHost(s); err != nil || string(h) != s {
			t.Errorf("ParseHost(%q) = %q, %v", s, h, err)
		}
	}
	for _, s := range []string{"allow-once", "allow-always", "deny"} {
		if d, err := ParseApprovalDecision(s); err != nil || string(d) != s {
			t.Errorf("ParseApprovalDecision(%q) = %q, %v", s, d, err)
		}
	}
	for _, s := range []string{"off", "on-miss", "always"} {
		if m, err := ParseAsk(s); err != nil || string(m) != s {
			t.Errorf("ParseAsk(%q) = %q, %v", s, m, err)
		}
	}
	bad := []struct {
		name  string
		parse func(string) error
		in    string
		valid string
	}{
		{"security", func(s string) error { _, err := ParseSecurity(s); return err }, "Full", "deny, allowlist, full"},
		{"security", func(s string) error { _, err := ParseSecurity(s); return err }, "", "deny, allowlist, full"},
		{"ask", func(s string) error { _, err := ParseAsk(s); return err }, "sometimes", "off, on-miss, always"},
		{"ask", func(s string) error { _, err := ParseAsk(s); return err }, "on_miss", "off, on-miss, always"},
		{"askFallback", func(s string) error { _, err := ParseAskFallback(s); return err }, "ask", "deny, allowlist, full"},
		{"elevated level", func(s string) error { _, err := ParseElevatedLevel(s); return err }, "root", "off, ask, on, full"},
		{"decision", func(s string) error { _, err := ParseApprovalDecision(s); return err }, "allow", "allow-once, allow-always, deny"},
		{"host", func(s string) error { _, err := ParseHost(s); return err }, "Gateway", "sandbox, gateway, node"},
	}
	for _, b := range bad {
		err := b.parse(b.in)
		var me *ModeError
		if !errors.Is(err, ErrUnknownMode) || !errors.As(err, &me) || me.Kind != b.name || me.Value != b.in {
			t.Errorf("%s %q: err = %v, want *ModeError wrapping ErrUnknownMode", b.name, b.in, err)
			continue
		}
		if !strings.Contains(err.Error(), b.valid) || !strings.Contains(err.Error(), "\""+b.in+"\"") {
			t.Errorf("%s %q: message %q must name the value and %s", b.name, b.in, err, b.valid)
		}
	}
	if m, err := ParseAskFallback(""); err != nil || m != SecurityDeny {
		t.Errorf("empty askFallback = %q, %v; want deny", m, err)
	}
	minCases := [][3]Security{{"full", "allowlist", "allowlist"}, {"deny", "full", "deny"}, {"full", "full", "full"}, {"bogus", "full", "deny"}}
	for _, c := range minCases {
		if got := MinSecurity(c[0], c[1]); got != c[2] {
			t.Errorf("MinSecurity(%s,%s) = %s, want %s", c[0], c[1], got, c[2])
		}
	}
	maxCases := [][3]Ask{{"off", "on-miss", "on-miss"}, {"always", "off", "always"}, {"off", "off", "off"}, {"x", "off", "always"}}
	for _, c := range maxCases {
		if got := MaxAsk(c[0], c[1]); got != c[2] {
			t.Errorf("MaxAsk(%s,%s) = %s, want %s", c[0], c[1], got, c[2])
		}
	}
	if s, a := EffectiveModes(SecurityAllowlist, SecurityFull, AskOnMiss, AskOff, ElevatedOff); s != SecurityAllowlist || a != AskOnMiss {
		t.Errorf("request cannot raise security or lower ask: got %s %s", s, a)
	}
	if s, a := EffectiveModes(SecurityFull, SecurityDeny, AskOff, AskAlways, ElevatedOff); s != SecurityDeny || a != AskAlways {
		t.Errorf("request lowers security and raises ask: got %s %s", s, a)
	}
	if s, a := EffectiveModes(SecurityAllowlist, "", AskAlways, "", ElevatedFull); s != SecurityFull || a != AskOff {
		t.Errorf("elevated full: got %s %s", s, a)
	}
}
