package broker

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// BenchmarkBrokerRequest compares one HTTPS request on a kept-alive
// connection made directly to the upstream with one through the broker
// (TLS terminated, placeholder substituted, TLS to the upstream again).
// The 100 MB download throughput: -bench BrokerDownload.
func BenchmarkBrokerRequest(b *testing.B) {
	ca := newTestCA(b)
	up := startUpstream(b, ca.leaf(b, boundHost))
	br := newBroker(b, b.TempDir(), ca.pem)
	ph := br.Env()["API_TOKEN"]
	direct := directClient(ca.pem, up.srv.Listener.Addr().String())
	addr, _ := proxyTo(b, br, boundHost, up.srv.Listener.Addr().String())
	through := sandboxClient(b, br, addr)
	for _, c := range []struct {
		name string
		cl   *http.Client
	}{{"direct", direct}, {"broker", through}} {
		b.Run(c.name, func(b *testing.B) {
			get := func() {
				req, _ := http.NewRequest("GET", "https://"+boundHost+"/x", nil)
				req.Header.Set("Authorization", "Bearer "+ph)
				resp, err := c.cl.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			get() // the connection is set up outside the timing
			b.ResetTimer()
			for b.Loop() {
				get()
			}
		})
	}
}

// BenchmarkBrokerDownload: a 100 MB response body, direct and through the
// broker (whose masking scans it).
func BenchmarkBrokerDownload(b *testing.B) {
	ca := newTestCA(b)
	srv := startRawUpstream(b, ca.leaf(b, boundHost), make([]byte, 1<<20), 100)
	br := newBroker(b, b.TempDir(), ca.pem)
	addr, _ := proxyTo(b, br, boundHost, srv)
	for _, c := range []struct {
		name string
		cl   *http.Client
	}{{"direct", directClient(ca.pem, srv)}, {"broker", sandboxClient(b, br, addr)}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(100 << 20)
			for b.Loop() {
				resp, err := c.cl.Get("https://" + boundHost + "/big")
				if err != nil {
					b.Fatal(err)
				}
				n, _ := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if n != 100<<20 {
					b.Fatalf("read %d bytes", n)
				}
			}
		})
	}
}

func startRawUpstream(b *testing.B, cert tls.Certificate, chunk []byte, n int) string {
	l, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}})
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for range n {
			w.Write(chunk)
		}
	})}
	go srv.Serve(l)
	b.Cleanup(func() { srv.Close() })
	return l.Addr().String()
}

func directClient(caPEM []byte, addr string) *http.Client {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	return &http.Client{Timeout: time.Minute, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		},
		TLSClientConfig: &tls.Config{RootCAs: pool},
	}}
}
