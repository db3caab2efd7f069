package sandbox

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/sandboxctl/sandboxctl/egress/broker"
	"github.com/sandboxctl/sandboxctl/internal/dockertest"
	"github.com/sandboxctl/sandboxctl/sandbox/sandboxconfig"
)

// certScript is a shell fragment writing cert and key PEM files in /tmp.
func certScript(t *testing.T, certPEM, keyPEM []byte) string {
	t.Helper()
	return "cat > /tmp/leaf.pem <<'PEM'\n" + string(certPEM) + "PEM\ncat > /tmp/key.pem <<'PEM'\n" + string(keyPEM) + "PEM\n"
}

// leafPEM returns a certificate for host and its key, signed by ca (or
// self-signed when ca is nil).
func leafPEM(t *testing.T, ca *broker.CA, host string) ([]byte, []byte) {
	t.Helper()
	if ca != nil {
		l, err := ca.Leaf(host)
		if err != nil {
			t.Fatal(err)
		}
		k, _ := x509.MarshalPKCS8PrivateKey(l.PrivateKey)
		return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: l.Certificate[0]}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: k})
	}
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: host}, DNSNames: []string{host},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	k, _ := x509.MarshalPKCS8PrivateKey(key)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: k})
}

// tlsProbe serves /tmp/leaf.pem on 127.0.0.1:8443 inside the sandbox and
// connects to it as api.bound.test with curl, Python and git, each
// trusting only what the sandbox trusts by default.
const tlsProbe = `cd /tmp
unset HTTPS_PROXY https_proxy HTTP_PROXY http_proxy
python3 -c '
import ssl, http.server
s = http.server.HTTPServer(("127.0.0.1", 8443), http.server.SimpleHTTPRequestHandler)
c = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER); c.load_cert_chain("leaf.pem", "key.pem")
s.socket = c.wrap_socket(s.socket, server_side=True); s.serve_forever()' >/dev/null 2>&1 &
srv=$!
i=0; while ! curl -sk -o /dev/null https://127.0.0.1:8443/ && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done
curl -sS -o /dev/null --resolve api.bound.test:8443:127.0.0.1 https://api.bound.test:8443/leaf.pem; echo "curl=$?"
python3 -c '
import socket, ssl
try:
    ssl.create_default_context().wrap_socket(socket.create_connection(("127.0.0.1", 8443)), server_hostname="api.bound.test").close(); print("python=0")
except ssl.SSLCertVerificationError as e:
    print("python=verify-failed", e)'
git -c http.curloptResolve=api.bound.test:8443:127.0.0.1 ls-remote https://api.bound.test:8443/repo.git 2>&1 | grep -q "certificate" && echo git=verify-failed || echo git=0
kill $srv
`

// TestSandboxTrustsTheBrokerCA: with secrets configured, a sandbox holds
// each secret's placeholder (never a value) in env and /proc/*/environ,
// and curl, Python and git in it trust a certificate the broker's CA
// minted, but not one of another CA.
func TestSandboxTrustsTheBrokerCA(t *testing.T) {
	t.Setenv("SBXT_REAL_TOKEN", "the-real-value-never-in-the-sandbox")
	for _, rt := range []string{"runc", RuntimeRunscNet} {
		t.Run(rt, func(t *testing.T) { sandboxTrustsTheBrokerCA(t, rt) })
	}
}

