package egress

import (
	"net/netip"
	"slices"
	"strings"

	"github.com/sandboxctl/sandboxctl/sandbox/sandboxconfig"
)

// Policy decides what a sandbox may reach: sandbox.network parsed
// (sandboxconfig.ParseNetwork). The zero Policy allows nothing.
type Policy struct {
	Network sandboxconfig.Network
}

// NormalizeHost lower-cases host and drops a trailing dot and brackets.
func NormalizeHost(host string) string {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	return strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
}

// Host returns the first rule that allows a connection to host:port, host
// being a name or an IP literal (IP literals match CIDR rules only).
func (p Policy) Host(host string, port uint16) (sandboxconfig.Rule, bool) {
	host = NormalizeHost(host)
	if ip, err := netip.ParseAddr(host); err == nil {
		return p.IP(ip, port)
	}
	for _, r := range p.Network.Rules {
		if r.MatchesHost(host) && r.AllowsPort(port) {
			return r, true
		}
	}
	return sandboxconfig.Rule{}, false
}

// IP returns the first CIDR rule that allows a connection to ip:port.
func (p Policy) IP(ip netip.Addr, port uint16) (sandboxconfig.Rule, bool) {
	ip = ip.Unmap()
	for _, r := range p.Network.Rules {
		if r.CIDR.IsValid() && r.CIDR.Contains(ip) && r.AllowsPort(port) {
			return r, true
		}
	}
	return sandboxconfig.Rule{}, false
}

// Name reports whether some rule names host (on any port): the resolver
// answers such names only.
func (p Policy) Name(host string) bool {
	host = NormalizeHost(host)
	return slices.ContainsFunc(p.Network.Rules, func(r sandboxconfig.Rule) bool { return r.MatchesHost(host) })
}

// Ports are the destination ports some domain rule allows: the ports the
// gateway listens on for programs that ignore the proxy variables.
func (p Policy) Ports() []uint16 {
	var ports []uint16
	for _, r := range p.Network.Rules {
		if r.Domain == "" {
			continue
		}
		ps := r.Ports
		if len(ps) == 0 {
			ps = sandboxconfig.DefaultDomainPorts
		}
		for _, port := range ps {
			if !slices.Contains(ports, port) {
				ports = append(ports, port)
			}
		}
	}
	slices.Sort(ports)
	return ports
}

// Request reports whether rule r lets a plain-HTTP request with method and
// path through.
func Request(r sandboxconfig.Rule, method, path string) bool {
	if len(r.Methods) > 0 && !slices.Contains(r.Methods, strings.ToUpper(method)) {
		return false
	}
	if len(r.Paths) > 0 && !slices.ContainsFunc(r.Paths, func(p string) bool { return strings.HasPrefix(path, p) }) {
		return false
	}
	return true
}

// Upstream reports whether the proxy may connect to ip for rule r: never to
// a loopback, link-local, unspecified or multicast address, nor one of
// local (the daemon's own addresses), unless a CIDR rule names it.
func Upstream(p Policy, ip netip.Addr, port uint16, local []netip.Addr) bool {
	ip = ip.Unmap()
	if _, ok := p.IP(ip, port); ok {
		return true
	}
	if ip.IsLoopback() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() || ip.IsUnspecified() || ip.IsMulticast() || ip.IsInterfaceLocalMulticast() {
		return false
	}
	return !slices.Contains(local, ip)
}
