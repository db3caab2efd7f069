package sandboxconfig

import (
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"sync"
)

// domainName is a lower-case ASCII host name: dot-separated labels of
// letters, digits and inner hyphens (an internationalised name is written
// in its punycode form, xn--...).
var domainName = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)*[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)
})

// Egress modes of sandbox.network.egress.
const (
	// EgressNone: no network at all (the default).
	EgressNone = "none"
	// EgressAllowlist: an internal network whose only peer is the
	// daemon's resolver and proxy, which let out what Allow names
	// (docs/egress.md).
	EgressAllowlist = "allowlist"
	// EgressFull: the network of sandbox.docker.network, unfiltered; only
	// with sandbox.docker.unsafe.fullEgress.
	EgressFull = "full"
)

// NetworkConfig is sandbox.network: how a sandbox reaches the network.
type NetworkConfig struct {
	Egress string      `yaml:"egress" json:"egress"`
	Allow  []AllowRule `yaml:"allow" json:"allow,omitempty"`
	// Agents replace Allow for the sandboxes of the agents they name (by
	// agent id): a per-agent policy from the config, never from a request.
	Agents map[string][]AllowRule `yaml:"agents" json:"agents,omitempty"`
	// UpstreamDNS is the DNS server (ip or ip:port) the proxy resolves
	// allowed names with; "" is the daemon's own resolver (the system's).
	UpstreamDNS string `yaml:"upstreamDNS" json:"upstreamDNS,omitempty"`
}

// AllowRule is one entry of sandbox.network.allow, as written.
type AllowRule struct {
	Domain  string   `yaml:"domain" json:"domain,omitempty"`
	CIDR    string   `yaml:"cidr" json:"cidr,omitempty"`
	Ports   []int    `yaml:"ports" json:"ports,omitempty"`
	Methods []string `yaml:"methods" json:"methods,omitempty"`
	Paths   []string `yaml:"paths" json:"paths,omitempty"`
}

// Network is sandbox.network parsed: what the egress proxy enforces.
type Network struct {
	Egress string
	Rules  []Rule
	// Agents are the per-agent rules (sandbox.network.agents).
	Agents map[string][]Rule
	// UpstreamDNS is the upstream resolver; invalid (zero) when the
	// daemon's own resolver is used.
	UpstreamDNS netip.AddrPort
}

// Rule is one parsed allow rule. Exactly one of Domain and CIDR is set.
type Rule struct {
	// Index is the rule's position in sandbox.network.allow; Text is how
	// events and explain name it.
	Index int
	Text  string
	// Domain is a lower-case ASCII (punycode) name; Wildcard makes it
	// match every name under Domain (written "*.Domain"), not Domain
	// itself.
	Domain   string
	Wildcard bool
	CIDR     netip.Prefix
	// Ports are the allowed destination ports; empty: 80 and 443 for a
	// domain, any port for a CIDR.
	Ports []uint16
	// Methods (upper case) and Paths (prefixes) limit plain-HTTP requests;
	// empty: any.
	Methods []string
	Paths   []string
}

// DefaultDomainPorts are the ports a domain rule without ports allows.
var DefaultDomainPorts = []uint16{80, 443}

// AllowsPort reports whether the rule allows port.
func (r Rule) AllowsPort(port uint16) bool {
	if len(r.Ports) == 0 {
		return r.Domain == "" || slices.Contains(DefaultDomainPorts, port)
	}
	return slices.Contains(r.Ports, port)
}

// MatchesHost reports whether host (lower case, no trailing dot) is the
// rule's domain.
func (r Rule) MatchesHost(host string) bool {
	if r.Domain == "" {
		return false
	}
	if r.Wildcard {
		return strings.HasSuffix(host, "."+r.Domain)
	}
	return host == r.Domain
}

