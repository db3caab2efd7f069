package sandboxconfig

import (
	"errors"
	"strings"
	"testing"
)

func TestNetworkRefusals(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*Config)
		want   string
	}{
		{"bad mode", func(c *Config) { c.Network.Egress = "some" }, `sandbox.network.egress "some": must be none, allowlist or full`},
		{"full without unsafe", func(c *Config) { c.Network.Egress = "full"; c.Docker.Network = "bridge" }, "sandbox.docker.unsafe.fullEgress"},
		{"full without a network", func(c *Config) { c.Network.Egress = "full"; c.Docker.Unsafe.FullEgress = true }, "needs a network to give"},
		{"allow without allowlist", func(c *Config) { c.Network.Allow = []AllowRule{{Domain: "a.example"}} }, "only used with sandbox.network.egress allowlist"},
		{"allowlist with a docker network", func(c *Config) { c.Network.Egress = "allowlist"; c.Docker.Network = "bridge" }, "leave sandbox.docker.network none"},
		{"allowlist with a pool", func(c *Config) { c.Network.Egress = "allowlist"; c.Pool.Size = 1 }, "sandbox.pool.size"},
		{"domain and cidr", func(c *Config) { allow(c, AllowRule{Domain: "a.example", CIDR: "10.0.0.0/8"}) }, "sandbox.network.allow[0]: names both"},
		{"empty rule", func(c *Config) { allow(c, AllowRule{Ports: []int{443}}) }, "needs a domain or a cidr"},
		{"inner wildcard", func(c *Config) { allow(c, AllowRule{Domain: "a.*.example"}) }, "whole first label"},
		{"tld wildcard", func(c *Config) { allow(c, AllowRule{Domain: "*.com"}) }, "at least two labels"},
		{"ip as domain", func(c *Config) { allow(c, AllowRule{Domain: "10.1.2.3"}) }, "use cidr"},
		{"not a name", func(c *Config) { allow(c, AllowRule{Domain: "a b.example"}) }, "not a domain name"},
		{"bad cidr", func(c *Config) { allow(c, AllowRule{CIDR: "10.0.0.0/33"}) }, "not a CIDR"},
		{"bad port", func(c *Config) { allow(c, AllowRule{Domain: "a.example", Ports: []int{70000}}) }, "1-65535"},
		{"methods on cidr", func(c *Config) { allow(c, AllowRule{CIDR: "10.0.0.0/8", Methods: []string{"GET"}}) }, "domain rules only"},
		{"CONNECT method", func(c *Config) { allow(c, AllowRule{Domain: "a.example", Methods: []string{"connect"}}) }, "CONNECT"},
		{"relative path", func(c *Config) { allow(c, AllowRule{Domain: "a.example", Paths: []string{"v1"}}) }, "starts with /"},
		{"bad upstream dns", func(c *Config) { allow(c); c.Network.UpstreamDNS = "dns.example" }, "IP address or IP:port"},
		{"agents without allowlist", func(c *Config) { c.Network.Agents = map[string][]AllowRule{"a": {{Domain: "a.example"}}} }, "sandbox.network.agents: is only used"},
		{"bad agent rule", func(c *Config) { allow(c); c.Network.Agents = map[string][]AllowRule{"bot": {{CIDR: "x"}}} }, `sandbox.network.agents.bot[0].cidr "x"`},
		{"agents with scope shared", func(c *Config) {
			allow(c)
			c.Scope = "shared"
			c.Network.Agents = map[string][]AllowRule{"bot": {{Domain: "a.example"}}}
		}, "scope agent or session"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			tc.mutate(&c)
			err := c.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("got %v, want an invalid-config error with %q", err, tc.want)
			}
		})
	}
}

func allow(c *Config, rules ...AllowRule) {
	c.Network.Egress = EgressAllowlist
	c.Network.Allow = rules
}

func TestNetworkParses(t *testing.T) {
	c := DefaultConfig()
	allow(&c, AllowRule{Domain: "API.Example.com.", Ports: []int{443}}, AllowRule{Domain: "*.example.org"},
		AllowRule{CIDR: "10.9.0.7/24", Ports: []int{5432}}, AllowRule{Domain: "x.org", Methods: []string{"get"}, Paths: []string{"/v1/"}})
	c.Network.UpstreamDNS = "10.0.0.2"
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	n, err := c.ParsedNetwork()
	if err != nil {
		t.Fatal(err)
	}
	r := n.Rules
	if r[0].Domain != "api.example.com" || r[0].Wildcard || !r[0].AllowsPort(443) || r[0].AllowsPort(80) {
		t.Errorf("rule 0: %+v", r[0])
	}
	if !r[1].Wildcard || !r[1].MatchesHost("a.example.org") || r[1].MatchesHost("example.org") || r[1].MatchesHost("badexample.org") || !r[1].AllowsPort(80) || r[1].AllowsPort(22) {
		t.Errorf("rule 1: %+v", r[1])
	}
	if r[2].CIDR.String() != "10.9.0.0/24" || !r[2].AllowsPort(5432) || r[2].AllowsPort(443) {
		t.Errorf("rule 2: %+v", r[2])
	}
	if r[3].Methods[0] != "GET" || n.UpstreamDNS.String() != "10.0.0.2:53" {
		t.Errorf("rule 3 %+v, upstream %v", r[3], n.UpstreamDNS)
	}
}

func TestNetworkPerAgent(t *testing.T) {
	c := DefaultConfig()
	allow(&c, AllowRule{Domain: "all.example"})
	c.Network.Agents = map[string][]AllowRule{"bot": {{Domain: "bot.example"}}}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	n, _ := c.ParsedNetwork()
	if r := n.For("bot").Rules; len(r) != 1 || r[0].Domain != "bot.example" {
		t.Errorf("bot's rules: %+v", r)
	}
	if r := n.For("other").Rules; len(r) != 1 || r[0].Domain != "all.example" {
		t.Errorf("another agent's rules: %+v", r)
	}
}
