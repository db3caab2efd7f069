package egress

import (
	"net/netip"
	"testing"

	"github.com/sandboxctl/sandboxctl/sandbox/sandboxconfig"
)

func testPolicy(t *testing.T) Policy {
	t.Helper()
	n, err := sandboxconfig.ParseNetwork(sandboxconfig.NetworkConfig{Egress: "allowlist", Allow: []sandboxconfig.AllowRule{
		{Domain: "api.example.com", Ports: []int{443}},
		{Domain: "*.example.org"},
		{CIDR: "10.9.0.0/24", Ports: []int{5432}},
		{CIDR: "127.0.0.5/32"},
	}}, false)
	if err != nil {
		t.Fatal(err)
	}
	return Policy{Network: n}
}

func TestPolicyDecides(t *testing.T) {
	p := testPolicy(t)
	for _, tc := range []struct {
		host string
		port uint16
		want bool
	}{
		{"api.example.com", 443, true},
		{"API.example.com.", 443, true},
		{"api.example.com", 80, false},
		{"example.com", 443, false},
		{"x.api.example.com", 443, false},
		{"a.example.org", 80, true},
		{"a.b.example.org", 443, true},
		{"example.org", 443, false},
		{"evilexample.org", 443, false},
		{"a.example.org", 22, false},
		{"10.9.0.7", 5432, true},
		{"10.9.0.7", 443, false},
		{"10.9.1.7", 5432, false},
		{"[::ffff:10.9.0.7]", 5432, true},
		{"1.2.3.4", 443, false},
	} {
		if _, got := p.Host(tc.host, tc.port); got != tc.want {
			t.Errorf("Host(%s, %d) = %v, want %v", tc.host, tc.port, got, tc.want)
		}
	}
	if !p.Name("q.example.org") || p.Name("example.org") || p.Name("10.9.0.7") {
		t.Error("Name answers the wrong names")
	}
	if got := p.Ports(); len(got) != 2 || got[0] != 80 || got[1] != 443 {
		t.Errorf("Ports = %v", got)
	}
}

func TestUpstreamRefusesLocal(t *testing.T) {
	p := testPolicy(t)
	local := []netip.Addr{netip.MustParseAddr("192.0.2.2")}
	for _, tc := range []struct {
		ip   string
		want bool
	}{
		{"93.184.216.34", true},
		{"127.0.0.1", false},
		{"127.0.0.5", true}, // a cidr rule names it
		{"169.254.169.254", false},
		{"0.0.0.0", false},
		{"::1", false},
		{"fe80::1", false},
		{"224.0.0.1", false},
		{"192.0.2.2", false},
		{"::ffff:127.0.0.1", false},
	} {
		if got := Upstream(p, netip.MustParseAddr(tc.ip), 443, local); got != tc.want {
			t.Errorf("Upstream(%s) = %v, want %v", tc.ip, got, tc.want)
		}
	}
}

func TestRequestRule(t *testing.T) {
	r := sandboxconfig.Rule{Methods: []string{"GET"}, Paths: []string{"/v1/"}}
	if !Request(r, "get", "/v1/x") || Request(r, "POST", "/v1/x") || Request(r, "GET", "/v2/") {
		t.Error("methods/paths misjudged")
	}
	if !Request(sandboxconfig.Rule{}, "DELETE", "/") {
		t.Error("a rule without methods/paths allows any request")
	}
}
