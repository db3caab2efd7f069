package console

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

type session struct {
	canDecide bool
	// vetted: logged in through WithVet (the socket), and valid only
	// there; a session of the TCP listener is valid only there. A browser
	// sends a cookie of 127.0.0.1 to every port of it, and the TCP
	// listener vets no process.
	vetted   bool
	csrf     string
	lastUsed time.Time
}

type vetKey struct{}

// WithVet serves the console with vet deciding, before anything else
// happens, whether the client of a request may log in with a one-time code
// or use a session at all (nil: it may): a stolen session cookie is worth
// nothing to a client the vet refuses. The daemon's socket uses it to hold
// the processes behind a request to the approval API's rule.
func (c *Console) WithVet(vet func(*http.Request) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), vetKey{}, vet)))
	})
}

// throughVet reports whether r came through WithVet.
func throughVet(r *http.Request) bool {
	_, ok := r.Context().Value(vetKey{}).(func(*http.Request) error)
	return ok
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
	if !throughVet(r) {
		// Minted for `sandboxctl ui`: elsewhere (the TCP listener) no
		// process is vetted, and the code would grant decisions without
		// the approver token.
		c.opts.Logf("console: refused a login link outside sandboxctl ui")
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusForbidden)
		_, _ = io.WriteString(w, "Refused: a login link works only through the `sandboxctl ui` that printed it.\n")
		return
	}
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
	c.sessions[sha256.Sum256([]byte(id))] = &session{canDecide: canDecide, vetted: throughVet(r), csrf: csrf, lastUsed: now}
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

// withSession serves next only to a client the vet (if any) passes, with a
// valid session cookie; a POST must also carry the session's CSRF token and
// come from the same origin.
func (c *Console) withSession(post bool, next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := vetted(r); err != nil {
			c.opts.Logf("console: refused %s %s: %v", r.Method, r.URL.Path, err)
			writeError(w, http.StatusForbidden, err)
			return
		}
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
		if ok && s.vetted != throughVet(r) {
			ok = false // a session of the other listener
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
