package daemon

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"

	"github.com/sandboxctl/sandboxctl/api"
	"github.com/sandboxctl/sandboxctl/vocab"
)

// PortDialer connects to a port on the loopback of an agent's sandbox
// (sandbox.Manager.DialPort): what previews reach their ports through.
type PortDialer interface {
	DialPort(ctx context.Context, agentID, sessionKey string, port int) (net.Conn, error)
}

// PreviewOptions configure Previews.
type PreviewOptions struct {
	// Publish sends the preview events (opened, closed); nil sends none.
	Publish func(api.Event)
	// IsUnavailable reports errors of a backend that is down (→ 503).
	IsUnavailable func(error) bool
	// Logf receives the proxy's errors.
	Logf func(format string, args ...any)
	// Now is the clock (default time.Now).
	Now func() time.Time
	// BaseURL is the TCP listener's URL ("http://127.0.0.1:8377"), for the
	// URL of a preview that opened; nil or "" leaves it out.
	BaseURL func() string
}

// Previews expose ports of sandboxes through the daemon's TCP listener
// (docs/previews.md): Routes open, list and close them (behind the
// daemon's token), Proxy serves each under api.PreviewPathPrefix behind
// a token of its own, checked before anything reaches the sandbox.
type Previews struct {
	dial PortDialer
	opts PreviewOptions

	mu   sync.Mutex
	byID map[string]*preview
}

// preview is one exposed port.
type preview struct {
	api.Preview
	tokenHash [sha256.Size]byte

	mu     sync.Mutex
	closed bool
	conns  map[net.Conn]struct{} // open connections to the port, closed with the preview
	proxy  *httputil.ReverseProxy
}

// NewPreviews serves previews of the ports dial reaches.
func NewPreviews(dial PortDialer, opts PreviewOptions) *Previews {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	return &Previews{dial: dial, opts: opts, byID: map[string]*preview{}}
}

// Routes are the previews' management API (Options.Previews):
//
//	POST   /v1/previews       open one (api.OpenPreviewRequest) → 201 api.Preview with its token
//	GET    /v1/previews       list them (no tokens)
//	DELETE /v1/previews/{id}  close one and its connections
func (p *Previews) Routes() map[string]http.Handler {
	return map[string]http.Handler{
		"POST /v1/previews":        http.HandlerFunc(p.handleOpen),
		"GET /v1/previews":         http.HandlerFunc(p.handleList),
		"DELETE /v1/previews/{id}": http.HandlerFunc(p.handleClose),
	}
}

// ProxyRoutes serve the previews themselves (Options.Previews: on TCP
// only, without the daemon's token; each checks its own).
func (p *Previews) ProxyRoutes() map[string]http.Handler {
	return map[string]http.Handler{api.PreviewPathPrefix: http.HandlerFunc(p.serveProxy)}
}

func (p *Previews) handleOpen(w http.ResponseWriter, r *http.Request) {
	var req api.OpenPreviewRequest
	if code, err := decodeBody(w, r, &req); err != nil {
		writeError(w, code, err)
		return
	}
	if req.AgentID == "" {
		writeError(w, http.StatusBadRequest, errors.New("agentId is required"))
		return
	}
	if req.Port < 1 || req.Port > 65535 {
		writeError(w, http.StatusBadRequest, fmt.Errorf("port %d is out of range (1-65535)", req.Port))
		return
	}
	id, token := randomHex(8), randomHex(32)
	pv := &preview{
		Preview: api.Preview{ID: id, AgentID: req.AgentID, SessionKey: req.SessionKey, Port: req.Port,
			Path: api.PreviewPathPrefix + id + "/", CreatedAt: p.opts.Now().UTC()},
		tokenHash: sha256.Sum256([]byte(token)),
		conns:     map[net.Conn]struct{}{},
	}
	pv.proxy = p.newProxy(pv)
	p.mu.Lock()
	p.byID[id] = pv
	p.mu.Unlock()
	p.publish(pv, "opened")
	out := pv.Preview
	out.Token = token
	if p.opts.BaseURL != nil {
		if base := p.opts.BaseURL(); base != "" {
			out.URL = strings.TrimSuffix(base, "/") + pv.Path + "?" + url.Values{api.PreviewTokenParam: {token}}.Encode()
		}
	}
	writeJSON(w, http.StatusCreated, out)
}

func (p *Previews) handleList(w http.ResponseWriter, _ *http.Request) {
	p.mu.Lock()
	out := make([]api.Preview, 0, len(p.byID))
	for _, pv := range p.byID {
		out = append(out, pv.Preview)
	}
	p.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].CreatedAt.Before(out[j].CreatedAt) })
	writeJSON(w, http.StatusOK, out)
}

func (p *Previews) handleClose(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	p.mu.Lock()
	pv := p.byID[id]
	delete(p.byID, id)
	p.mu.Unlock()
	if pv == nil {
		writeError(w, http.StatusNotFound, fmt.Errorf("%w: no preview %q", cerrdefs.ErrNotFound, id))
		return
	}
	pv.close()
	p.publish(pv, "closed")
	w.WriteHeader(http.StatusNoContent)
}

// Close closes every preview and its connections.
func (p *Previews) Close() {
	p.mu.Lock()
	all := p.byID
	p.byID = map[string]*preview{}
	p.mu.Unlock()
	for _, pv := range all {
		pv.close()
	}
}