// ParseNetwork parses and checks sandbox.network; unsafe says whether
// sandbox.docker.unsafe.fullEgress is set.
func ParseNetwork(n NetworkConfig, unsafeFull bool) (Network, error) {
	out := Network{Egress: n.Egress}
	switch n.Egress {
	case EgressNone, EgressAllowlist:
	case EgressFull:
		if !unsafeFull {
			return out, &ConfigError{Field: "sandbox.network.egress", Value: n.Egress, Msg: "full egress reaches everything the Engine's network reaches; set sandbox.docker.unsafe.fullEgress to accept it"}
		}
	case "":
		return out, &ConfigError{Field: "sandbox.network.egress", Msg: "must not be empty (none, allowlist or full)"}
	default:
		return out, &ConfigError{Field: "sandbox.network.egress", Value: n.Egress, Msg: "must be none, allowlist or full"}
	}
	if n.Egress != EgressAllowlist && len(n.Allow) > 0 {
		return out, &ConfigError{Field: "sandbox.network.allow", Msg: "is only used with sandbox.network.egress allowlist"}
	}
	if n.UpstreamDNS != "" {
		ap, err := netip.ParseAddrPort(n.UpstreamDNS)
		if err != nil {
			a, aerr := netip.ParseAddr(n.UpstreamDNS)
			if aerr != nil {
				return out, &ConfigError{Field: "sandbox.network.upstreamDNS", Value: n.UpstreamDNS, Msg: "must be an IP address or IP:port"}
			}
			ap = netip.AddrPortFrom(a, 53)
		}
		out.UpstreamDNS = ap
	}
	if n.Egress != EgressAllowlist && len(n.Agents) > 0 {
		return out, &ConfigError{Field: "sandbox.network.agents", Msg: "is only used with sandbox.network.egress allowlist"}
	}
	var err error
	if out.Rules, err = parseRules("sandbox.network.allow", n.Allow); err != nil {
		return out, err
	}
	for id, rules := range n.Agents {
		if strings.TrimSpace(id) == "" {
			return out, &ConfigError{Field: "sandbox.network.agents", Msg: "an agent id must not be empty"}
		}
		parsed, err := parseRules("sandbox.network.agents."+id, rules)
		if err != nil {
			return out, err
		}
		if out.Agents == nil {
			out.Agents = map[string][]Rule{}
		}
		out.Agents[id] = parsed
	}
	return out, nil
}

// For is the policy of agentID's sandboxes: its own rules when
// sandbox.network.agents names it, else the top-level ones.
func (n Network) For(agentID string) Network {
	out := n
	if rules, ok := n.Agents[agentID]; ok {
		out.Rules = rules
	}
	out.Agents = nil
	return out
}

