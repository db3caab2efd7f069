package egress

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
)

// DefaultProxyPort is the port of the gateway's HTTP proxy (HTTP_PROXY and
// HTTPS_PROXY in the sandbox).
const DefaultProxyPort = 3128

// Config is one sandbox's gateway: where it listens and what it lets out.
type Config struct {
	ScopeKey string
	// Listen is the address the sandbox reaches the gateway at (its
	// internal network's gateway address); DNS, the proxy and the
	// transparent ports all listen on it.
	Listen    netip.Addr
	ProxyPort uint16 // 0: DefaultProxyPort
	DNSPort   uint16 // 0: 53
	Policy    Policy
	// Local are the daemon's own addresses, never dialled unless a CIDR
	// rule names them (nil: the machine's interface addresses).
	Local []netip.Addr
	// Resolve resolves an allowed name upstream (nil: Policy's
	// UpstreamDNS, else the system resolver).
	Resolve func(ctx context.Context, host string) ([]netip.Addr, error)
	// DialTimeout bounds an upstream connect (0: 15 s).
	DialTimeout time.Duration
	Observer    Observer
	// Interceptor, when set, serves the allowed TLS connections it
	// Intercepts (the credential broker).
	Interceptor Interceptor
	Logf        func(format string, args ...any)
}

// Gateway is a sandbox's resolver and proxy: the only peer of its internal
// network.
type Gateway struct {
	cfg       Config
	ctx       context.Context
	cancel    context.CancelFunc
	listeners []net.Listener
	dns       []*dns.Server
	servers   []*http.Server
	transport *http.Transport
	wg        sync.WaitGroup

	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

// Start listens on cfg.Listen: DNS (UDP and TCP), the proxy port and every
// port a domain rule allows (for programs that ignore the proxy variables
// and connect to the address the resolver gave).
func Start(ctx context.Context, cfg Config) (*Gateway, error) {
	if !cfg.Listen.IsValid() {
		return nil, errors.New("egress: gateway needs a listen address")
	}
	if cfg.ProxyPort == 0 {
		cfg.ProxyPort = DefaultProxyPort
	}
	if cfg.DNSPort == 0 {
		cfg.DNSPort = 53
	}
	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = 15 * time.Second
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	if cfg.Local == nil {
		cfg.Local = localAddrs()
	}
	if cfg.Resolve == nil {
		cfg.Resolve = resolverFor(cfg.Policy.Network.UpstreamDNS)
	}
	gctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	g := &Gateway{cfg: cfg, ctx: gctx, cancel: cancel, conns: map[net.Conn]struct{}{}}
	g.transport = &http.Transport{
		Proxy:               nil,
		DialContext:         g.dialHostPort,
		DisableCompression:  true,
		MaxIdleConnsPerHost: 8,
		IdleConnTimeout:     30 * time.Second,
		ForceAttemptHTTP2:   false,
	}
	ports := append([]uint16{cfg.ProxyPort}, cfg.Policy.Ports()...)
	slices.Sort(ports)
	ports = slices.Compact(ports)
	for _, port := range ports {
		addr := netip.AddrPortFrom(cfg.Listen, port).String()
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			g.Close()
			return nil, fmt.Errorf("egress: gateway of %s: listen %s: %w", cfg.ScopeKey, addr, err)
		}
		g.listeners = append(g.listeners, ln)
	}
	if err := g.startDNS(); err != nil {
		g.Close()
		return nil, err
	}
	for _, ln := range g.listeners {
		hl := newChanListener(ln.Addr())
		srv := &http.Server{Handler: g, ReadHeaderTimeout: 30 * time.Second, ErrorLog: nil}
		g.servers = append(g.servers, srv)
		g.wg.Add(2)
		go func() { defer g.wg.Done(); _ = srv.Serve(hl) }()
		go func() { defer g.wg.Done(); g.accept(ln, hl) }()
	}
	return g, nil
}

// Addr is the gateway's listen address.
func (g *Gateway) Addr() netip.Addr { return g.cfg.Listen }

