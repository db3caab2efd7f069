// Package console is the daemon's web console at /ui/: the pending
// approvals with everything a decision binds and the buttons to decide
// them, the live sessions of each agent with their output, the sandboxes
// with their hardening and resource use, and the nodes.
//
// The page is plain HTML, CSS and JavaScript embedded in the binary. It
// renders every value it gets from the daemon as text (textContent, never
// markup), and its Content-Security-Policy allows only its own script, so
// hostile agent output cannot run in the browser.
//
// Who may use it:
//
//   - on the unix socket (reached through `sandboxctl ui`, which forwards a
//     port on 127.0.0.1 to it), a browser logs in with a one-time code that
//     only a peer allowed to decide approvals can mint (the daemon wraps
//     LoginCodeHandler in its approver check);
//   - on TCP, the page asks once for a token: the approver token grants
//     decisions, the tool token only the view (it is readable by commands
//     in the state directory, like the approval API refuses it).
//
// Either way the browser then holds a session cookie (HttpOnly,
// SameSite=Strict, Secure under TLS), and every POST must carry the
// session's CSRF token in a header and come from the console's own origin.
package console

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

//go:embed assets
var assets embed.FS

// Paths of the console.
const (
	// Prefix is where the daemon mounts the console.
	Prefix = "/ui/"
	// LoginPath redeems a one-time login code (?code=).
	LoginPath = "/ui/login"
	// CookieName is the session cookie.
	CookieName = "sandboxctl_console"
	// CSRFHeader carries the session's CSRF token on every POST.
	CSRFHeader = "X-Sandboxctl-Csrf"
)

// Lifetimes and bounds.
const (
	codeTTL     = 60 * time.Second
	sessionIdle = 12 * time.Hour
	maxSessions = 64
	maxCodes    = 16
	maxBody     = 4096
)

// Errors callers and tests branch on.
var (
	// ErrNoSession: the request has no valid session cookie.
	ErrNoSession = errors.New("console: not logged in")
	// ErrForged: a POST without the session's CSRF token or from another
	// origin.
	ErrForged = errors.New("console: refused a request that did not come from the console's own page (CSRF)")
	// ErrViewOnly: the session may look but not decide.
	ErrViewOnly = errors.New("console: this session may not decide approvals (log in with the approver token, or through `sandboxctl ui`)")
)

// Options configure a Console.
type Options struct {
	// API serves the daemon's read routes the console shows: GET
	// /v1/approvals, GET /v1/sandboxes, GET /v1/sandboxes/{name}, GET
	// /v1/nodes and POST /v1/tools/process (the console sends only the
	// actions list and log).
	API http.Handler
	// Decide serves POST /v1/approvals/{id} without a guard of its own: the
	// console lets only a session that may decide reach it.
	Decide http.Handler
	// ToolToken, when not empty, logs a browser in for viewing.
	ToolToken string
	// ApproverToken, when not empty, logs a browser in with decisions.
	ApproverToken string
	Logf          func(format string, args ...any)
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// Console serves /ui/. Create it with New.
type Console struct {
	opts     Options
	mux      *http.ServeMux
	tool     [32]byte // sha256 of ToolToken
	approver [32]byte

	mu       sync.Mutex
	sessions map[[32]byte]*session // by sha256 of the cookie value
	codes    map[[32]byte]time.Time
}

type session struct {
	canDecide bool
	csrf      string
	lastUsed  time.Time
}

// New returns the console.
func New(opts Options) *Console {
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	c := &Console{opts: opts, sessions: map[[32]byte]*session{}, codes: map[[32]byte]time.Time{}}
	if opts.ToolToken != "" {
		c.tool = sha256.Sum256([]byte(opts.ToolToken))
	}
	if opts.ApproverToken != "" {
		c.approver = sha256.Sum256([]byte(opts.ApproverToken))
	}
	m := http.NewServeMux()
	m.HandleFunc("GET /ui/{$}", c.page)
	m.HandleFunc("GET /ui/static/{file}", c.asset)
	m.HandleFunc("GET "+LoginPath, c.redeem)
	m.HandleFunc("POST /ui/api/login", c.tokenLogin)
	m.HandleFunc("POST /ui/api/logout", c.withSession(true, c.logout))
	m.HandleFunc("GET /ui/api/me", c.withSession(false, c.me))
	m.HandleFunc("GET /ui/api/approvals", c.withSession(false, c.forwardGet("/v1/approvals")))
	m.HandleFunc("GET /ui/api/nodes", c.withSession(false, c.forwardGet("/v1/nodes")))
	m.HandleFunc("GET /ui/api/sandboxes", c.withSession(false, c.forwardGet("/v1/sandboxes")))
	m.HandleFunc("GET /ui/api/sandboxes/{name}", c.withSession(false, c.sandbox))
	m.HandleFunc("GET /ui/api/sessions", c.withSession(false, c.sessionList))
	m.HandleFunc("GET /ui/api/sessions/{id}/log", c.withSession(false, c.sessionLog))
	m.HandleFunc("POST /ui/api/approvals/{id}", c.withSession(true, c.decide))
	m.HandleFunc("/ui/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, fmt.Errorf("console: no such page or endpoint: %s %s", r.Method, r.URL.Path))
	})
	c.mux = m
	return c
}

