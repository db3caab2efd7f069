package sandbox

import (
	"context"
	"fmt"
	"net/netip"
	"sync"

	"github.com/moby/moby/client"

	"github.com/sandboxctl/sandboxctl/egress"
	"github.com/sandboxctl/sandboxctl/sandbox/sandboxconfig"
)

// LabelEgress marks a sandbox's egress network (its value: the container's
// name).
const LabelEgress = "sandboxctl.egress"

// egressAttach is where an allowlist sandbox is put: its internal network,
// whose gateway address the daemon's resolver and proxy listen on.
type egressAttach struct {
	Network string
	Gateway netip.Addr
	Proxy   string // HTTP_PROXY / HTTPS_PROXY
}

// egressGateways are the running gateways of this Manager's allowlist
// sandboxes, by container name.
type egressGateways struct {
	mu sync.Mutex
	gw map[string]*egress.Gateway
}

// egressNetworkName is the name of the internal network of container name.
func egressNetworkName(name string) string { return name + "-egress" }

// egressEnabled reports whether new sandboxes get an allowlist network.
func (m *DockerEngine) egressEnabled() bool { return m.net.Egress == sandboxconfig.EgressAllowlist }

// ensureEgress makes (or finds) the internal network of sandbox name and
// starts its gateway if it is not running.
func (m *DockerEngine) ensureEgress(ctx context.Context, s Scope, scopeKey, name string) (*egressAttach, error) {
	pol := egress.Policy{Network: m.net.For(s.AgentID)}
	netName := egressNetworkName(name)
	insp, err := m.cli.NetworkInspect(ctx, netName, client.NetworkInspectOptions{})
	if err != nil && !isNotFound(err) {
		return nil, m.classify("inspect network "+netName, err)
	}
	if err != nil {
		off := false
		labels := map[string]string{LabelManaged: "1", LabelEgress: name, LabelStateID: m.stateID}
		for k, v := range m.labels {
			labels[k] = v
		}
		_, err := m.cli.NetworkCreate(ctx, netName, client.NetworkCreateOptions{
			Driver:     "bridge",
			Internal:   true, // no route out: the gateway is the only peer
			EnableIPv6: &off,
			Labels:     labels,
			// A known host interface, for the fence (egress_fence.go).
			Options: map[string]string{bridgeOption: egressBridgeName(netName), "com.docker.network.bridge.enable_ip_masquerade": "false"},
		})
		if err != nil && !isConflict(err) {
			return nil, m.classify("create network "+netName, err)
		}
		if insp, err = m.cli.NetworkInspect(ctx, netName, client.NetworkInspectOptions{}); err != nil {
			return nil, m.classify("inspect network "+netName, err)
		}
	}
	bridge := insp.Network.Options[bridgeOption]
	if !insp.Network.Internal || bridge == "" {
		return nil, fmt.Errorf("sandbox %s: network %s exists but is not an internal bridge network made by sandboxctl; remove it: %w", name, netName, ErrInvalidConfig)
	}
	var gw netip.Addr
	for _, c := range insp.Network.IPAM.Config {
		if c.Gateway.Is4() {
			gw = c.Gateway
		}
	}
	if !gw.IsValid() {
		return nil, fmt.Errorf("sandbox %s: network %s has no IPv4 gateway address", name, netName)
	}
	m.gateways.mu.Lock()
	defer m.gateways.mu.Unlock()
	if m.gateways.gw == nil {
		m.gateways.gw = map[string]*egress.Gateway{}
	}
	g := m.gateways.gw[name]
	if g != nil && g.Addr() != gw {
		_ = g.Close()
		g = nil
	}
	if g == nil {
		g, err = egress.Start(ctx, egress.Config{
			ScopeKey:    scopeKey,
			Listen:      gw,
			Policy:      pol,
			Observer:    m.egressObs,
			Interceptor: m.egressIC,
			Logf:        m.logf,
		})
		if err != nil {
			return nil, fmt.Errorf("sandbox %s: the egress gateway must listen on its network's gateway address (the daemon runs on the Engine's host): %w", name, err)
		}
		ports := append([]uint16{egress.DefaultProxyPort}, pol.Ports()...)
		if err := fenceEgress(bridge, gw, ports); err != nil {
			_ = g.Close()
			return nil, fmt.Errorf("sandbox %s: an allowlist sandbox needs the host's other services fenced off (a root daemon with iptables on the Engine's host): %w", name, err)
		}
		m.gateways.gw[name] = g
	}
	return &egressAttach{Network: netName, Gateway: gw, Proxy: g.ProxyURL()}, nil
}

