package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandboxctl/sandboxctl/egress"
	"github.com/sandboxctl/sandboxctl/egress/broker"
	"github.com/sandboxctl/sandboxctl/envknob"
	"github.com/sandboxctl/sandboxctl/internal/dockertest"
	"github.com/sandboxctl/sandboxctl/sandbox/sandboxconfig"
)

// nodeImage is the sandbox image the Node egress tests run in: the
// default image (images/build.sh puts Debian's nodejs in it), or a copy
// named by SANDBOXCTL_TEST_SANDBOX_IMAGE.
var nodeImage = envOr(string(envknob.TestSandboxImage), DefaultImage)

// nodeProbe fetches argv[3] the way argv[2] says and prints one line,
// "MODE: ok STATUS BODY" or "MODE: refused CODE":
//
//	https    https.get (ignores the proxy variables: the transparent path)
//	fetch    the global fetch (undici; ignores them too)
//	connect  a CONNECT to $HTTPS_PROXY, then TLS to the host over it (what a
//	         proxy agent does)
//
// Each trusts the default roots plus NODE_EXTRA_CA_CERTS and nothing else,
// and sends "Authorization: Bearer $API_TOKEN" when API_TOKEN is set.
const nodeProbe = `
const http = require('http'), https = require('https'), tls = require('tls');
const [mode, url] = process.argv.slice(2);
const T = 20000;
const headers = process.env.API_TOKEN ? {Authorization: 'Bearer ' + process.env.API_TOKEN} : {};
function collect(res, rej) {
  return r => { let b = ''; r.setEncoding('utf8'); r.on('data', d => b += d); r.on('end', () => res(r.statusCode + ' ' + b)); r.on('error', rej); };
}
function viaHttps(url, opts) {
  return new Promise((res, rej) => {
    const req = https.get(url, Object.assign({timeout: T, headers}, opts || {}), collect(res, rej));
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', rej);
  });
}
async function viaFetch(url) {
  const r = await fetch(url, {headers, signal: AbortSignal.timeout(T)});
  return r.status + ' ' + await r.text();
}
function viaConnect(url) {
  const u = new URL(url), p = new URL(process.env.HTTPS_PROXY);
  return new Promise((res, rej) => {
    const req = http.request({host: p.hostname, port: p.port, method: 'CONNECT', path: u.hostname + ':443', timeout: T});
    req.on('connect', (r, socket) => {
      if (r.statusCode !== 200) { socket.destroy(); rej(new Error('proxy answered ' + r.statusCode)); return; }
      viaHttps(url, {defaultPort: 443, createConnection: () => tls.connect({socket, servername: u.hostname})}).then(res, rej);
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', rej);
    req.end();
  });
}
const how = {https: u => viaHttps(u), insecure: u => viaHttps(u, {rejectUnauthorized: false}), fetch: viaFetch, connect: viaConnect}[mode];
how(url).then(
  b => console.log(mode + ': ok ' + b.trim()),
  e => { const c = e.cause || e; console.log(mode + ': refused ' + (c.code || '') + ' ' + c.message); process.exitCode = 1; });
`

// requireNode fails the test when the sandbox has no node: the image
// predates nodejs in images/build.sh.
func requireNode(t *testing.T, m *Manager, s Scope) {
	t.Helper()
	out, code, err := m.Run(ctxT(t), s, []string{"bash", "-c", "node --version"})
	if err != nil {
		t.Fatal(err)
	}
	if code != 0 || !strings.HasPrefix(strings.TrimSpace(out), "v") {
		t.Fatalf("the image %s has no node (exit %d, %q): it predates nodejs in images/build.sh; rebuild it with `make images FORCE=1` (or name another with %s)",
			nodeImage, code, out, envknob.TestSandboxImage)
	}
}

