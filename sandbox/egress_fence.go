package sandbox

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/coreos/go-iptables/iptables"
)

// The fence: an internal network has no route out, but its gateway address
// is the host's, so every host service listening on all addresses (sshd,
// the daemon's TCP listener, anything on 0.0.0.0) would be a peer of the
// sandbox. The host's INPUT chain sends what arrives on the sandbox's
// bridge to a chain of its own that accepts the gateway's ports only and
// drops the rest. Without it (no iptables, not root) no allowlist sandbox
// is made: the allowlist fails closed.

// bridgeOption names a bridge network's host interface.
const bridgeOption = "com.docker.network.bridge.name"

// egressBridgeName is the host interface of network netName (at most 15
// characters).
func egressBridgeName(netName string) string {
	sum := sha1.Sum([]byte(netName))
	return "sbxeg-" + hex.EncodeToString(sum[:])[:8]
}

func fenceChain(bridge string) string { return "SANDBOXCTL-" + bridge }

// fenceEgress lets the sandbox on bridge reach the gateway's DNS (UDP and
// TCP 53) and TCP ports on gw, and nothing else of the host.
func fenceEgress(bridge string, gw netip.Addr, tcpPorts []uint16) error {
	ipt, err := iptables.New(iptables.IPFamily(iptables.ProtocolIPv4), iptables.Timeout(10))
	if err != nil {
		return fmt.Errorf("egress fence: iptables: %w", err)
	}
	chain := fenceChain(bridge)
	if err := ipt.ClearChain("filter", chain); err != nil {
		return fmt.Errorf("egress fence: chain %s: %w", chain, err)
	}
	ports := make([]string, 0, len(tcpPorts)+1)
	ports = append(ports, "53")
	for _, p := range tcpPorts {
		ports = append(ports, strconv.Itoa(int(p)))
	}
	rules := [][]string{
		{"-d", gw.String(), "-p", "udp", "--dport", "53", "-j", "ACCEPT"},
		{"-d", gw.String(), "-p", "tcp", "-m", "multiport", "--dports", strings.Join(ports, ","), "-j", "ACCEPT"},
		{"-j", "DROP"},
	}
	for _, r := range rules {
		if err := ipt.Append("filter", chain, r...); err != nil {
			return fmt.Errorf("egress fence: %s: %w", chain, err)
		}
	}
	jump := []string{"-i", bridge, "-j", chain}
	if ok, err := ipt.Exists("filter", "INPUT", jump...); err != nil {
		return fmt.Errorf("egress fence: INPUT: %w", err)
	} else if !ok {
		if err := ipt.Insert("filter", "INPUT", 1, jump...); err != nil {
			return fmt.Errorf("egress fence: INPUT: %w", err)
		}
	}
	return nil
}

// unfenceEgress removes the fence of bridge.
func unfenceEgress(bridge string) error {
	ipt, err := iptables.New(iptables.IPFamily(iptables.ProtocolIPv4), iptables.Timeout(10))
	if err != nil {
		return fmt.Errorf("egress fence: iptables: %w", err)
	}
	chain := fenceChain(bridge)
	if err := ipt.DeleteIfExists("filter", "INPUT", "-i", bridge, "-j", chain); err != nil {
		return fmt.Errorf("egress fence: INPUT: %w", err)
	}
	if ok, _ := ipt.ChainExists("filter", chain); ok {
		if err := ipt.ClearAndDeleteChain("filter", chain); err != nil {
			return fmt.Errorf("egress fence: chain %s: %w", chain, err)
		}
	}
	return nil
}