// ServeHTTP serves everything under /ui/.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	// Only the console's own files may run or load; nothing may frame it;
	// no address (a login code) leaves in a Referer.
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	c.mux.ServeHTTP(w, r)
}

func (c *Console) page(w http.ResponseWriter, r *http.Request) {
	r2 := r.Clone(r.Context())
	r2.URL.Path = "/index.html"
	c.serveAsset(w, r2)
}

func (c *Console) asset(w http.ResponseWriter, r *http.Request) {
	r2 := r.Clone(r.Context())
	r2.URL.Path = "/" + r.PathValue("file")
	c.serveAsset(w, r2)
}

func (c *Console) serveAsset(w http.ResponseWriter, r *http.Request) {
	data, err := fs.ReadFile(assets, "assets"+r.URL.Path)
	if err != nil {
		writeError(w, http.StatusNotFound, fmt.Errorf("console: no asset %s", r.URL.Path))
		return
	}
	switch {
	case strings.HasSuffix(r.URL.Path, ".html"):
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
	case strings.HasSuffix(r.URL.Path, ".js"):
		w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
	case strings.HasSuffix(r.URL.Path, ".css"):
		w.Header().Set("Content-Type", "text/css; charset=utf-8")
	default:
		w.Header().Set("Content-Type", "application/octet-stream")
	}
	_, _ = w.Write(data)
}

type vetKey struct{}

// WithVet serves the console with vet deciding, before anything else
// happens, whether the client of a request may log in with a one-time code
// or decide an approval (nil: it may). The daemon's socket uses it to hold
// the processes behind a request to the approval API's rule.
func (c *Console) WithVet(vet func(*http.Request) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), vetKey{}, vet)))
	})
}

// vetted applies the vet of WithVet, if any.
func vetted(r *http.Request) error {
	if vet, ok := r.Context().Value(vetKey{}).(func(*http.Request) error); ok {
		return vet(r)
	}
	return nil
}

// LoginCodeHandler mints a one-time login code: POST answers {"path":
// "/ui/login?code=..."}, valid once for a minute, that logs a browser in
// with decisions. The daemon serves it on its unix socket only, to a peer
// that may decide approvals.
func (c *Console) LoginCodeHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		code, err := c.MintLoginCode()
		if err != nil {
			writeError(w, http.StatusServiceUnavailable, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"path": LoginPath + "?code=" + url.QueryEscape(code)})
	})
}

// MintLoginCode returns a new one-time login code.
func (c *Console) MintLoginCode() (string, error) {
	code, err := randomToken()
	if err != nil {
		return "", err
	}
	now := c.opts.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, exp := range c.codes {
		if !now.Before(exp) {
			delete(c.codes, k)
		}
	}
	if len(c.codes) >= maxCodes {
		return "", fmt.Errorf("console: %d login codes are waiting to be used; try again in a minute", maxCodes)
	}
	c.codes[sha256.Sum256([]byte(code))] = now.Add(codeTTL)
	return code, nil
}

// redeem logs a browser in with a one-time code and sends it to the page.
func (c *Console) redeem(w http.ResponseWriter, r *http.Request) {
	if err := vetted(r); err != nil {
		// The code stays valid for the person it was meant for.
		c.opts.Logf("console: refused a login: %v", err)
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusForbidden)
		_, _ = io.WriteString(w, "Refused: "+err.Error()+"\n")
		return
	}
	key := sha256.Sum256([]byte(r.URL.Query().Get("code")))
	now := c.opts.Now()
	c.mu.Lock()
	exp, ok := c.codes[key]
	delete(c.codes, key)
	c.mu.Unlock()
	if !ok || !now.Before(exp) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = io.WriteString(w, "This login link is invalid, used or expired. Run `sandboxctl ui` again for a new one.\n")
		return
	}
	if err := c.startSession(w, r, true); err != nil {
		writeError(w, http.StatusInternalServerError, err)
		return
	}
	http.Redirect(w, r, Prefix, http.StatusSeeOther)
}

