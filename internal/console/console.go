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
//     LoginCodeHandler in its approver check); the daemon also vets every
//     code login and decision there (WithVet), against the forwarder and
//     the browser's process it names;
//   - on TCP, the page asks once for a token: the approver token grants
//     decisions, the tool token only the view (it is readable by commands
//     in the state directory, like the approval API refuses it).
//
// Either way the browser then holds a session cookie (HttpOnly,
// SameSite=Strict, Secure under TLS), and every POST must carry the
// session's CSRF token in a header and come from the console's own origin.
package console

import (
	"crypto/rand"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/sandboxctl/sandboxctl/internal/display"
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
	// ErrViewOnly: the session may look but not decide approvals nor
	// change sandboxes.
	ErrViewOnly = errors.New("console: this session may not decide approvals or change sandboxes (log in with the approver token, or through `sandboxctl ui`)")
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

	hiddenJS func() []byte // /ui/static/hidden.js, made once on first use

	mu       sync.Mutex
	sessions map[[32]byte]*session // by sha256 of the cookie value
	codes    map[[32]byte]time.Time
}

// New returns the console.
func New(opts Options) *Console {
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	c := &Console{opts: opts, sessions: map[[32]byte]*session{}, codes: map[[32]byte]time.Time{}, hiddenJS: sync.OnceValue(hiddenScript)}
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
	m.HandleFunc("GET /ui/api/audit", c.withSession(false, c.audit))
	m.HandleFunc("GET /ui/api/sandboxes", c.withSession(false, c.forwardGet("/v1/sandboxes")))
	m.HandleFunc("GET /ui/api/sandboxes/{name}", c.withSession(false, c.sandbox))
	m.HandleFunc("POST /ui/api/sandboxes/{name}/{action}", c.withSession(true, c.sandboxChange))
	m.HandleFunc("DELETE /ui/api/sandboxes/{name}", c.withSession(true, c.sandboxChange))
	m.HandleFunc("GET /ui/api/sandboxes/{name}/snapshots", c.withSession(false, c.snapshots))
	m.HandleFunc("DELETE /ui/api/sandboxes/{name}/snapshots/{snapshot}", c.withSession(true, c.sandboxChange))
	m.HandleFunc("GET /ui/api/sessions", c.withSession(false, c.sessionList))
	m.HandleFunc("GET /ui/api/all-sessions", c.withSession(false, c.forwardGet("/v1/sessions")))
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

// hiddenScript is hidden.js: the code points package display hides, as a
// character class the page's visible() escapes, so the console and the CLI
// follow one rule. Newlines and tabs stay (the page lays text out with
// them).
func hiddenScript() []byte {
	class, _ := json.Marshal(display.JSCharClass("\n\t"))
	return []byte("window.SANDBOXCTL_HIDDEN = " + string(class) + ";\n")
}

func (c *Console) serveAsset(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/hidden.js" {
		w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
		_, _ = w.Write(c.hiddenJS())
		return
	}
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