// TestEgressNodeAllowlist: Node reaches an allowed name through the
// allowlist with https.get, fetch and a CONNECT through $HTTPS_PROXY,
// with the proxy variables set and unset, trusting the upstream's test
// CA through NODE_EXTRA_CA_CERTS (and not without it); a denied name and
// an IP literal fail, and the upstream, which logs every connection and
// DNS question, saw nothing of them.
func TestEgressNodeAllowlist(t *testing.T) {
	dockertest.Require(t, nodeImage)
	up := startUpstream(t)
	obs := &decisions{}
	m := newManagerOpts(t, func(o *Options) {
		o.Config.Docker.Image = nodeImage
		o.Config.Network = NetworkConfig{Egress: "allowlist", UpstreamDNS: up.IP.String(), Allow: []AllowRule{{Domain: "allowed.test"}}}
		o.EgressObserver = obs
	})
	s := Scope{AgentID: "egress-node-" + randHex(3)}
	requireNode(t, m, s)
	_, _, ws, _ := m.Layout(s)
	for name, b := range map[string][]byte{"ca.pem": up.caPEM, "probe.js": []byte(nodeProbe)} {
		if err := os.WriteFile(filepath.Join(ws, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	node := func(script string) string {
		t.Helper()
		out, _, err := m.Run(ctxT(t), s, []string{"bash", "-c", script})
		if err != nil {
			t.Fatalf("%s: %v", script, err)
		}
		return out
	}
	const (
		trust   = "NODE_EXTRA_CA_CERTS=/workspace/ca.pem node /workspace/probe.js "
		noProxy = "unset HTTPS_PROXY https_proxy HTTP_PROXY http_proxy; "
	)
	if out := node("echo $HTTPS_PROXY"); !strings.HasPrefix(out, "http://") {
		t.Fatalf("the allowlist sandbox has no HTTPS_PROXY: %q", out)
	}

	works := map[string]string{
		"https.get, proxy variables set":   trust + "https https://allowed.test/n1",
		"fetch, proxy variables set":       trust + "fetch https://allowed.test/n2",
		"CONNECT through HTTPS_PROXY":      trust + "connect https://allowed.test/n3",
		"https.get, proxy variables unset": noProxy + trust + "https https://allowed.test/n4",
		"fetch, proxy variables unset":     noProxy + trust + "fetch https://allowed.test/n5",
	}
	for name, script := range works {
		if out := node(script); !strings.Contains(out, ": ok 200 hello from allowed.test /n") {
			t.Errorf("%s: %q", name, out)
		}
	}
	// The way they went: https.get and fetch ignore the proxy variables
	// (four transparent TLS connections, the gateway deciding on the SNI),
	// the proxy agent's one is a CONNECT. A connection is reported when it
	// ends.
	count := func(kind string) int {
		n := 0
		for _, d := range obs.all {
			if d.Allowed && d.Host == "allowed.test" && d.Kind == kind {
				n++
			}
		}
		return n
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		obs.mu.Lock()
		tlsN, connectN := count(egress.KindTLS), count(egress.KindConnect)
		obs.mu.Unlock()
		if tlsN == 4 && connectN == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("allowed decisions for allowed.test: %d transparent TLS (want 4), %d CONNECT (want 1)", tlsN, connectN)
			break
		}
	}
	// Without NODE_EXTRA_CA_CERTS the test CA is not trusted: the
	// variable is what made the requests above verify.
	for _, mode := range []string{"https", "fetch"} {
		if out := node("node /workspace/probe.js " + mode + " https://allowed.test/untrusted"); !strings.Contains(out, mode+": refused") ||
			!strings.Contains(strings.ToLower(out), "certificate") {
			t.Errorf("%s without NODE_EXTRA_CA_CERTS: want a certificate error, got %q", mode, out)
		}
	}
	log := up.log(t)
	for _, p := range []string{"/n1", "/n2", "/n3", "/n4", "/n5"} {
		if !strings.Contains(log, "http allowed.test GET "+p+" ") {
			t.Errorf("the upstream never saw %s:\n%s", p, log)
		}
	}
	if strings.Contains(log, "/untrusted") {
		t.Errorf("a request over an unverified connection reached the upstream:\n%s", log)
	}

	// From here on nothing may arrive: every line the upstream logs from
	// now (a connection, a request, a DNS question) is a byte that got out.
	before := len(log)
	marker := "m" + randHex(4)
	ip := up.IP.String()
	refused := []struct{ name, script string }{
		{"https.get, denied name", trust + "https https://denied.test/" + marker},
		{"fetch, denied name", trust + "fetch https://denied.test/" + marker},
		{"CONNECT to a denied name", trust + "connect https://denied.test/" + marker},
		{"https.get, denied name, vars unset", noProxy + trust + "https https://denied.test/" + marker},
		{"https.get, IP literal", trust + "insecure https://" + ip + "/" + marker},
		{"fetch, IP literal", "NODE_TLS_REJECT_UNAUTHORIZED=0 " + trust + "fetch https://" + ip + "/" + marker},
		{"CONNECT to an IP literal", trust + "connect https://" + ip + "/" + marker},
		{"https.get, IP literal, vars unset", noProxy + trust + "insecure https://" + ip + "/" + marker},
		{"fetch, plain http to IP literal", noProxy + "node -e 'fetch(\"http://" + ip + "/" + marker + "\", {signal: AbortSignal.timeout(20000)}).then(r => r.text()).then(console.log, e => { console.log(\"refused\", (e.cause || e).code); process.exitCode = 1 })'"},
	}
	// All at once (an IP literal fails by timing out: no route), each
	// one's output after a line "=== i".
	var script strings.Builder
	for i, r := range refused {
		fmt.Fprintf(&script, "(%s) >/tmp/refused.%d 2>&1 &\n", r.script, i)
	}
	script.WriteString("wait\n")
	for i := range refused {
		fmt.Fprintf(&script, "echo '=== %d'; cat /tmp/refused.%d\n", i, i)
	}
	outs := strings.Split(node(script.String()), "=== ")
	if len(outs) != len(refused)+1 {
		t.Fatalf("the refused attempts printed %d sections, want %d: %q", len(outs)-1, len(refused), outs)
	}
	for i, r := range refused {
		_, out, _ := strings.Cut(outs[i+1], "\n")
		t.Logf("%s: %s", r.name, strings.TrimSpace(out))
		if !strings.Contains(out, "refused") || strings.Contains(out, "hello from") {
			t.Errorf("%s: got through: %q", r.name, out)
		}
	}
	if after := up.log(t); len(after) != before {
		t.Errorf("the upstream saw the refused attempts:\n%s", after[before:])
	}
}

// TestEgressNodeBrokeredSecret: with a secret bound to allowed.test, Node
// in the sandbox (https.get and fetch, the proxy variables set and unset)
// trusts the broker's CA (Debian's node through the sandbox's CA bundle,
// one with its own roots through the NODE_EXTRA_CA_CERTS the sandbox
// already has, and not without it), and the upstream logs the real
// value; to another allowed host the placeholder arrives as it was sent.
// The output never holds the value.
func TestEgressNodeBrokeredSecret(t *testing.T) {
	dockertest.Require(t, nodeImage)
	real := "node-real-secret-" + randHex(4)
	up := startUpstream(t, "-headers")
	m := newManagerOpts(t, func(o *Options) {
		o.Config.Docker.Image = nodeImage
		o.Config.Network = NetworkConfig{Egress: "allowlist", UpstreamDNS: up.IP.String(), Allow: []AllowRule{{Domain: "allowed.test"}, {Domain: "*.wild.test"}}}
		o.Config.Secrets = map[string]sandboxconfig.SecretConfig{"api": {FromEnv: "SBXT_NODE_TOKEN", Hosts: []string{"allowed.test"}, Env: "API_TOKEN"}}
		if err := o.Config.Validate(); err != nil {
			t.Fatal(err)
		}
		secrets, err := sandboxconfig.ParseSecrets(o.Config.Secrets, o.Config.Docker.Env)
		if err != nil {
			t.Fatal(err)
		}
		caFile := filepath.Join(t.TempDir(), "upstream-ca.pem")
		if err := os.WriteFile(caFile, up.caPEM, 0o644); err != nil {
			t.Fatal(err)
		}
		b, err := broker.New(broker.Options{Dir: broker.Dir(o.StateDir), Secrets: secrets, UpstreamCAFile: caFile,
			Getenv: func(k string) string { return map[string]string{"SBXT_NODE_TOKEN": real}[k] }})
		if err != nil {
			t.Fatal(err)
		}
		o.EgressInterceptor = b
	})
	ph := m.first().brokered.Env["API_TOKEN"]
	s := Scope{AgentID: "egress-node-secret-" + randHex(3)}
	requireNode(t, m, s)
	_, _, ws, _ := m.Layout(s)
	for name, b := range map[string][]byte{"ca.pem": up.caPEM, "probe.js": []byte(nodeProbe)} {
		if err := os.WriteFile(filepath.Join(ws, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The sandbox's own NODE_EXTRA_CA_CERTS (the broker's CA) for the
	// bound host; for a.wild.test, which the broker does not terminate,
	// the upstream's test CA beside it.
	script := `set -u
echo "NODE_EXTRA_CA_CERTS=$NODE_EXTRA_CA_CERTS"
node /workspace/probe.js https https://allowed.test/node-get
node /workspace/probe.js fetch https://allowed.test/node-fetch
(unset HTTPS_PROXY https_proxy HTTP_PROXY http_proxy; node /workspace/probe.js https https://allowed.test/node-noproxy)
cat "$NODE_EXTRA_CA_CERTS" /workspace/ca.pem > /tmp/both.pem
NODE_EXTRA_CA_CERTS=/tmp/both.pem node /workspace/probe.js https https://a.wild.test/node-elsewhere
node --use-bundled-ca /workspace/probe.js https https://allowed.test/node-bundled
env -u NODE_EXTRA_CA_CERTS node --use-bundled-ca /workspace/probe.js https https://allowed.test/node-untrusted
`
	out, _, err := m.Run(ctxT(t), s, []string{"bash", "-c", script})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("in the sandbox:\n%s", out)
	if strings.Contains(out, real) {
		t.Errorf("the real value reached the sandbox's output:\n%s", out)
	}
	// Debian's node reads OpenSSL's store (the sandbox's bundle holds the
	// broker's CA); one with its own roots (--use-bundled-ca, as the
	// builds of nodejs.org) trusts the broker through the variable alone.
	if !strings.Contains(out, "https: refused") || !strings.Contains(strings.ToLower(out), "certificate") {
		t.Errorf("without NODE_EXTRA_CA_CERTS the broker's certificate was not refused:\n%s", out)
	}
	if n := strings.Count(out, ": ok 200 hello from"); n != 5 || !strings.Contains(out, "NODE_EXTRA_CA_CERTS=/etc/sandboxctl/broker-ca.pem\n") {
		t.Errorf("want 5 answers with the broker's CA in NODE_EXTRA_CA_CERTS, got %d:\n%s", n, out)
	}
	log := up.log(t)
	if strings.Contains(log, "/node-untrusted") {
		t.Errorf("a request Node did not verify reached the upstream:\n%s", log)
	}
	for _, want := range []string{
		"header allowed.test /node-get Authorization: Bearer " + real + "\n",
		"header allowed.test /node-fetch Authorization: Bearer " + real + "\n",
		"header allowed.test /node-noproxy Authorization: Bearer " + real + "\n",
		"header allowed.test /node-bundled Authorization: Bearer " + real + "\n",
		"header a.wild.test /node-elsewhere Authorization: Bearer " + ph + "\n",
	} {
		if !strings.Contains(log, want) {
			t.Errorf("the upstream did not log %q; its log:\n%s", want, log)
		}
	}
}
