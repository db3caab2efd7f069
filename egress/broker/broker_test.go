package broker

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandboxctl/sandboxctl/sandbox/sandboxconfig"
)

// testCA is an upstream's own CA, unknown to the system roots.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t testing.TB) *testCA {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: serial(), Subject: pkix.Name{CommonName: "upstream test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := x509.ParseCertificate(der)
	return &testCA{cert: c, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

func (ca *testCA) leaf(t testing.TB, host string) tls.Certificate {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: serial(), Subject: pkix.Name{CommonName: host}, DNSNames: []string{host},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// upstream is an HTTPS server that logs the headers it gets and echoes
// them in its body.
type upstream struct {
	srv  *httptest.Server
	mu   sync.Mutex
	seen []http.Header
}

func startUpstream(t testing.TB, cert tls.Certificate) *upstream {
	t.Helper()
	u := &upstream{}
	u.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		u.seen = append(u.seen, r.Header.Clone())
		u.mu.Unlock()
		w.Header().Set("X-Echo-Auth", r.Header.Get("Authorization"))
		for k, vs := range r.Header {
			io.WriteString(w, k+": "+strings.Join(vs, ",")+"\n")
		}
	}))
	u.srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	u.srv.StartTLS()
	t.Cleanup(u.srv.Close)
	return u
}

func (u *upstream) headers() []http.Header {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]http.Header(nil), u.seen...)
}

const (
	boundHost = "api.bound.test"
	realToken = "real-token-1234567890-s3cr3t"
	otherReal = "other-real-value-abcdefgh"
)

func newBroker(t testing.TB, dir string, upstreamCA []byte) *Broker {
	t.Helper()
	caFile := ""
	if upstreamCA != nil {
		caFile = filepath.Join(t.TempDir(), "upstream-ca.pem")
		if err := os.WriteFile(caFile, upstreamCA, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	secrets, err := sandboxconfig.ParseSecrets(map[string]sandboxconfig.SecretConfig{
		"api":   {FromEnv: "REAL_API_TOKEN", Hosts: []string{boundHost}, Env: "API_TOKEN"},
		"other": {FromEnv: "REAL_OTHER", Hosts: []string{"*.elsewhere.test"}, Env: "OTHER_TOKEN"},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"REAL_API_TOKEN": realToken, "REAL_OTHER": otherReal}
	b, err := New(Options{Dir: dir, Secrets: secrets, Getenv: func(k string) string { return env[k] }, UpstreamCAFile: caFile})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// proxyTo plays the egress proxy: each connection to the returned address
// is handed to b.Serve for host, dialling up. It returns the address and
// the errors Serve returned.
func proxyTo(t testing.TB, b *Broker, host string, up string) (string, <-chan error) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errs := make(chan error, 16)
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); l.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs <- b.Serve(ctx, "agent:test", c, host, 443, func(ctx context.Context) (net.Conn, error) {
					var d net.Dialer
					return d.DialContext(ctx, "tcp", up)
				})
			}()
		}
	}()
	return l.Addr().String(), errs
}

// sandboxClient trusts the broker's CA bundle only and sends every
// connection to addr.
func sandboxClient(t testing.TB, b *Broker, addr string) *http.Client {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b.CABundle()) {
		t.Fatal("the CA bundle holds no certificate")
	}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		},
		TLSClientConfig: &tls.Config{RootCAs: pool},
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: time.Minute}
}