// tokenLogin logs a browser in with a token: {"token": "..."}.
func (c *Console) tokenLogin(w http.ResponseWriter, r *http.Request) {
	if err := sameOrigin(r); err != nil {
		writeError(w, http.StatusForbidden, err)
		return
	}
	if mt := r.Header.Get("Content-Type"); !strings.HasPrefix(mt, "application/json") {
		// A form of another page cannot send JSON without a preflight.
		writeError(w, http.StatusUnsupportedMediaType, fmt.Errorf("console: login wants Content-Type application/json, got %q", mt))
		return
	}
	var body struct {
		Token string `json:"token"`
	}
	if err := decode(w, r, &body); err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	got := sha256.Sum256([]byte(strings.TrimSpace(body.Token)))
	// Both compares always run, so the time does not tell which matched.
	approver := c.opts.ApproverToken != "" && subtle.ConstantTimeCompare(got[:], c.approver[:]) == 1
	tool := c.opts.ToolToken != "" && subtle.ConstantTimeCompare(got[:], c.tool[:]) == 1
	if !approver && !tool {
		c.opts.Logf("console: refused a login with a wrong token from %s", r.RemoteAddr)
		writeError(w, http.StatusUnauthorized, errors.New("console: wrong token (give the daemon's approver token to decide, or its tool token to watch)"))
		return
	}
	if err := c.startSession(w, r, approver); err != nil {
		writeError(w, http.StatusInternalServerError, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]bool{"canDecide": approver})
}

func (c *Console) startSession(w http.ResponseWriter, r *http.Request, canDecide bool) error {
	id, err := randomToken()
	if err != nil {
		return err
	}
	csrf, err := randomToken()
	if err != nil {
		return err
	}
	now := c.opts.Now()
	c.mu.Lock()
	c.sweepLocked(now)
	if len(c.sessions) >= maxSessions {
		// Drop the least recently used: a flood of logins cannot grow
		// the daemon's memory.
		var oldest [32]byte
		var at time.Time
		for k, s := range c.sessions {
			if at.IsZero() || s.lastUsed.Before(at) {
				oldest, at = k, s.lastUsed
			}
		}
		delete(c.sessions, oldest)
	}
	c.sessions[sha256.Sum256([]byte(id))] = &session{canDecide: canDecide, csrf: csrf, lastUsed: now}
	c.mu.Unlock()
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: id, Path: Prefix, HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	return nil
}

func (c *Console) sweepLocked(now time.Time) {
	for k, s := range c.sessions {
		if now.Sub(s.lastUsed) > sessionIdle {
			delete(c.sessions, k)
		}
	}
}

type sessionKey struct{}

// withSession serves next only with a valid session cookie; a POST must
// also carry the session's CSRF token and come from the same origin.
func (c *Console) withSession(post bool, next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ck, err := r.Cookie(CookieName)
		if err != nil {
			writeError(w, http.StatusUnauthorized, ErrNoSession)
			return
		}
		key := sha256.Sum256([]byte(ck.Value))
		now := c.opts.Now()
		c.mu.Lock()
		s, ok := c.sessions[key]
		if ok && now.Sub(s.lastUsed) > sessionIdle {
			delete(c.sessions, key)
			ok = false
		}
		var snap session
		if ok {
			s.lastUsed = now
			snap = *s
		}
		c.mu.Unlock()
		if !ok {
			writeError(w, http.StatusUnauthorized, ErrNoSession)
			return
		}
		if post {
			if err := sameOrigin(r); err != nil {
				c.opts.Logf("console: refused %s %s: %v", r.Method, r.URL.Path, err)
				writeError(w, http.StatusForbidden, err)
				return
			}
			got := r.Header.Get(CSRFHeader)
			if got == "" || subtle.ConstantTimeCompare([]byte(got), []byte(snap.csrf)) != 1 {
				c.opts.Logf("console: refused %s %s: no or wrong CSRF token", r.Method, r.URL.Path)
				writeError(w, http.StatusForbidden, ErrForged)
				return
			}
		}
		next(w, r.WithContext(context.WithValue(r.Context(), sessionKey{}, snap)))
	}
}

// sameOrigin refuses a request whose browser says it comes from another
// origin (Sec-Fetch-Site, Origin). A client that is not a browser sends
// neither and is held by the CSRF token alone.
func sameOrigin(r *http.Request) error {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" {
		return fmt.Errorf("%w: Sec-Fetch-Site is %q", ErrForged, site)
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return nil
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	if origin != scheme+"://"+r.Host {
		return fmt.Errorf("%w: Origin %q is not %s://%s", ErrForged, origin, scheme, r.Host)
	}
	return nil
}