func (p *Previews) publish(pv *preview, action string) {
	if p.opts.Publish == nil {
		return
	}
	p.opts.Publish(api.Event{Type: vocab.EventPreview, Text: fmt.Sprintf("preview %s of port %d %s", pv.ID, pv.Port, action),
		AgentID: pv.AgentID, SessionKey: pv.SessionKey, Time: p.opts.Now(), Details: api.Details{Action: action, ID: pv.ID}})
}

// serveProxy serves /preview/ID/REST: the token (cookie, header, or the
// query parameter of a first visit) must match the preview's before
// anything is sent to the sandbox; the request then goes to the port
// with the prefix, the token and its cookie removed.
func (p *Previews) serveProxy(w http.ResponseWriter, r *http.Request) {
	id, rest, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, api.PreviewPathPrefix), "/")
	p.mu.Lock()
	pv := p.byID[id]
	p.mu.Unlock()
	q := r.URL.Query()
	token := r.Header.Get(api.PreviewTokenHeader)
	fromQuery := false
	if t := q.Get(api.PreviewTokenParam); t != "" {
		token, fromQuery = t, true
	} else if c, err := r.Cookie(previewCookieName(id)); err == nil && token == "" {
		token = c.Value
	}
	if pv == nil {
		// Unknown and closed previews answer alike, whatever the token.
		writeError(w, http.StatusNotFound, errors.New("no such preview"))
		return
	}
	got := sha256.Sum256([]byte(token))
	if token == "" || subtle.ConstantTimeCompare(got[:], pv.tokenHash[:]) != 1 {
		writeError(w, http.StatusUnauthorized, errors.New("this preview needs its token"))
		return
	}
	if fromQuery {
		// A first visit: keep the token in a cookie of this preview's path
		// and leave it out of the URL the page sees (its links, its
		// Referer, the sandbox's logs).
		http.SetCookie(w, &http.Cookie{Name: previewCookieName(id), Value: token, Path: pv.Path,
			HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
		q.Del(api.PreviewTokenParam)
		u := url.URL{Path: pv.Path + rest, RawQuery: q.Encode()}
		http.Redirect(w, r, u.RequestURI(), http.StatusFound)
		return
	}
	if rest == "" && !strings.HasSuffix(r.URL.Path, "/") {
		http.Redirect(w, r, pv.Path, http.StatusFound)
		return
	}
	out := r.Clone(r.Context())
	out.URL.Path = "/" + rest
	out.URL.RawPath = ""
	out.Header.Del(api.PreviewTokenHeader)
	stripCookie(out, previewCookieName(id))
	pv.proxy.ServeHTTP(w, out)
}

// newProxy forwards to pv's port, one relay per connection; WebSocket and
// other upgrades pass through (httputil.ReverseProxy).
func (p *Previews) newProxy(pv *preview) *httputil.ReverseProxy {
	target := &url.URL{Scheme: "http", Host: "127.0.0.1:" + strconv.Itoa(pv.Port)}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			c, err := p.dial.DialPort(ctx, pv.AgentID, pv.SessionKey, pv.Port)
			if err != nil {
				return nil, err
			}
			return pv.track(c)
		},
		MaxIdleConnsPerHost: 4,
		IdleConnTimeout:     30 * time.Second,
	}
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Host = target.Host
			pr.SetXForwarded()
		},
		Transport: tr,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			code := httpStatus(err, p.opts.IsUnavailable)
			if code == http.StatusInternalServerError || code == http.StatusServiceUnavailable {
				code = http.StatusBadGateway
			}
			p.opts.Logf("preview %s (port %d): %v", pv.ID, pv.Port, err)
			writeError(w, code, fmt.Errorf("preview %s: port %d: %w", pv.ID, pv.Port, err))
		},
	}
}

// track adds c to pv's connections, closed with it.
func (pv *preview) track(c net.Conn) (net.Conn, error) {
	pv.mu.Lock()
	defer pv.mu.Unlock()
	if pv.closed {
		_ = c.Close()
		return nil, fmt.Errorf("%w: preview %s is closed", cerrdefs.ErrNotFound, pv.ID)
	}
	tc := &trackedConn{Conn: c, pv: pv}
	pv.conns[tc] = struct{}{}
	return tc, nil
}

func (pv *preview) close() {
	pv.mu.Lock()
	pv.closed = true
	conns := pv.conns
	pv.conns = map[net.Conn]struct{}{}
	pv.mu.Unlock()
	for c := range conns {
		_ = c.Close()
	}
	if tr, ok := pv.proxy.Transport.(*http.Transport); ok {
		tr.CloseIdleConnections()
	}
}

// trackedConn leaves its preview's set when closed.
type trackedConn struct {
	net.Conn
	pv   *preview
	once sync.Once
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.pv.mu.Lock()
		delete(c.pv.conns, c)
		c.pv.mu.Unlock()
	})
	return c.Conn.Close()
}

// previewCookieName is the cookie of preview id's token.
func previewCookieName(id string) string { return api.PreviewCookie + "_" + id }

// stripCookie removes the cookie name from r's Cookie headers.
func stripCookie(r *http.Request, name string) {
	cookies := r.Cookies()
	r.Header.Del("Cookie")
	for _, c := range cookies {
		if c.Name != name {
			r.AddCookie(c)
		}
	}
}

// randomHex is n random bytes, hex-encoded.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