func sandboxTrustsTheBrokerCA(t *testing.T, rt string) {
	const real = "the-real-value-never-in-the-sandbox"
	dockertest.Require(t, DefaultImage) // curl, Python and git
	m := newTestManager(t, func(c *Config) {
		c.Docker.Runtime = rt
		c.Docker.Image = DefaultImage
		c.Network = sandboxconfig.NetworkConfig{Egress: sandboxconfig.EgressAllowlist, Allow: []sandboxconfig.AllowRule{{Domain: "api.bound.test"}}}
		c.Secrets = map[string]sandboxconfig.SecretConfig{"api": {FromEnv: "SBXT_REAL_TOKEN", Hosts: []string{"api.bound.test"}, Env: "API_TOKEN"}}
	})
	if err := m.first().checkRuntime(ctxT(t), false); err != nil {
		t.Skipf("the Engine has no %s (scripts/docker-up.sh registers runsc and runsc-net): %v", rt, err)
	}
	if m.first().brokered == nil {
		t.Fatal("secrets configured, no broker side")
	}
	ph := m.first().brokered.Env["API_TOKEN"]
	if !strings.HasPrefix(ph, broker.PlaceholderPrefix) {
		t.Fatalf("placeholder %q", ph)
	}
	s := Scope{AgentID: "broker-" + randHex(3)}
	out, code := run(t, m, s, `env; echo ---; cat /proc/*/environ 2>/dev/null | tr '\0' '\n'`)
	if code != 0 || !strings.Contains(out, "API_TOKEN="+ph+"\n") || strings.Contains(out, real) {
		t.Fatalf("env (exit %d) lacks the placeholder or holds the value:\n%s", code, out)
	}
	if n := strings.Count(out[strings.Index(out, "---"):], "API_TOKEN="+ph); n < 2 {
		t.Errorf("/proc/*/environ shows the placeholder %d times, want every process", n)
	}
	for _, v := range []string{"SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt", "NODE_EXTRA_CA_CERTS=/etc/sandboxctl/broker-ca.pem", "REQUESTS_CA_BUNDLE=", "CURL_CA_BUNDLE=", "GIT_SSL_CAINFO="} {
		if !strings.Contains(out, v) {
			t.Errorf("env lacks %s", v)
		}
	}
	ca, err := broker.LoadOrCreateCA(broker.Dir(m.first().stateDir))
	if err != nil {
		t.Fatal(err)
	}
	cert, key := leafPEM(t, ca, "api.bound.test")
	out, code = run(t, m, s, certScript(t, cert, key)+tlsProbe)
	for _, want := range []string{"curl=0", "python=0", "git=0"} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("a certificate of the broker's CA is not trusted (%s missing; exit %d):\n%s", want, code, out)
		}
	}
	cert, key = leafPEM(t, nil, "api.bound.test")
	out, _ = run(t, m, s, certScript(t, cert, key)+tlsProbe)
	for _, want := range []string{"curl=60", "python=verify-failed", "git=verify-failed"} {
		if !strings.Contains(out, want) {
			t.Errorf("a certificate of another CA is trusted (%s missing):\n%s", want, out)
		}
	}
	// The system roots stay trusted: the bundle is the host's roots plus the CA.
	out, _ = run(t, m, s, `grep -c "BEGIN CERTIFICATE" /etc/ssl/certs/ca-certificates.crt; cmp /etc/sandboxctl/broker-ca.pem /dev/stdin <<'PEM' && echo ca-same
`+string(ca.CertPEM())+`PEM
`)
	var n int
	if _, err := fmt.Sscan(out, &n); err != nil || n < 10 || !strings.Contains(out, "ca-same") {
		t.Errorf("bundle in the sandbox: %q", out)
	}
}