func TestBrokerSubstitutesOnTheBoundHostOnly(t *testing.T) {
	ca := newTestCA(t)
	up := startUpstream(t, ca.leaf(t, boundHost))
	b := newBroker(t, t.TempDir(), ca.pem)
	env := b.Env()
	ph, otherPh := env["API_TOKEN"], env["OTHER_TOKEN"]
	if !strings.HasPrefix(ph, PlaceholderPrefix) || strings.Contains(ph, realToken) || ph == otherPh {
		t.Fatalf("placeholders %q %q", ph, otherPh)
	}
	addr, _ := proxyTo(t, b, boundHost, up.srv.Listener.Addr().String())
	c := sandboxClient(t, b, addr)

	req, _ := http.NewRequest("GET", "https://"+boundHost+"/v1/thing", nil)
	req.Header.Set("Authorization", "Bearer "+ph)
	req.Header.Set("X-Api-Key", ph)
	req.Header.Set("X-Other", otherPh)
	req.Header.Set("X-Basic", "Basic "+base64.StdEncoding.EncodeToString([]byte("user:"+ph)))
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	req2, _ := http.NewRequest("GET", "https://"+boundHost+"/basic", nil)
	req2.SetBasicAuth("user", ph)
	resp2, err := c.Do(req2)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp2.Body)
	resp2.Body.Close()

	seen := up.headers()
	if len(seen) != 2 {
		t.Fatalf("upstream saw %d requests, want 2", len(seen))
	}
	h := seen[0]
	if got := h.Get("Authorization"); got != "Bearer "+realToken {
		t.Errorf("upstream Authorization %q, want the real token", got)
	}
	if got := h.Get("X-Api-Key"); got != realToken {
		t.Errorf("upstream X-Api-Key %q, want the real token", got)
	}
	if got := h.Get("X-Other"); got != otherPh {
		t.Errorf("a secret bound elsewhere reached %s as %q, want its placeholder unchanged", boundHost, got)
	}
	if got := h.Get("X-Basic"); got != "Basic "+base64.StdEncoding.EncodeToString([]byte("user:"+realToken)) {
		t.Errorf("custom Basic header %q", got)
	}
	if user, pass, ok := (&http.Request{Header: seen[1]}).BasicAuth(); !ok || user != "user" || pass != realToken {
		t.Errorf("upstream basic auth %q %q %v, want the real token", user, pass, ok)
	}
	// The upstream echoes what it got: the sandbox still sees placeholders.
	if bytes.Contains(body, []byte(realToken)) || resp.Header.Get("X-Echo-Auth") != "Bearer "+ph {
		t.Errorf("the real value came back to the sandbox: header %q body %s", resp.Header.Get("X-Echo-Auth"), body)
	}
	if !bytes.Contains(body, []byte("X-Api-Key: "+ph)) {
		t.Errorf("echoed body does not hold the placeholder: %s", body)
	}
}

func TestBrokerInterceptsBoundHostsOnly(t *testing.T) {
	b := newBroker(t, t.TempDir(), nil)
	for host, want := range map[string]bool{
		boundHost: true, "API.BOUND.TEST.": true, "x.bound.test": false, "bound.test": false,
		"a.elsewhere.test": true, "a.b.elsewhere.test": true, "elsewhere.test": false, "example.com": false,
	} {
		if got := b.Intercepts("agent:x", host, 443); got != want {
			t.Errorf("Intercepts(%s) = %v, want %v", host, got, want)
		}
	}
}

func TestBrokerVerifiesTheUpstreamCertificate(t *testing.T) {
	trusted, impostor := newTestCA(t), newTestCA(t)
	for name, cert := range map[string]tls.Certificate{
		"unknown CA": impostor.leaf(t, boundHost),
		"wrong name": trusted.leaf(t, "not-"+boundHost),
	} {
		t.Run(name, func(t *testing.T) {
			up := startUpstream(t, cert)
			b := newBroker(t, t.TempDir(), trusted.pem)
			addr, errs := proxyTo(t, b, boundHost, up.srv.Listener.Addr().String())
			c := sandboxClient(t, b, addr)
			req, _ := http.NewRequest("GET", "https://"+boundHost+"/", nil)
			req.Header.Set("Authorization", "Bearer "+b.Env()["API_TOKEN"])
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusBadGateway || !strings.Contains(string(body), "certificate") {
				t.Errorf("status %d %s, want 502 naming the certificate", resp.StatusCode, body)
			}
			if n := len(up.headers()); n != 0 {
				t.Errorf("an upstream with a bad certificate got %d requests", n)
			}
			c.CloseIdleConnections()
			select {
			case err := <-errs:
				if err != nil {
					t.Errorf("Serve: %v", err)
				}
			case <-time.After(time.Minute):
				t.Error("Serve did not end after the sandbox closed its connection")
			}
		})
	}
}

func TestBrokerRefusesAnotherHostInsideTheConnection(t *testing.T) {
	ca := newTestCA(t)
	up := startUpstream(t, ca.leaf(t, boundHost))
	b := newBroker(t, t.TempDir(), ca.pem)
	addr, _ := proxyTo(t, b, boundHost, up.srv.Listener.Addr().String())
	c := sandboxClient(t, b, addr)
	req, _ := http.NewRequest("GET", "https://"+boundHost+"/", nil)
	req.Host = "evil.test"
	req.Header.Set("Authorization", "Bearer "+b.Env()["API_TOKEN"])
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMisdirectedRequest || len(up.headers()) != 0 {
		t.Errorf("status %d, upstream saw %d requests; want 421 and none", resp.StatusCode, len(up.headers()))
	}
}

