package nodeexec

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandboxctl/sandboxctl/sessions/hostapi"
)

// netnsNode is a network namespace joined to this one by a veth pair:
// HostIP on this side, NodeIP inside.
type netnsNode struct {
	name, hostDev  string
	hostIP, nodeIP string
}

func ipCmd(t testing.TB, args ...string) error {
	t.Helper()
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// newNetns creates a namespace with a /30 veth link (10.237.N.0/30) and
// removes both when the test ends.
func newNetns(t testing.TB, subnet int) *netnsNode {
	t.Helper()
	var b [3]byte
	_, _ = rand.Read(b[:])
	tag := hex.EncodeToString(b[:])
	n := &netnsNode{name: "sbxn-" + tag, hostDev: "sbxh" + tag,
		hostIP: fmt.Sprintf("10.237.%d.1", subnet), nodeIP: fmt.Sprintf("10.237.%d.2", subnet)}
	peer := "sbxp" + tag
	if err := ipCmd(t, "netns", "add", n.name); err != nil {
		t.Skipf("no network namespaces here: %v", err)
	}
	t.Cleanup(func() {
		_ = exec.Command("ip", "link", "del", n.hostDev).Run()
		_ = exec.Command("ip", "netns", "del", n.name).Run()
	})
	for _, args := range [][]string{
		{"link", "add", n.hostDev, "type", "veth", "peer", "name", peer},
		{"link", "set", peer, "netns", n.name},
		{"addr", "add", n.hostIP + "/30", "dev", n.hostDev},
		{"link", "set", n.hostDev, "up"},
		{"-n", n.name, "addr", "add", n.nodeIP + "/30", "dev", peer},
		{"-n", n.name, "link", "set", peer, "up"},
		{"-n", n.name, "link", "set", "lo", "up"},
	} {
		if err := ipCmd(t, args...); err != nil {
			t.Fatal(err)
		}
	}
	return n
}

// TestNetnsNodes runs two node agents, each in its own network namespace,
// against a gateway reachable only over their veth links (so plain ws:// is
// not allowed and TLS with a pinned fingerprint is used), then takes one link
// down: no FIN/RST reaches either side, so only the pings can notice.
func TestNetnsNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("creates network namespaces and node agent processes")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root for ip netns")
	}
	bin := buildTestNode(t, t.TempDir())
	var b [1]byte
	_, _ = rand.Read(b[:])
	base := 16 + int(b[0])%200
	nsA, nsB := newNetns(t, base), newNetns(t, base+1)

	const grace = 2 * time.Second
	g := newTestGatewayOn(t, RegistryOptions{LinkGrace: grace, PingInterval: 500 * time.Millisecond}, "0.0.0.0:0")
	_, port, _ := net.SplitHostPort(g.srv.Listener.Addr().String())
	start := func(ns *netnsNode, name string, args ...string) *nodeProc {
		url := "wss://" + net.JoinHostPort(ns.hostIP, port) + ConnectPath
		full := append([]string{"-gateway", url, "-token", testToken,
			"-tls-fingerprint", g.fingerprint, "-link-grace", grace.String(), "-ping", "500ms", "-kill-grace", "500ms"}, args...)
		return startNodeProcIn(t, ns.name, bin, name, full...)
	}
	// Plain ws:// to a non-loopback gateway is refused by the node itself.
	plain := startNodeProcIn(t, nsA.name, bin, "plain", "-gateway",
		"ws://"+net.JoinHostPort(nsA.hostIP, port)+ConnectPath, "-token", testToken)
	start(nsA, "alpha-ns", "-security", "full", "-ask", "off")
	start(nsB, "beta-ns", "-security", "allowlist", "-ask", "off")
	a := g.waitNode(t, "alpha-ns")
	g.waitNode(t, "beta-ns")
	if host, _, _ := net.SplitHostPort(a.Remote); host != nsA.nodeIP {
		t.Errorf("alpha-ns connected from %s, want %s (inside its namespace)", a.Remote, nsA.nodeIP)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	rp, err := g.reg.Start(ctx, "alpha-ns", hostapi.StartSpec{Command: "echo from-netns"})
	if err != nil {
		t.Fatal(err)
	}
	c := collect(rp)
	if code, _, err := runWait(t, rp); code != 0 || err != nil {
		t.Fatalf("run: %d %v", code, err)
	}
	if out, _ := c.wait(); out != "from-netns\n" {
		t.Errorf("output %q", out)
	}
	m := marker(t)
	if _, err := g.reg.Start(ctx, "beta-ns", hostapi.StartSpec{Command: "touch " + m, Security: "full"}); !errors.Is(err, ErrDenied) {
		t.Errorf("allowlist miss on beta-ns: %v", err)
	}

	// Link down mid-run.
	pidFile := filepath.Join(t.TempDir(), "pid")
	rp, err = g.reg.Start(ctx, "alpha-ns", hostapi.StartSpec{
		Command: "sh -c 'echo $$ > " + pidFile + "; sleep 6; touch " + m + "' & echo started; wait",
	})
	if err != nil {
		t.Fatal(err)
	}
	c = collect(rp)
	waitFor(t, 10*time.Second, "started", func() bool {
		b, _ := os.ReadFile(pidFile)
		return strings.Contains(c.Stdout(), "started") && len(b) > 1
	})
	pb, _ := os.ReadFile(pidFile)
	child, _ := strconv.Atoi(strings.TrimSpace(string(pb)))
	shell := rp.PID()
	downAt := time.Now()
	if err := ipCmd(t, "link", "set", nsA.hostDev, "down"); err != nil {
		t.Fatal(err)
	}
	code, _, err := runWait(t, rp)
	c.wait()
	if !errors.Is(err, ErrLinkLost) || !strings.Contains(err.Error(), "alpha-ns") || code != -1 {
		t.Fatalf("Wait after link down = %d %v", code, err)
	}
	t.Logf("run failed %v after the link went down: %v", time.Since(downAt).Round(time.Millisecond), err)
	waitFor(t, 15*time.Second, "the node's process tree gone", func() bool { return !alive(shell) && !alive(child) })
	t.Logf("node killed its tree %v after the link went down", time.Since(downAt).Round(time.Millisecond))
	// The shell that would touch it is gone (waited for above).
	if exists(m) {
		t.Error("marker exists: the tree survived the lost link")
	}
	if err := ipCmd(t, "link", "set", nsA.hostDev, "up"); err != nil {
		t.Fatal(err)
	}
	g.waitNode(t, "alpha-ns")

	select {
	case <-plain.exited:
	case <-time.After(10 * time.Second):
		t.Fatal("the plain-ws node did not give up")
	}
	if !strings.Contains(plain.output(), "loopback") {
		t.Errorf("plain-ws node output %q", plain.output())
	}
}
