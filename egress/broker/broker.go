// Package broker is the credential broker of the egress proxy
// (docs/secrets.md): a sandbox sees a placeholder for each configured
// secret, and the broker, which the proxy hands the connections to a
// secret's hosts, terminates their TLS with a per-daemon CA, puts the real
// value in the request's headers and sends it on to the upstream, whose
// real certificate it verifies. A placeholder sent anywhere else is never
// touched.
package broker

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sandboxctl/sandboxctl/egress"
	"github.com/sandboxctl/sandboxctl/sandbox/sandboxconfig"
	"github.com/sandboxctl/sandboxctl/sessions/output"
)

// secret is a configured secret with its value and placeholder.
type secret struct {
	name        string
	value       string
	placeholder string
	hosts       []sandboxconfig.HostPattern
	env         string
}

func (s *secret) boundTo(host string) bool {
	for _, h := range s.hosts {
		if h.Matches(host) {
			return true
		}
	}
	return false
}

// Options configure New.
type Options struct {
	// Dir keeps the CA and the placeholder key (created 0700 if absent);
	// normally <state>/broker.
	Dir string
	// Secrets are sandbox.secrets, parsed (sandboxconfig.ParseSecrets).
	Secrets []sandboxconfig.Secret
	// Getenv reads the daemon's environment for fromEnv secrets.
	Getenv func(string) string
	// UpstreamCAFile adds the CAs of a PEM file to the system roots.
	UpstreamCAFile string
	Logger         *slog.Logger
}

// Broker is an egress.Interceptor.
type Broker struct {
	ca      *CA
	secrets []*secret
	mask    *output.Masker
	roots   *x509.CertPool
	log     *slog.Logger
}

var _ egress.Interceptor = (*Broker)(nil)

// New reads every secret's value (an unset variable or a missing file is
// an error naming the secret, at start rather than at the first request)
// and loads or creates the CA and placeholder key under o.Dir.
func New(o Options) (*Broker, error) {
	b := &Broker{log: o.Logger}
	if b.log == nil {
		b.log = slog.New(slog.DiscardHandler)
	}
	getenv := o.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	if err := os.MkdirAll(o.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("broker: %w", err)
	}
	ph, err := loadOrCreatePlaceholderKey(o.Dir)
	if err != nil {
		return nil, err
	}
	for _, s := range o.Secrets {
		v, err := s.Value(getenv)
		if err != nil {
			return nil, err
		}
		b.secrets = append(b.secrets, &secret{name: s.Name, value: v, placeholder: ph.of(s.Name), hosts: s.Hosts, env: s.Env})
	}
	values := make(map[string]string, len(b.secrets))
	for _, s := range b.secrets {
		values[s.value] = s.placeholder
	}
	b.mask = output.NewMasker(values)
	if b.ca, err = LoadOrCreateCA(o.Dir); err != nil {
		return nil, err
	}
	if b.roots, err = x509.SystemCertPool(); err != nil {
		return nil, fmt.Errorf("broker: system roots: %w", err)
	}
	if o.UpstreamCAFile != "" {
		pemBytes, err := os.ReadFile(o.UpstreamCAFile)
		if err != nil {
			return nil, fmt.Errorf("sandbox.secretsUpstreamCAFile: %w", err)
		}
		if !b.roots.AppendCertsFromPEM(pemBytes) {
			return nil, fmt.Errorf("sandbox.secretsUpstreamCAFile %s: no PEM certificate in it", o.UpstreamCAFile)
		}
	}
	return b, nil
}

// CABundle is the PEM certificate the sandbox must trust.
func (b *Broker) CABundle() []byte { return b.ca.CertPEM() }

// Env is the sandbox's placeholder variables: env name to placeholder.
func (b *Broker) Env() map[string]string {
	m := make(map[string]string, len(b.secrets))
	for _, s := range b.secrets {
		m[s.env] = s.placeholder
	}
	return m
}

// Mask replaces every real secret value in s by its placeholder: defence in
// depth for what the broker logs or answers.
func (b *Broker) Mask(s string) string { return string(b.mask.Mask([]byte(s))) }

// Intercepts reports whether a secret is bound to host. The proxy hands
// over TLS connections only: a plain HTTP request to a bound host keeps its
// placeholders, so a secret never travels in clear text.
func (b *Broker) Intercepts(_ string, host string, port int) bool {
	return len(b.boundTo(host)) > 0
}

func (b *Broker) boundTo(host string) []*secret {
	var out []*secret
	for _, s := range b.secrets {
		if s.boundTo(host) {
			out = append(out, s)
		}
	}
	return out
}

// maskHold is how long response bytes that may start a secret's value wait
// for the bytes that tell (a streamed response is not held longer).
const maskHold = 50 * time.Millisecond

// handshakeTimeout bounds the sandbox's TLS handshake with the broker.
const handshakeTimeout = 30 * time.Second