func parseRules(field string, allow []AllowRule) ([]Rule, error) {
	var out []Rule
	for i, a := range allow {
		r, err := parseRule(fmt.Sprintf("%s[%d]", field, i), i, a)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

func parseRule(field string, i int, a AllowRule) (Rule, error) {
	r := Rule{Index: i}
	switch {
	case a.Domain != "" && a.CIDR != "":
		return r, &ConfigError{Field: field, Msg: "names both a domain and a cidr; give one per rule"}
	case a.Domain == "" && a.CIDR == "":
		return r, &ConfigError{Field: field, Msg: "needs a domain or a cidr"}
	case a.Domain != "":
		d := strings.TrimSuffix(strings.TrimSpace(a.Domain), ".")
		if rest, ok := strings.CutPrefix(d, "*."); ok {
			r.Wildcard, d = true, rest
		}
		if strings.Contains(d, "*") {
			return r, &ConfigError{Field: field + ".domain", Value: a.Domain, Msg: "a wildcard is only allowed as the whole first label (*.example.com)"}
		}
		if _, err := netip.ParseAddr(d); err == nil {
			return r, &ConfigError{Field: field + ".domain", Value: a.Domain, Msg: "is an IP address; use cidr (e.g. " + d + "/32)"}
		}
		ascii := strings.ToLower(d)
		if len(ascii) > 253 || !domainName().MatchString(ascii) {
			return r, &ConfigError{Field: field + ".domain", Value: a.Domain, Msg: "not a domain name (an internationalised name is written in punycode, xn--...)"}
		}
		if r.Wildcard && !strings.Contains(ascii, ".") {
			return r, &ConfigError{Field: field + ".domain", Value: a.Domain, Msg: "a wildcard must be under a domain of at least two labels (*.example.com, not *.com)"}
		}
		r.Domain = ascii
		r.Text = a.Domain
	default:
		p, err := netip.ParsePrefix(strings.TrimSpace(a.CIDR))
		if err != nil {
			return r, &ConfigError{Field: field + ".cidr", Value: a.CIDR, Msg: "not a CIDR such as 10.9.0.0/24"}
		}
		r.CIDR = p.Masked()
		r.Text = r.CIDR.String()
		if len(a.Methods) > 0 || len(a.Paths) > 0 {
			return r, &ConfigError{Field: field, Msg: "methods and paths apply to domain rules only"}
		}
	}
	for _, p := range a.Ports {
		if p < 1 || p > 65535 {
			return r, &ConfigError{Field: field + ".ports", Value: fmt.Sprint(p), Msg: "a port is 1-65535"}
		}
		r.Ports = append(r.Ports, uint16(p))
	}
	for _, m := range a.Methods {
		m = strings.ToUpper(strings.TrimSpace(m))
		if m == "" || strings.ContainsFunc(m, func(c rune) bool { return c < 'A' || c > 'Z' }) {
			return r, &ConfigError{Field: field + ".methods", Value: m, Msg: "not an HTTP method"}
		}
		if m == "CONNECT" {
			return r, &ConfigError{Field: field + ".methods", Value: m, Msg: "CONNECT is how the proxy is reached, not a request method a rule allows"}
		}
		r.Methods = append(r.Methods, m)
	}
	for _, p := range a.Paths {
		if !strings.HasPrefix(p, "/") {
			return r, &ConfigError{Field: field + ".paths", Value: p, Msg: "a path prefix starts with /"}
		}
		r.Paths = append(r.Paths, p)
	}
	if len(r.Ports) > 0 {
		r.Text += fmt.Sprintf(" ports %v", r.Ports)
	}
	return r, nil
}

// ParsedNetwork is sandbox.network parsed (Validate has checked it).
func (c Config) ParsedNetwork() (Network, error) {
	return ParseNetwork(c.Network, c.Docker.Unsafe.FullEgress)
}

// checkNetwork checks sandbox.network against the rest of the config.
func (c Config) checkNetwork() error {
	n, err := c.ParsedNetwork()
	if err != nil {
		return err
	}
	switch n.Egress {
	case EgressAllowlist:
		if c.Docker.Network != "none" {
			return &ConfigError{Field: "sandbox.docker.network", Value: c.Docker.Network, Msg: "with sandbox.network.egress allowlist each sandbox gets an internal network of its own; leave sandbox.docker.network none"}
		}
		if c.Pool.Size > 0 {
			return &ConfigError{Field: "sandbox.pool.size", Value: fmt.Sprint(c.Pool.Size), Msg: "is not supported with sandbox.network.egress allowlist yet (a pooled sandbox's network is made for its scope)"}
		}
		if len(c.Engines) > 1 {
			return &ConfigError{Field: "sandbox.network.egress", Value: n.Egress, Msg: "allowlist is not supported with several Engines (sandbox.engines) yet"}
		}
		if len(n.Agents) > 0 && c.Scope == "shared" {
			return &ConfigError{Field: "sandbox.network.agents", Msg: "scope shared has one sandbox for every agent; per-agent rules need scope agent or session"}
		}
	case EgressFull:
		if c.Docker.Network == "none" {
			return &ConfigError{Field: "sandbox.docker.network", Value: c.Docker.Network, Msg: "sandbox.network.egress full needs a network to give: set sandbox.docker.network (bridge or a named network)"}
		}
	}
	return nil
}