func sessionFrom(ctx context.Context) session {
	s, _ := ctx.Value(sessionKey{}).(session)
	return s
}

func (c *Console) me(w http.ResponseWriter, r *http.Request) {
	s := sessionFrom(r.Context())
	writeJSON(w, http.StatusOK, map[string]any{"canDecide": s.canDecide, "csrf": s.csrf})
}

func (c *Console) logout(w http.ResponseWriter, r *http.Request) {
	if ck, err := r.Cookie(CookieName); err == nil {
		c.mu.Lock()
		delete(c.sessions, sha256.Sum256([]byte(ck.Value)))
		c.mu.Unlock()
	}
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: "", Path: Prefix, MaxAge: -1, HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	writeJSON(w, http.StatusOK, map[string]bool{"ok": true})
}

// forwardGet answers with the daemon's own GET route.
func (c *Console) forwardGet(path string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		forward(w, r, c.opts.API, http.MethodGet, path, nil)
	}
}

func (c *Console) sandbox(w http.ResponseWriter, r *http.Request) {
	forward(w, r, c.opts.API, http.MethodGet, "/v1/sandboxes/"+url.PathEscape(r.PathValue("name")), nil)
}

// processParams is the part of the process tool's input the console sends.
type processParams struct {
	Action     string `json:"action"`
	SessionID  string `json:"sessionId,omitempty"`
	AgentID    string `json:"agentId,omitempty"`
	SessionKey string `json:"sessionKey,omitempty"`
	Offset     *int   `json:"offset,omitempty"`
	Limit      *int   `json:"limit,omitempty"`
}

// sessionList lists the sessions of one scope (?agentId=&sessionKey=).
func (c *Console) sessionList(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	c.process(w, r, processParams{Action: "list", AgentID: q.Get("agentId"), SessionKey: q.Get("sessionKey")})
}

// sessionLog is a session's output (?agentId=&sessionKey=&offset=&limit=,
// as the process tool's log action takes them).
func (c *Console) sessionLog(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p := processParams{Action: "log", SessionID: r.PathValue("id"), AgentID: q.Get("agentId"), SessionKey: q.Get("sessionKey")}
	for name, dst := range map[string]**int{"offset": &p.Offset, "limit": &p.Limit} {
		if v := q.Get(name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil {
				writeError(w, http.StatusBadRequest, fmt.Errorf("console: %s=%q is not an integer", name, v))
				return
			}
			*dst = &n
		}
	}
	c.process(w, r, p)
}

func (c *Console) process(w http.ResponseWriter, r *http.Request, p processParams) {
	body, err := json.Marshal(p)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err)
		return
	}
	forward(w, r, c.opts.API, http.MethodPost, "/v1/tools/process", body)
}

// decide forwards a decision {"decision": "allow-once|allow-always|deny"}
// of a session that may decide.
func (c *Console) decide(w http.ResponseWriter, r *http.Request) {
	s := sessionFrom(r.Context())
	if !s.canDecide {
		writeError(w, http.StatusForbidden, ErrViewOnly)
		return
	}
	if err := vetted(r); err != nil {
		c.opts.Logf("console: refused a decision: %v", err)
		writeError(w, http.StatusForbidden, err)
		return
	}
	var body struct {
		Decision string `json:"decision"`
	}
	if err := decode(w, r, &body); err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	fwd, err := json.Marshal(body)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err)
		return
	}
	id := r.PathValue("id")
	c.opts.Logf("console: decision %q on approval %s", body.Decision, id)
	forward(w, r, c.opts.Decide, http.MethodPost, "/v1/approvals/"+url.PathEscape(id), fwd)
}

// forward serves the daemon request the console makes for r with h.
// path is escaped by the caller; the daemon's routes decode it.
func forward(w http.ResponseWriter, r *http.Request, h http.Handler, method, path string, body []byte) {
	r2, err := http.NewRequestWithContext(r.Context(), method, path, bytes.NewReader(body))
	if err != nil {
		writeError(w, http.StatusBadRequest, fmt.Errorf("console: %s %s: %w", method, path, err))
		return
	}
	r2.RemoteAddr = r.RemoteAddr
	if body != nil {
		r2.Header.Set("Content-Type", "application/json")
	}
	h.ServeHTTP(w, r2)
}

func decode(w http.ResponseWriter, r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("console: bad request body: %w", err)
	}
	return nil
}

func randomToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("console: random: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

func writeError(w http.ResponseWriter, code int, err error) {
	writeJSON(w, code, map[string]string{"error": err.Error()})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