// releaseEgress stops the gateway of sandbox name and removes its network.
func (m *DockerEngine) releaseEgress(ctx context.Context, name string) error {
	m.gateways.mu.Lock()
	g := m.gateways.gw[name]
	delete(m.gateways.gw, name)
	m.gateways.mu.Unlock()
	if g != nil {
		_ = g.Close()
	}
	netName := egressNetworkName(name)
	if _, err := m.cli.NetworkRemove(ctx, netName, client.NetworkRemoveOptions{}); err != nil && !isNotFound(err) {
		return m.classify("remove network "+netName, err)
	}
	return unfenceEgress(egressBridgeName(netName))
}

// closeEgress stops every gateway (the daemon stops; networks stay for the
// sandboxes, whose gateways the next daemon starts on their next use).
func (m *DockerEngine) closeEgress() {
	m.gateways.mu.Lock()
	defer m.gateways.mu.Unlock()
	for name, g := range m.gateways.gw {
		_ = g.Close()
		delete(m.gateways.gw, name)
	}
}

// egressEnv is what the sandbox's processes find: the proxy for programs
// that honour the variables (the others reach the gateway through DNS).
func egressEnv(a *egressAttach) map[string]string {
	env := map[string]string{"NO_PROXY": "localhost,127.0.0.1", "no_proxy": "localhost,127.0.0.1"}
	for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"} {
		env[k] = a.Proxy
	}
	return env
}

// EgressExplained is the effective egress of a scope's sandbox (explain).
type EgressExplained struct {
	// Mode is sandbox.network.egress: none, allowlist or full.
	Mode string `json:"mode"`
	// Rules are the allow rules in force, in order (the first that
	// matches decides).
	Rules []string `json:"rules,omitempty"`
	// Ports are the ports the gateway takes connections on for programs
	// that ignore the proxy variables; Proxy is HTTP(S)_PROXY.
	Ports []uint16 `json:"ports,omitempty"`
	Proxy string   `json:"proxy,omitempty"`
	// Network is the sandbox's internal network, when it exists.
	Network string `json:"network,omitempty"`
	// Note says what the mode means.
	Note string `json:"note"`
}

func (m *DockerEngine) explainEgress(ctx context.Context, s Scope, name string) EgressExplained {
	net := m.net.For(s.AgentID)
	ex := EgressExplained{Mode: net.Egress}
	switch m.net.Egress {
	case sandboxconfig.EgressNone:
		ex.Note = "no network (sandbox.docker.network " + m.cfg.Docker.Network + ")"
		if m.cfg.Docker.Network != "none" {
			ex.Note = "sandbox.docker.network " + m.cfg.Docker.Network + ", unfiltered"
		}
		return ex
	case sandboxconfig.EgressFull:
		ex.Note = "the network " + m.cfg.Docker.Network + ", unfiltered (sandbox.docker.unsafe.fullEgress)"
		return ex
	}
	ex.Note = "an internal network whose only peer is the daemon's resolver and proxy: allowed names resolve to the proxy, others do not resolve; IP addresses only through a cidr rule and the proxy; methods and paths are checked on plain HTTP only"
	if _, ok := m.net.Agents[s.AgentID]; ok {
		ex.Note += "; the rules of sandbox.network.agents." + s.AgentID
	}
	for _, r := range net.Rules {
		t := r.Text
		if len(r.Methods) > 0 {
			t += fmt.Sprintf(" methods %v", r.Methods)
		}
		if len(r.Paths) > 0 {
			t += fmt.Sprintf(" paths %v", r.Paths)
		}
		ex.Rules = append(ex.Rules, t)
	}
	ex.Ports = egress.Policy{Network: net}.Ports()
	netName := egressNetworkName(name)
	if insp, err := m.cli.NetworkInspect(ctx, netName, client.NetworkInspectOptions{}); err == nil {
		ex.Network = netName
		for _, c := range insp.Network.IPAM.Config {
			if c.Gateway.Is4() {
				ex.Proxy = egress.ProxyURL(c.Gateway, 0)
			}
		}
	}
	return ex
}