// ProxyURL is the value of HTTP_PROXY and HTTPS_PROXY in the sandbox.
func (g *Gateway) ProxyURL() string { return ProxyURL(g.cfg.Listen, g.cfg.ProxyPort) }

// ProxyURL is the proxy's URL at addr:port.
func ProxyURL(addr netip.Addr, port uint16) string {
	if port == 0 {
		port = DefaultProxyPort
	}
	return "http://" + netip.AddrPortFrom(addr, port).String()
}

// Close stops listening, ends every connection and waits for the
// gateway's goroutines.
func (g *Gateway) Close() error {
	g.cancel()
	for _, ln := range g.listeners {
		_ = ln.Close()
	}
	for _, s := range g.dns {
		_ = s.Shutdown()
	}
	for _, s := range g.servers {
		_ = s.Close()
	}
	g.mu.Lock()
	for c := range g.conns {
		_ = c.Close()
	}
	g.mu.Unlock()
	if g.transport != nil {
		g.transport.CloseIdleConnections()
	}
	g.wg.Wait()
	return nil
}

func (g *Gateway) track(c net.Conn) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.ctx.Err() != nil {
		return false
	}
	g.conns[c] = struct{}{}
	return true
}

func (g *Gateway) untrack(c net.Conn) {
	g.mu.Lock()
	delete(g.conns, c)
	g.mu.Unlock()
}

func (g *Gateway) report(d Decision) {
	d.ScopeKey = g.cfg.ScopeKey
	if !d.Allowed {
		g.cfg.Logf("egress %s: denied %s %s:%d: %s", g.cfg.ScopeKey, d.Kind, d.Host, d.Port, d.Reason)
	}
	if g.cfg.Observer != nil {
		g.cfg.Observer.EgressDecided(d)
	}
}

// accept takes the connections of one port: TLS goes to the SNI path,
// anything else to the HTTP server (proxy requests, CONNECT, plain HTTP).
func (g *Gateway) accept(ln net.Listener, hl *chanListener) {
	defer hl.Close()
	port := uint16(ln.Addr().(*net.TCPAddr).Port)
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		if !g.track(c) {
			_ = c.Close()
			return
		}
		g.wg.Add(1)
		go func() {
			defer g.wg.Done()
			br := bufio.NewReader(c)
			_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
			first, err := br.Peek(1)
			_ = c.SetReadDeadline(time.Time{})
			if err != nil {
				g.untrack(c)
				_ = c.Close()
				return
			}
			pc := newPeeked(c, br)
			if first[0] == 0x16 { // a TLS handshake record
				defer g.untrack(c)
				g.serveTLS(pc, "", port, KindTLS)
				return
			}
			// The HTTP server owns it from here (and closes it).
			g.untrack(c)
			if !hl.put(pc) {
				_ = c.Close()
			}
		}()
	}
}

// serveTLS decides on a TLS connection by its SNI. want, when set, is the
// name a CONNECT named: the SNI must be the same (no domain fronting).
func (g *Gateway) serveTLS(c net.Conn, want string, port uint16, kind string) {
	start := time.Now()
	defer c.Close()
	hctx, cancel := context.WithTimeout(g.ctx, 30*time.Second)
	sni, hello, ok := peekClientHello(hctx, c)
	cancel()
	d := Decision{Kind: kind, Host: sni, Port: port}
	switch {
	case !ok:
		d.Host, d.Reason = want, "not a TLS ClientHello"
		g.report(d)
		return
	case sni == "":
		d.Host, d.Reason = want, "the TLS ClientHello names no server (SNI); connections by IP address are refused"
		g.report(d)
		return
	case want != "" && NormalizeHost(sni) != NormalizeHost(want):
		d.Reason = fmt.Sprintf("the TLS server name %q is not the CONNECT host %q", sni, want)
		d.Host = want
		g.report(d)
		return
	}
	rule, allowed := g.cfg.Policy.Host(sni, port)
	if !allowed {
		d.Reason = "no allow rule names it"
		g.report(d)
		return
	}
	d.Rule = rule.Text
	host := NormalizeHost(sni)
	if ic := g.cfg.Interceptor; ic != nil && ic.Intercepts(g.cfg.ScopeKey, host, int(port)) {
		client := &countingConn{Conn: replay(c, hello)}
		d.Allowed = true
		err := ic.Serve(g.ctx, g.cfg.ScopeKey, client, host, int(port), func(ctx context.Context) (net.Conn, error) {
			up, _, err := g.dial(ctx, host, port)
			return up, err
		})
		if err != nil {
			d.Reason = "intercepted: " + err.Error()
		}
		d.BytesOut, d.BytesIn, d.Duration = client.read.Load(), client.written.Load(), time.Since(start)
		g.report(d)
		return
	}
	up, addr, err := g.dial(g.ctx, host, port)
	if err != nil {
		d.Reason = err.Error()
		g.report(d)
		return
	}
	d.Allowed, d.Upstream = true, addr
	d.BytesOut, d.BytesIn = splice(replay(c, hello), up)
	d.Duration = time.Since(start)
	g.report(d)
}

