package egress

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandboxctl/sandboxctl/sandbox/sandboxconfig"
)

// terminator is an Interceptor that terminates TLS with its own
// certificate and answers one request itself, recording what it saw.
type terminator struct {
	cert tls.Certificate
	mu   sync.Mutex
	seen []string
}

func (x *terminator) Intercepts(scopeKey, host string, port int) bool { return host == "broker.test" }

func (x *terminator) Serve(ctx context.Context, scopeKey string, client net.Conn, host string, port int, dial func(ctx context.Context) (net.Conn, error)) error {
	defer client.Close()
	tc := tls.Server(client, &tls.Config{Certificates: []tls.Certificate{x.cert}})
	if err := tc.HandshakeContext(ctx); err != nil {
		return err
	}
	req, err := http.ReadRequest(bufio.NewReader(tc))
	if err != nil {
		return err
	}
	x.mu.Lock()
	x.seen = append(x.seen, scopeKey+" "+host+" "+req.URL.Path)
	x.mu.Unlock()
	_, err = io.WriteString(tc, "HTTP/1.1 200 OK\r\nContent-Length: 11\r\nConnection: close\r\n\r\nintercepted")
	return err
}

// TestInterceptorGetsTheReplayedHello: a TLS connection the policy allows
// and the Interceptor claims reaches it with the ClientHello the gateway
// peeked still to be read (the handshake completes), through CONNECT and
// through the transparent port; a host the policy denies never reaches
// the Interceptor.
func TestInterceptorGetsTheReplayedHello(t *testing.T) {
	srv := httptest.NewUnstartedServer(nil)
	srv.StartTLS() // only for its certificate (example.com, 127.0.0.1)
	defer srv.Close()
	ic := &terminator{cert: srv.TLS.Certificates[0]}
	n, err := sandboxconfig.ParseNetwork(sandboxconfig.NetworkConfig{Egress: "allowlist", Allow: []sandboxconfig.AllowRule{
		{Domain: "broker.test", Ports: []int{8443}},
	}}, false)
	if err != nil {
		t.Fatal(err)
	}
	g, err := Start(context.Background(), Config{ScopeKey: "agent:x", Listen: netip.MustParseAddr("127.0.0.3"), DNSPort: 10053,
		ProxyPort: 13128, Policy: Policy{Network: n}, Interceptor: ic,
		Resolve: func(context.Context, string) ([]netip.Addr, error) { return nil, io.EOF }})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	// The test certificate names example.com: the client checks that name
	// while sending SNI broker.test.
	tlsCfg := &tls.Config{ServerName: "broker.test", InsecureSkipVerify: true, VerifyConnection: func(cs tls.ConnectionState) error {
		_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: pool, DNSName: "example.com"})
		return err
	}}
	get := func(c net.Conn, path string) string {
		t.Helper()
		_ = c.SetDeadline(time.Now().Add(30 * time.Second))
		tc := tls.Client(c, tlsCfg)
		if _, err := io.WriteString(tc, "GET "+path+" HTTP/1.1\r\nHost: broker.test\r\n\r\n"); err != nil {
			return "write: " + err.Error()
		}
		b, _ := io.ReadAll(tc)
		return string(b)
	}
	c, err := net.Dial("tcp", "127.0.0.3:8443")
	if err != nil {
		t.Fatal(err)
	}
	if out := get(c, "/transparent"); !strings.HasSuffix(out, "intercepted") {
		t.Errorf("transparent: %q", out)
	}
	c, err = net.Dial("tcp", "127.0.0.3:13128")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.WriteString(c, "CONNECT broker.test:8443 HTTP/1.1\r\nHost: broker.test:8443\r\n\r\n")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %v %v", resp, err)
	}
	if out := get(c, "/connect"); !strings.HasSuffix(out, "intercepted") {
		t.Errorf("connect: %q", out)
	}
	c, _ = net.Dial("tcp", "127.0.0.3:13128")
	_, _ = io.WriteString(c, "CONNECT other.test:8443 HTTP/1.1\r\nHost: other.test:8443\r\n\r\n")
	if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err != nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("CONNECT to a denied host: %v %v", resp, err)
	}
	ic.mu.Lock()
	defer ic.mu.Unlock()
	if strings.Join(ic.seen, ",") != "agent:x broker.test /transparent,agent:x broker.test /connect" {
		t.Errorf("the interceptor saw %q", ic.seen)
	}
}
