package sandbox

import (
	"context"
	"fmt"
	"net/netip"
	"strconv"
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
func (m *Manager) egressEnabled() bool { return m.net.Egress == sandboxconfig.EgressAllowlist }

// ensureEgress makes (or finds) the internal network of sandbox name and
// starts its gateway if it is not running.
func (m *Manager) ensureEgress(ctx context.Context, scopeKey, name string) (*egressAttach, error) {
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
			// The bridge's own name on the host, for an operator's ip addr.
			Options: map[string]string{"com.docker.network.bridge.enable_ip_masquerade": "false"},
		})
		if err != nil && !isConflict(err) {
			return nil, m.classify("create network "+netName, err)
		}
		if insp, err = m.cli.NetworkInspect(ctx, netName, client.NetworkInspectOptions{}); err != nil {
			return nil, m.classify("inspect network "+netName, err)
		}
	}
	if !insp.Network.Internal {
		return nil, fmt.Errorf("sandbox %s: network %s exists and is not internal; remove it: %w", name, netName, ErrInvalidConfig)
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
			Policy:      egress.Policy{Network: m.net},
			Observer:    m.egressObs,
			Interceptor: m.egressIC,
			Logf:        m.logf,
		})
		if err != nil {
			return nil, fmt.Errorf("sandbox %s: the egress gateway must listen on its network's gateway address (the daemon runs on the Engine's host): %w", name, err)
		}
		m.gateways.gw[name] = g
	}
	return &egressAttach{Network: netName, Gateway: gw, Proxy: g.ProxyURL()}, nil
}

// releaseEgress stops the gateway of sandbox name and removes its network.
func (m *Manager) releaseEgress(ctx context.Context, name string) error {
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
	return nil
}

// closeEgress stops every gateway (the daemon stops; networks stay for the
// sandboxes, whose gateways the next daemon starts on their next use).
func (m *Manager) closeEgress() {
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

// EgressPolicy is the effective egress of the Manager's sandboxes (explain).
func (m *Manager) EgressPolicy() sandboxconfig.Network { return m.net }

// egressPorts is for explain: the transparent ports.
func egressPorts(n sandboxconfig.Network) string {
	s := ""
	for i, p := range (egress.Policy{Network: n}).Ports() {
		if i > 0 {
			s += ","
		}
		s += strconv.Itoa(int(p))
	}
	return s
}
