package egress

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/sandboxctl/sandboxctl/sandbox/sandboxconfig"
)

// benchGateway starts an HTTPS upstream on 127.0.0.1 and a gateway on
// 127.0.0.2 that allows example.com (the name of httptest's certificate, resolved to the upstream) on its port.
// It returns a direct client, a client through the proxy (CONNECT), and
// the upstream's URL.
func benchGateway(b *testing.B) (direct, proxied *http.Client, target string) {
	b.Helper()
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.ParseInt(r.URL.Query().Get("bytes"), 10, 64)
		w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
		buf := make([]byte, 256<<10)
		for n > 0 {
			k := min(n, int64(len(buf)))
			if _, err := w.Write(buf[:k]); err != nil {
				return
			}
			n -= k
		}
	}))
	up.StartTLS()
	b.Cleanup(up.Close)
	upAddr := netip.MustParseAddrPort(up.Listener.Addr().String())
	n, err := sandboxconfig.ParseNetwork(sandboxconfig.NetworkConfig{Egress: "allowlist", Allow: []sandboxconfig.AllowRule{
		{Domain: "example.com", Ports: []int{int(upAddr.Port())}},
		{CIDR: "127.0.0.1/32"}, // the upstream is on loopback, refused otherwise
	}}, false)
	if err != nil {
		b.Fatal(err)
	}
	proxyPort := freePort(b)
	g, err := Start(context.Background(), Config{
		ScopeKey: "bench", Listen: netip.MustParseAddr("127.0.0.2"), ProxyPort: proxyPort, DNSPort: freePort(b),
		Policy: Policy{Network: n}, Local: []netip.Addr{},
		Resolve: func(context.Context, string) ([]netip.Addr, error) { return []netip.Addr{upAddr.Addr()}, nil },
		Logf:    b.Logf,
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = g.Close() })
	certPool := up.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
	tlsCfg := &tls.Config{RootCAs: certPool}
	target = "https://example.com:" + strconv.Itoa(int(upAddr.Port()))
	direct = &http.Client{Transport: &http.Transport{
		TLSClientConfig: tlsCfg, DisableKeepAlives: true,
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, upAddr.String())
		},
	}}
	pu, _ := url.Parse(g.ProxyURL())
	proxied = &http.Client{Transport: &http.Transport{TLSClientConfig: tlsCfg, DisableKeepAlives: true, Proxy: http.ProxyURL(pu)}}
	return direct, proxied, target
}

func freePort(b *testing.B) uint16 {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	return uint16(ln.Addr().(*net.TCPAddr).Port)
}

func get(b *testing.B, c *http.Client, u string) int64 {
	resp, err := c.Get(u)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	if err != nil || resp.StatusCode != 200 {
		b.Fatalf("GET %s: %d, %v", u, resp.StatusCode, err)
	}
	return n
}

// BenchmarkEgressHTTPSLatency: one HTTPS request on a new connection (TCP
// and TLS handshake included: the proxy decides per connection), direct
// and through the proxy's CONNECT, interleaved; reports the p50 and p99 of
// each and what the proxy adds.
func BenchmarkEgressHTTPSLatency(b *testing.B) {
	direct, proxied, target := benchGateway(b)
	u := target + "/?bytes=1024"
	get(b, direct, u)
	get(b, proxied, u)
	var d, p []time.Duration
	b.ResetTimer()
	for b.Loop() {
		t := time.Now()
		get(b, direct, u)
		d = append(d, time.Since(t))
		t = time.Now()
		get(b, proxied, u)
		p = append(p, time.Since(t))
	}
	slices.Sort(d)
	slices.Sort(p)
	q := func(s []time.Duration, f float64) float64 {
		return float64(s[min(len(s)-1, int(f*float64(len(s))))].Microseconds()) / 1000
	}
	b.ReportMetric(q(d, 0.5), "direct-p50-ms")
	b.ReportMetric(q(p, 0.5), "proxy-p50-ms")
	b.ReportMetric(q(p, 0.5)-q(d, 0.5), "added-p50-ms")
	b.ReportMetric(q(d, 0.99), "direct-p99-ms")
	b.ReportMetric(q(p, 0.99), "proxy-p99-ms")
	b.ReportMetric(q(p, 0.99)-q(d, 0.99), "added-p99-ms")
}

// BenchmarkEgressThroughput downloads 100 MB over HTTPS direct and through
// the proxy and reports both rates and their ratio.
func BenchmarkEgressThroughput(b *testing.B) {
	direct, proxied, target := benchGateway(b)
	const size = 100 << 20
	u := target + "/?bytes=" + strconv.Itoa(size)
	var dt, pt time.Duration
	b.ResetTimer()
	for b.Loop() {
		t := time.Now()
		if get(b, direct, u) != size {
			b.Fatal("short direct download")
		}
		dt += time.Since(t)
		t = time.Now()
		if get(b, proxied, u) != size {
			b.Fatal("short proxied download")
		}
		pt += time.Since(t)
	}
	mb := float64(size) / (1 << 20) * float64(b.N)
	b.ReportMetric(mb/dt.Seconds(), "direct-MB/s")
	b.ReportMetric(mb/pt.Seconds(), "proxy-MB/s")
	b.ReportMetric(100*dt.Seconds()/pt.Seconds(), "proxy-%-of-direct")
}