// ServeHTTP serves the proxy: CONNECT, absolute-form requests
// (HTTP_PROXY) and origin-form requests to a transparent port.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	port := uint16(0)
	if la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		if ta, ok := la.(*net.TCPAddr); ok {
			port = uint16(ta.Port)
		}
	}
	if r.ProtoMajor != 1 {
		g.report(Decision{Kind: KindHTTP, Host: r.Host, Port: port, Reason: "only HTTP/1 is proxied in the clear"})
		http.Error(w, "egress: only HTTP/1 is proxied in the clear", http.StatusHTTPVersionNotSupported)
		return
	}
	if r.Method == http.MethodConnect {
		g.connect(w, r)
		return
	}
	host, portStr := r.Host, ""
	if r.URL.IsAbs() {
		if r.URL.Scheme != "http" {
			g.report(Decision{Kind: KindHTTP, Host: r.URL.Host, Reason: "scheme " + r.URL.Scheme + " is not proxied (use CONNECT for https)"})
			http.Error(w, "egress: only http:// URLs are proxied; https goes through CONNECT", http.StatusBadRequest)
			return
		}
		host, portStr = r.URL.Hostname(), r.URL.Port()
		if portStr == "" {
			portStr = "80"
		}
	} else {
		// A transparent port: the sandbox connected to this port.
		if h, p, err := net.SplitHostPort(r.Host); err == nil {
			host, portStr = h, p
		}
		if portStr == "" {
			portStr = strconv.Itoa(int(port))
		}
		if portStr != strconv.Itoa(int(port)) {
			g.report(Decision{Kind: KindHTTP, Host: host, Port: port, Reason: "the Host header names port " + portStr + ", the connection came to port " + strconv.Itoa(int(port))})
			http.Error(w, "egress: Host port differs from the connection's", http.StatusForbidden)
			return
		}
	}
	p, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil || p == 0 {
		http.Error(w, "egress: bad port", http.StatusBadRequest)
		return
	}
	port = uint16(p)
	host = NormalizeHost(host)
	d := Decision{Kind: KindHTTP, Host: host, Port: port}
	if host == "" {
		d.Reason = "the request names no host"
		g.report(d)
		http.Error(w, "egress: no Host", http.StatusBadRequest)
		return
	}
	rule, ok := g.cfg.Policy.Host(host, port)
	if !ok {
		d.Reason = "no allow rule names it"
		g.report(d)
		http.Error(w, fmt.Sprintf("egress: %s:%d is not on this sandbox's allowlist", host, port), http.StatusForbidden)
		return
	}
	d.Rule = rule.Text
	if !Request(rule, r.Method, r.URL.Path) {
		d.Reason = fmt.Sprintf("rule %s does not allow %s %s", rule.Text, r.Method, r.URL.Path)
		g.report(d)
		http.Error(w, "egress: "+d.Reason, http.StatusForbidden)
		return
	}
	start := time.Now()
	body := &countingBody{ReadCloser: r.Body}
	r.Body = body
	cw := &countingWriter{ResponseWriter: w}
	var upstream string
	var failed error
	target := net.JoinHostPort(host, strconv.Itoa(int(port)))
	rp := &httputil.ReverseProxy{
		Transport: g.transport,
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme, pr.Out.URL.Host = "http", target
			pr.Out.Host = r.Host
			pr.Out.Header.Del("Proxy-Authorization")
		},
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			failed = err
			http.Error(w, "egress: upstream: "+err.Error(), http.StatusBadGateway)
		},
		ModifyResponse: func(resp *http.Response) error {
			upstream = target
			return nil
		},
	}
	rp.ServeHTTP(cw, r)
	d.Allowed = failed == nil
	if failed != nil {
		d.Reason = failed.Error()
	}
	d.Upstream, d.BytesOut, d.BytesIn, d.Duration = upstream, body.n.Load(), cw.n, time.Since(start)
	g.report(d)
}