// Serve terminates client's TLS with a certificate for host, and forwards
// each HTTP/1.1 request to host over a new TLS connection (through dial)
// that verifies the upstream's certificate, with the placeholders of the
// secrets bound to host replaced by their values.
func (b *Broker) Serve(ctx context.Context, scopeKey string, client net.Conn, host string, port int, dial func(ctx context.Context) (net.Conn, error)) error {
	defer client.Close()
	bound := b.boundTo(host)
	if len(bound) == 0 {
		return fmt.Errorf("broker: no secret is bound to %s", host)
	}
	leaf, err := b.ca.Leaf(strings.ToLower(strings.TrimSuffix(host, ".")))
	if err != nil {
		return err
	}
	tc := tls.Server(client, &tls.Config{
		Certificates: []tls.Certificate{*leaf},
		// HTTP/1.1 only towards the sandbox: every client speaks it, and
		// one request per stream keeps substitution simple to audit.
		NextProtos: []string{"http/1.1"},
		MinVersion: tls.VersionTLS12,
	})
	hctx, cancel := context.WithTimeout(ctx, handshakeTimeout)
	err = tc.HandshakeContext(hctx)
	cancel()
	if err != nil {
		return fmt.Errorf("broker: TLS from the sandbox for %s: %w", host, err)
	}
	if sni := tc.ConnectionState().ServerName; sni != "" && !strings.EqualFold(strings.TrimSuffix(sni, "."), strings.TrimSuffix(host, ".")) {
		return fmt.Errorf("broker: TLS server name %q is not %s", sni, host)
	}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return dial(ctx) },
		TLSClientConfig: &tls.Config{
			ServerName: host,
			RootCAs:    b.roots,
			MinVersion: tls.VersionTLS12,
		},
		ForceAttemptHTTP2:     true,
		MaxIdleConnsPerHost:   1,
		TLSHandshakeTimeout:   handshakeTimeout,
		ResponseHeaderTimeout: 5 * time.Minute,
		IdleConnTimeout:       time.Minute,
	}
	defer tr.CloseIdleConnections()
	authority := host
	if port != 443 {
		authority = net.JoinHostPort(host, strconv.Itoa(port))
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme = "https"
			pr.Out.URL.Host = authority
			pr.Out.Host = authority
			substituteHeaders(pr.Out.Header, bound)
		},
		Transport:      tr,
		ModifyResponse: func(r *http.Response) error { b.maskResponse(r); return nil },
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			b.log.Warn("broker: upstream request failed", "scope", scopeKey, "host", host, "err", b.Mask(err.Error()))
			http.Error(w, "sandboxctl broker: upstream "+host+": "+b.Mask(err.Error()), http.StatusBadGateway)
		},
		ErrorLog: slog.NewLogLogger(b.log.Handler(), slog.LevelDebug),
	}
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The proxy allowed host; a request naming another host inside
		// the connection (domain fronting) is refused, not sent on.
		h := r.Host
		if hh, p, err := net.SplitHostPort(h); err == nil && p == strconv.Itoa(port) {
			h = hh
		}
		if !strings.EqualFold(strings.TrimSuffix(h, "."), strings.TrimSuffix(host, ".")) {
			http.Error(w, fmt.Sprintf("sandboxctl broker: request for %q on a connection to %s", r.Host, host), http.StatusMisdirectedRequest)
			return
		}
		rp.ServeHTTP(w, r)
	})
	l := newOneConn(tc)
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: time.Minute,
		IdleTimeout:       5 * time.Minute,
		TLSNextProto:      map[string]func(*http.Server, *tls.Conn, http.Handler){},
		ErrorLog:          slog.NewLogLogger(b.log.Handler(), slog.LevelDebug),
		ConnState: func(_ net.Conn, s http.ConnState) {
			if s == http.StateClosed || s == http.StateHijacked {
				l.Close()
			}
		},
		BaseContext: func(net.Listener) context.Context { return ctx },
	}
	stop := context.AfterFunc(ctx, func() { srv.Close() })
	defer stop()
	err = srv.Serve(l)
	if errors.Is(err, net.ErrClosed) || errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// substituteHeaders replaces, in every header value, the placeholders of
// the bound secrets by their values; a Basic credential is decoded,
// substituted and encoded again.
func substituteHeaders(h http.Header, bound []*secret) {
	for _, vs := range h {
		for i, v := range vs {
			vs[i] = substitute(v, bound)
		}
	}
}

func substitute(v string, bound []*secret) string {
	if scheme, cred, ok := strings.Cut(v, " "); ok && strings.EqualFold(scheme, "Basic") {
		if raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(cred)); err == nil {
			if s := replacePlaceholders(string(raw), bound); s != string(raw) {
				return scheme + " " + base64.StdEncoding.EncodeToString([]byte(s))
			}
		}
	}
	return replacePlaceholders(v, bound)
}

func replacePlaceholders(v string, bound []*secret) string {
	if !strings.Contains(v, PlaceholderPrefix) {
		return v
	}
	for _, s := range bound {
		v = strings.ReplaceAll(v, s.placeholder, s.value)
	}
	return v
}

// maskResponse puts placeholders back for any real value an upstream
// echoes in its response headers or (unencoded) body.
func (b *Broker) maskResponse(r *http.Response) {
	for _, vs := range r.Header {
		for i, v := range vs {
			vs[i] = b.Mask(v)
		}
	}
	if r.Body == nil || r.Body == http.NoBody || r.Request.Method == http.MethodHead {
		return
	}
	if ce := r.Header.Get("Content-Encoding"); ce != "" && !strings.EqualFold(ce, "identity") {
		return // documented limit (docs/secrets.md): compressed bodies are not scanned
	}
	r.Body = b.mask.ReadCloser(r.Body, maskHold)
	r.ContentLength = -1
	r.Header.Del("Content-Length")
}

// oneConn is a listener that yields one connection, then waits for Close.
type oneConn struct {
	conn chan net.Conn
	done chan struct{}
	once sync.Once
	addr net.Addr
}

func newOneConn(c net.Conn) *oneConn {
	l := &oneConn{conn: make(chan net.Conn, 1), done: make(chan struct{}), addr: c.LocalAddr()}
	l.conn <- c
	return l
}

func (l *oneConn) Accept() (net.Conn, error) {
	select {
	case c := <-l.conn:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *oneConn) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *oneConn) Addr() net.Addr { return l.addr }

// Masker masks every secret's real value by its placeholder in command
// output (sessions.Options.Mask).
func (b *Broker) Masker() *output.Masker { return b.mask }