func TestCAAndPlaceholdersPersist(t *testing.T) {
	dir := t.TempDir()
	b1 := newBroker(t, dir, nil)
	b2 := newBroker(t, dir, nil)
	if !bytes.Equal(b1.CABundle(), b2.CABundle()) || b1.Env()["API_TOKEN"] != b2.Env()["API_TOKEN"] {
		t.Error("a second start under the same directory made a new CA or placeholders")
	}
	if b3 := newBroker(t, t.TempDir(), nil); b3.Env()["API_TOKEN"] == b1.Env()["API_TOKEN"] || bytes.Equal(b3.CABundle(), b1.CABundle()) {
		t.Error("two daemons share a placeholder or a CA")
	}
	for _, f := range []string{caKeyFile, placeholderKeyFile} {
		fi, err := os.Stat(filepath.Join(dir, f))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v %v, want mode 0600", f, fi.Mode(), err)
		}
	}
	if err := os.Chmod(filepath.Join(dir, caKeyFile), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadOrCreateCA(dir); err == nil || !strings.Contains(err.Error(), "0600") {
		t.Errorf("a world-readable CA key was accepted: %v", err)
	}
}

func TestLeafCachedAndRenewed(t *testing.T) {
	ca, err := LoadOrCreateCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	ca.now = func() time.Time { return now }
	l1, _ := ca.Leaf(boundHost)
	l2, _ := ca.Leaf(boundHost)
	if l1 != l2 {
		t.Error("a second leaf was minted for the same host")
	}
	now = now.Add(leafLifetime - leafRenew/2)
	l3, _ := ca.Leaf(boundHost)
	if l3 == l1 || !l3.Leaf.NotAfter.After(l1.Leaf.NotAfter) {
		t.Error("a leaf near its end was not renewed")
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.CertPEM())
	if _, err := l3.Leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: boundHost, CurrentTime: now}); err != nil {
		t.Errorf("leaf does not verify against the CA: %v", err)
	}
}

func TestNewRefusesAnUnavailableSecret(t *testing.T) {
	secrets, err := sandboxconfig.ParseSecrets(map[string]sandboxconfig.SecretConfig{
		"api":  {FromEnv: "NOT_SET_ANYWHERE", Hosts: []string{boundHost}, Env: "API_TOKEN"},
		"file": {FromFile: "/nonexistent/secret", Hosts: []string{boundHost}, Env: "FILE_TOKEN"},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range secrets {
		_, err := New(Options{Dir: t.TempDir(), Secrets: []sandboxconfig.Secret{s}, Getenv: func(string) string { return "" }})
		if !errors.Is(err, sandboxconfig.ErrSecretUnavailable) || !strings.Contains(err.Error(), "sandbox.secrets."+s.Name) {
			t.Errorf("secret %s: %v, want ErrSecretUnavailable naming it", s.Name, err)
		}
	}
}

// TestBrokerStreamsResponses: a streamed response (server-sent events)
// reaches the sandbox event by event; masking holds nothing back that
// cannot start a value.
func TestBrokerStreamsResponses(t *testing.T) {
	ca := newTestCA(t)
	release := make(chan struct{})
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: first event\n\n")
		w.(http.Flusher).Flush()
		<-release
		io.WriteString(w, "data: second\n\n")
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{ca.leaf(t, boundHost)}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	defer close(release)
	b := newBroker(t, t.TempDir(), ca.pem)
	addr, _ := proxyTo(t, b, boundHost, srv.Listener.Addr().String())
	resp, err := sandboxClient(t, b, addr).Get("https://" + boundHost + "/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got := make(chan string, 1)
	go func() {
		buf := make([]byte, 64)
		var all []byte
		for !bytes.Contains(all, []byte("\n\n")) {
			n, err := resp.Body.Read(buf)
			all = append(all, buf[:n]...)
			if err != nil {
				break
			}
		}
		got <- string(all)
	}()
	select {
	case s := <-got:
		if s != "data: first event\n\n" {
			t.Errorf("first event %q", s)
		}
	case <-time.After(time.Minute):
		t.Fatal("the first event was held back until the stream went on")
	}
}