// brokerManager is an allowlist Manager on the sandbox image whose
// gateways hand allowed.test to a real credential broker holding the
// secret api (value real, variable API_TOKEN); trustUpstream gives the
// broker the upstream's test CA.
func brokerManager(t *testing.T, up *upstream, real string, trustUpstream bool, rt string) *Manager {
	t.Helper()
	m := newManagerOpts(t, func(o *Options) {
		o.Config.Docker.Runtime = rt
		o.Config.Docker.Image = DefaultImage
		o.Config.Network = NetworkConfig{Egress: "allowlist", UpstreamDNS: up.IP.String(), Allow: []AllowRule{
			{Domain: "allowed.test"}, {Domain: "*.wild.test"},
		}}
		o.Config.Secrets = map[string]sandboxconfig.SecretConfig{"api": {FromEnv: "SBXT_E2E_TOKEN", Hosts: []string{"allowed.test"}, Env: "API_TOKEN"}}
		if err := o.Config.Validate(); err != nil {
			t.Fatal(err)
		}
		secrets, err := sandboxconfig.ParseSecrets(o.Config.Secrets, o.Config.Docker.Env)
		if err != nil {
			t.Fatal(err)
		}
		caFile := ""
		if trustUpstream {
			caFile = filepath.Join(t.TempDir(), "upstream-ca.pem")
			if err := os.WriteFile(caFile, up.caPEM, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		b, err := broker.New(broker.Options{Dir: broker.Dir(o.StateDir), Secrets: secrets, UpstreamCAFile: caFile,
			Getenv: func(k string) string { return map[string]string{"SBXT_E2E_TOKEN": real}[k] }})
		if err != nil {
			t.Fatal(err)
		}
		o.EgressInterceptor = b
	})
	if err := m.first().checkRuntime(ctxT(t), false); err != nil {
		t.Skipf("the Engine has no %s (scripts/docker-up.sh registers runsc and runsc-net): %v", rt, err)
	}
	return m
}

// TestSecretReachesOnlyItsHost runs the whole path: a sandbox on an
// allowlist network sends its placeholder with curl (through HTTPS_PROXY
// and without it), Python and git; the upstream (a container on a network
// of its own, with its own test CA) logs the real value for the bound
// host, and the placeholder, byte for byte, for another allowed host and
// for plain HTTP. Nothing the sandbox can read holds the value. The same
// under gVisor on the container's network (runsc-net; under runsc an allowlist
// sandbox is refused, TestSecurityEgressAllowlistUnderGVisor).
func TestSecretReachesOnlyItsHost(t *testing.T) {
	up := startUpstream(t, "-headers")
	for _, rt := range []string{"runc", RuntimeRunscNet} {
		t.Run(rt, func(t *testing.T) { secretReachesOnlyItsHost(t, up, rt) })
	}
}

func secretReachesOnlyItsHost(t *testing.T, up *upstream, rt string) {
	real := "e2e-real-secret-value-" + rt
	m := brokerManager(t, up, real, true, rt)
	if info, err := m.first().cli.Info(ctxT(t), client.InfoOptions{}); err == nil && slices.Contains(info.Info.Runtimes[rt].Args, "--network=none") {
		t.Fatalf("the Engine runs %s with --network=none: its sandboxes have no network for the proxy to carry (scripts/docker-up.sh registers runsc-net with the container's network)", rt)
	}
	ph := m.first().brokered.Env["API_TOKEN"]
	s := Scope{AgentID: "secret-" + randHex(3)}
	if out, _ := run(t, m, s, "dmesg 2>/dev/null | head -n 1"); gvisorRuntime(rt) != strings.Contains(out, "gVisor") {
		t.Fatalf("runtime %s, but dmesg says %q", rt, out)
	}
	_, _, ws, _ := m.Layout(s)
	if err := os.WriteFile(filepath.Join(ws, "ca.pem"), up.caPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	script := `set -u
c="curl -sS --max-time 30"
$c -H "Authorization: Bearer $API_TOKEN" -H "X-Api-Key: $API_TOKEN" https://allowed.test/bearer; echo "rc=$?"
$c -u "user:$API_TOKEN" https://allowed.test/basic; echo "rc=$?"
$c --noproxy '*' -H "Authorization: Bearer $API_TOKEN" https://allowed.test/transparent; echo "rc=$?"
$c --cacert /workspace/ca.pem -H "Authorization: Bearer $API_TOKEN" https://a.wild.test/elsewhere; echo "rc=$?"
$c -H "Authorization: Bearer $API_TOKEN" http://allowed.test/plain; echo "rc=$?"
python3 -c '
import os, urllib.request
r = urllib.request.Request("https://allowed.test/python", headers={"Authorization": "token " + os.environ["API_TOKEN"]})
print(urllib.request.urlopen(r, timeout=30).read().decode().strip(), "py=ok")'
git -c http.extraHeader="Authorization: Bearer $API_TOKEN" ls-remote https://allowed.test/repo.git 2>&1 | grep -ci "certificate" | sed 's/^/git-cert-errors=/'
env; cat /proc/*/environ 2>/dev/null | tr '\0' '\n'
`
	out, code, err := m.Run(ctxT(t), s, []string{"bash", "-c", script})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, real) {
		t.Errorf("the real value reached the sandbox's output:\n%s", out)
	}
	if strings.Count(out, "rc=0") != 5 || !strings.Contains(out, "py=ok") || !strings.Contains(out, "git-cert-errors=0") || code != 0 {
		t.Errorf("a request failed (exit %d):\n%s", code, out)
	}
	log := up.log(t)
	for _, want := range []string{
		"header allowed.test /bearer Authorization: Bearer " + real + "\n",
		"header allowed.test /bearer X-Api-Key: " + real + "\n",
		"header allowed.test /basic Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte("user:"+real)) + "\n",
		"header allowed.test /transparent Authorization: Bearer " + real + "\n",
		"header allowed.test /python Authorization: token " + real + "\n",
		"header allowed.test /repo.git/info/refs Authorization: Bearer " + real + "\n",
		"header a.wild.test /elsewhere Authorization: Bearer " + ph + "\n",
		"header allowed.test /plain Authorization: Bearer " + ph + "\n",
	} {
		if !strings.Contains(log, want) {
			t.Errorf("the upstream did not log %q; its log:\n%s", want, log)
		}
	}
}

// TestSecretNotSentToAnUnverifiedUpstream: when the upstream's certificate
// does not verify (here: its CA is not given to the broker), the request
// fails in the sandbox and no request, let alone the value, reaches it.
func TestSecretNotSentToAnUnverifiedUpstream(t *testing.T) {
	const real = "e2e-real-secret-value-unverified"
	up := startUpstream(t, "-headers")
	m := brokerManager(t, up, real, false, "runc")
	s := Scope{AgentID: "secret-" + randHex(3)}
	out, _, err := m.Run(ctxT(t), s, []string{"bash", "-c", `curl -sS --max-time 30 -w ' status=%{http_code}' -H "Authorization: Bearer $API_TOKEN" https://allowed.test/unverified`})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "status=502") || !strings.Contains(out, "certificate") {
		t.Errorf("want a 502 naming the certificate, got:\n%s", out)
	}
	if log := up.log(t); strings.Contains(log, "/unverified") || strings.Contains(log, real) {
		t.Errorf("a request reached an upstream whose certificate failed:\n%s", log)
	}
}