// connect serves CONNECT host:port: allowed by the policy, and then only a
// TLS connection whose SNI is host (or, for an IP a CIDR rule allows, any
// TCP stream).
func (g *Gateway) connect(w http.ResponseWriter, r *http.Request) {
	d := Decision{Kind: KindConnect, Host: r.Host}
	h, ps, err := net.SplitHostPort(r.Host)
	p, perr := strconv.ParseUint(ps, 10, 16)
	if err != nil || perr != nil || p == 0 {
		d.Reason = "CONNECT needs host:port"
		g.report(d)
		http.Error(w, "egress: CONNECT needs host:port", http.StatusBadRequest)
		return
	}
	host, port := NormalizeHost(h), uint16(p)
	d.Host, d.Port = host, port
	rule, ok := g.cfg.Policy.Host(host, port)
	if !ok {
		d.Reason = "no allow rule names it"
		g.report(d)
		http.Error(w, fmt.Sprintf("egress: %s:%d is not on this sandbox's allowlist", host, port), http.StatusForbidden)
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		http.Error(w, "egress: cannot take over the connection", http.StatusInternalServerError)
		return
	}
	c, brw, err := hj.Hijack()
	if err != nil {
		return
	}
	if !g.track(c) {
		_ = c.Close()
		return
	}
	defer g.untrack(c)
	var buffered []byte
	if n := brw.Reader.Buffered(); n > 0 {
		buffered, _ = brw.Reader.Peek(n)
		buffered = append([]byte(nil), buffered...)
	}
	tunnel := replay(c, buffered)
	if _, err := c.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n")); err != nil {
		_ = c.Close()
		return
	}
	if _, err := netip.ParseAddr(host); err == nil {
		// An IP a CIDR rule allows: any TCP stream.
		start := time.Now()
		defer c.Close()
		up, addr, err := g.dial(g.ctx, host, port)
		if err != nil {
			d.Reason = err.Error()
			g.report(d)
			return
		}
		d.Allowed, d.Rule, d.Upstream = true, rule.Text, addr
		d.BytesOut, d.BytesIn = splice(tunnel, up)
		d.Duration = time.Since(start)
		g.report(d)
		return
	}
	g.serveTLS(tunnel, host, port, KindConnect)
}

// dialHostPort is the HTTP transport's dialer: the same checks as dial.
func (g *Gateway) dialHostPort(ctx context.Context, _, hostport string) (net.Conn, error) {
	h, ps, err := net.SplitHostPort(hostport)
	if err != nil {
		return nil, err
	}
	p, err := strconv.ParseUint(ps, 10, 16)
	if err != nil {
		return nil, err
	}
	c, _, err := g.dial(ctx, h, uint16(p))
	return c, err
}

// dial connects to host:port upstream: host resolved by the gateway itself,
// and only to addresses Upstream allows.
func (g *Gateway) dial(ctx context.Context, host string, port uint16) (net.Conn, string, error) {
	host = NormalizeHost(host)
	var addrs []netip.Addr
	if ip, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{ip}
	} else {
		rctx, cancel := context.WithTimeout(ctx, g.cfg.DialTimeout)
		addrs, err = g.cfg.Resolve(rctx, host)
		cancel()
		if err != nil {
			return nil, "", fmt.Errorf("resolve %s: %w", host, err)
		}
	}
	var refused []string
	d := net.Dialer{Timeout: g.cfg.DialTimeout}
	var lastErr error
	for _, ip := range addrs {
		if !Upstream(g.cfg.Policy, ip, port, g.cfg.Local) {
			refused = append(refused, ip.String())
			continue
		}
		addr := netip.AddrPortFrom(ip.Unmap(), port).String()
		c, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			return c, addr, nil
		}
		lastErr = err
	}
	if lastErr != nil {
		return nil, "", lastErr
	}
	if len(refused) > 0 {
		return nil, "", fmt.Errorf("%s resolves to %v: loopback, link-local or the daemon's own addresses are refused unless a cidr rule names them", host, refused)
	}
	return nil, "", fmt.Errorf("%s has no address", host)
}

// resolverFor resolves with the DNS server up, or the system's resolver.
func resolverFor(up netip.AddrPort) func(ctx context.Context, host string) ([]netip.Addr, error) {
	r := net.DefaultResolver
	if up.IsValid() {
		r = &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, up.String())
		}}
	}
	return func(ctx context.Context, host string) ([]netip.Addr, error) {
		return r.LookupNetIP(ctx, "ip", host)
	}
}

// localAddrs are the machine's interface addresses.
func localAddrs() []netip.Addr {
	as, err := net.InterfaceAddrs()
	if err != nil {
		return nil
	}
	var out []netip.Addr
	for _, a := range as {
		if p, err := netip.ParsePrefix(a.String()); err == nil {
			out = append(out, p.Addr().Unmap())
		}
	}
	return out
}

// startDNS serves the sandbox's resolver: allowed names get the gateway's
// own address (so that programs ignoring the proxy variables connect to
// the gateway), any other name NXDOMAIN; nothing is ever forwarded.
func (g *Gateway) startDNS() error {
	addr := netip.AddrPortFrom(g.cfg.Listen, g.cfg.DNSPort).String()
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		return fmt.Errorf("egress: resolver of %s: listen udp %s: %w", g.cfg.ScopeKey, addr, err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		_ = pc.Close()
		return fmt.Errorf("egress: resolver of %s: listen tcp %s: %w", g.cfg.ScopeKey, addr, err)
	}
	h := dns.HandlerFunc(g.answer)
	for _, s := range []*dns.Server{{PacketConn: pc, Handler: h}, {Listener: ln, Handler: h}} {
		started := make(chan struct{})
		s.NotifyStartedFunc = func() { close(started) }
		g.dns = append(g.dns, s)
		g.wg.Add(1)
		go func() { defer g.wg.Done(); _ = s.ActivateAndServe() }()
		<-started
	}
	return nil
}

func (g *Gateway) answer(w dns.ResponseWriter, req *dns.Msg) {
	m := new(dns.Msg)
	m.SetReply(req)
	m.RecursionAvailable = true
	if len(req.Question) != 1 {
		m.Rcode = dns.RcodeFormatError
		_ = w.WriteMsg(m)
		return
	}
	q := req.Question[0]
	name := NormalizeHost(q.Name)
	d := Decision{Kind: KindDNS, Host: name}
	if q.Qclass != dns.ClassINET || !g.cfg.Policy.Name(name) {
		m.Rcode = dns.RcodeNameError
		d.Reason = "no allow rule names it"
		g.report(d)
		_ = w.WriteMsg(m)
		return
	}
	d.Allowed = true
	if q.Qtype == dns.TypeA && g.cfg.Listen.Is4() {
		m.Answer = append(m.Answer, &dns.A{
			Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60},
			A:   g.cfg.Listen.AsSlice(),
		})
	}
	// Any other type (AAAA included: the sandbox has no IPv6) is an empty
	// answer.
	g.report(d)
	_ = w.WriteMsg(m)
}

// countingBody counts a request body; the transport may still read it
// after the response came.
type countingBody struct {
	io.ReadCloser
	n atomic.Int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}

type countingWriter struct {
	http.ResponseWriter
	n int64
}

func (w *countingWriter) Write(p []byte) (int, error) {
	n, err := w.ResponseWriter.Write(p)
	w.n += int64(n)
	return n, err
}

// Unwrap lets http.ResponseController reach the real writer.
func (w *countingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
