package console

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// recorder is a fake of the daemon's decision route: it records what the
// console forwarded.
type recorder struct {
	mu    sync.Mutex
	calls []string
}

func (d *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	d.mu.Lock()
	d.calls = append(d.calls, r.Method+" "+r.URL.Path+" "+string(body))
	d.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]string{"ok": "yes"})
}

func (d *recorder) got() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.calls...)
}

const (
	toolToken     = "tool-token-0123456789"
	approverToken = "approver-token-0123456789"
)

type fixture struct {
	c *Console
	// srv serves the console as the socket does (WithVet, a vet that
	// passes everyone); tcp as the TCP listener does (no vet).
	srv, tcp *httptest.Server
	decided  *recorder
	api      *recorder
	now      time.Time
	mu       sync.Mutex
}

func newFixture(t *testing.T, tls bool) *fixture {
	t.Helper()
	f := &fixture{decided: &recorder{}, api: &recorder{}, now: time.Unix(1_700_000_000, 0)}
	f.c = New(Options{API: f.api, Decide: f.decided, ToolToken: toolToken, ApproverToken: approverToken,
		Now: func() time.Time { f.mu.Lock(); defer f.mu.Unlock(); return f.now }})
	socket := f.c.WithVet(func(*http.Request) error { return nil })
	if tls {
		f.srv, f.tcp = httptest.NewTLSServer(socket), httptest.NewTLSServer(f.c)
	} else {
		f.srv, f.tcp = httptest.NewServer(socket), httptest.NewServer(f.c)
	}
	t.Cleanup(f.srv.Close)
	t.Cleanup(f.tcp.Close)
	return f
}

func (f *fixture) advance(d time.Duration) {
	f.mu.Lock()
	f.now = f.now.Add(d)
	f.mu.Unlock()
}

// browser is an HTTP client with a cookie jar that does not follow
// redirects.
func (f *fixture) browser(t *testing.T) *http.Client {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	// srv.Client() is one shared client: each browser gets its own.
	return &http.Client{Transport: f.srv.Client().Transport, Jar: jar,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func do(t *testing.T, c *http.Client, method, url, body string, header map[string]string) (int, string, *http.Response) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	data, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(data), res
}

// loginWithCode logs c in through a one-time code and returns the CSRF token.
func (f *fixture) loginWithCode(t *testing.T, c *http.Client) string {
	t.Helper()
	code, err := f.c.MintLoginCode()
	if err != nil {
		t.Fatal(err)
	}
	st, body, _ := do(t, c, "GET", f.srv.URL+LoginPath+"?code="+url.QueryEscape(code), "", nil)
	if st != http.StatusSeeOther {
		t.Fatalf("redeem: %d %s", st, body)
	}
	return f.csrf(t, c)
}

func (f *fixture) csrf(t *testing.T, c *http.Client) string {
	t.Helper()
	st, body, _ := do(t, c, "GET", f.srv.URL+"/ui/api/me", "", nil)
	if st != http.StatusOK {
		t.Fatalf("me: %d %s", st, body)
	}
	var me struct {
		CSRF      string `json:"csrf"`
		CanDecide bool   `json:"canDecide"`
	}
	if err := json.Unmarshal([]byte(body), &me); err != nil || me.CSRF == "" {
		t.Fatalf("me: %s", body)
	}
	return me.CSRF
}

func sessionCookie(t *testing.T, res *http.Response) *http.Cookie {
	t.Helper()
	for _, c := range res.Cookies() {
		if c.Name == CookieName {
			return c
		}
	}
	t.Fatalf("no %s cookie in %v", CookieName, res.Header["Set-Cookie"])
	return nil
}

func TestLoginCodeWorksOnceAndExpires(t *testing.T) {
	f := newFixture(t, false)
	code, err := f.c.MintLoginCode()
	if err != nil {
		t.Fatal(err)
	}
	b := f.browser(t)
	st, body, res := do(t, b, "GET", f.srv.URL+LoginPath+"?code="+code, "", nil)
	if st != http.StatusSeeOther || res.Header.Get("Location") != Prefix {
		t.Fatalf("redeem: %d %s %v", st, body, res.Header)
	}
	ck := sessionCookie(t, res)
	if !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Secure || ck.Path != Prefix {
		t.Errorf("cookie over plain HTTP: %+v; want HttpOnly, SameSite=Strict, not Secure, Path %s", ck, Prefix)
	}
	if st, body, _ := do(t, f.browser(t), "GET", f.srv.URL+LoginPath+"?code="+code, "", nil); st != http.StatusUnauthorized {
		t.Fatalf("second use of the code: %d %s", st, body)
	}
	late, err := f.c.MintLoginCode()
	if err != nil {
		t.Fatal(err)
	}
	f.advance(codeTTL + time.Second)
	if st, body, _ := do(t, f.browser(t), "GET", f.srv.URL+LoginPath+"?code="+late, "", nil); st != http.StatusUnauthorized {
		t.Fatalf("expired code: %d %s", st, body)
	}
	if st, _, _ := do(t, f.browser(t), "GET", f.srv.URL+LoginPath+"?code=", "", nil); st != http.StatusUnauthorized {
		t.Fatalf("empty code: %d", st)
	}
	// The logged-in browser may read; one without the cookie may not.
	if st, body, _ := do(t, b, "GET", f.srv.URL+"/ui/api/approvals", "", nil); st != http.StatusOK {
		t.Fatalf("approvals with a session: %d %s", st, body)
	}
	if st, _, _ := do(t, f.browser(t), "GET", f.srv.URL+"/ui/api/approvals", "", nil); st != http.StatusUnauthorized {
		t.Fatalf("approvals without a session: %d", st)
	}
	if got := f.api.got(); len(got) != 1 || got[0] != "GET /v1/approvals " {
		t.Fatalf("API calls: %q", got)
	}
}

func TestSessionIdleExpiry(t *testing.T) {
	f := newFixture(t, false)
	b := f.browser(t)
	f.loginWithCode(t, b)
	f.advance(sessionIdle + time.Minute)
	if st, body, _ := do(t, b, "GET", f.srv.URL+"/ui/api/me", "", nil); st != http.StatusUnauthorized {
		t.Fatalf("idle session: %d %s", st, body)
	}
}

func TestSecureCookieUnderTLS(t *testing.T) {
	f := newFixture(t, true)
	st, body, res := do(t, f.browser(t), "POST", f.srv.URL+"/ui/api/login", `{"token":"`+approverToken+`"}`,
		map[string]string{"Content-Type": "application/json"})
	if st != http.StatusOK {
		t.Fatalf("login: %d %s", st, body)
	}
	ck := sessionCookie(t, res)
	if !ck.Secure || !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode {
		t.Fatalf("cookie under TLS: %+v; want Secure, HttpOnly, SameSite=Strict", ck)
	}
}

func TestTokenLoginRights(t *testing.T) {
	f := newFixture(t, false)
	decide := func(c *http.Client, csrf string) (int, string) {
		st, body, _ := do(t, c, "POST", f.srv.URL+"/ui/api/approvals/abc", `{"decision":"allow-once"}`,
			map[string]string{"Content-Type": "application/json", CSRFHeader: csrf})
		return st, body
	}
	login := func(token string) (*http.Client, int, string) {
		c := f.browser(t)
		st, body, _ := do(t, c, "POST", f.srv.URL+"/ui/api/login", `{"token":"`+token+`"}`,
			map[string]string{"Content-Type": "application/json"})
		return c, st, body
	}

	if _, st, body := login("wrong-token-0123456789"); st != http.StatusUnauthorized {
		t.Fatalf("wrong token: %d %s", st, body)
	}
	if _, st, body := login(""); st != http.StatusUnauthorized {
		t.Fatalf("empty token: %d %s", st, body)
	}
	viewer, st, body := login(toolToken)
	if st != http.StatusOK || !strings.Contains(body, `"canDecide":false`) {
		t.Fatalf("tool token login: %d %s", st, body)
	}
	if st, body := decide(viewer, f.csrf(t, viewer)); st != http.StatusForbidden || !strings.Contains(body, "may not decide") {
		t.Fatalf("decision with the tool token's session: %d %s", st, body)
	}
	if got := f.decided.got(); len(got) != 0 {
		t.Fatalf("a view-only session reached the decision route: %q", got)
	}
	approver, st, body := login(approverToken)
	if st != http.StatusOK || !strings.Contains(body, `"canDecide":true`) {
		t.Fatalf("approver token login: %d %s", st, body)
	}
	if st, body := decide(approver, f.csrf(t, approver)); st != http.StatusOK {
		t.Fatalf("approver's decision: %d %s", st, body)
	}
	if got := f.decided.got(); len(got) != 1 || got[0] != `POST /v1/approvals/abc {"decision":"allow-once"}` {
		t.Fatalf("forwarded decisions: %q", got)
	}
}

func TestLoginRefusesForms(t *testing.T) {
	f := newFixture(t, false)
	st, body, _ := do(t, f.browser(t), "POST", f.srv.URL+"/ui/api/login", "token="+approverToken,
		map[string]string{"Content-Type": "application/x-www-form-urlencoded"})
	if st != http.StatusUnsupportedMediaType {
		t.Fatalf("form login: %d %s", st, body)
	}
	st, body, _ = do(t, f.browser(t), "POST", f.srv.URL+"/ui/api/login", `{"token":"`+approverToken+`"}`,
		map[string]string{"Content-Type": "application/json", "Origin": "http://evil.example"})
	if st != http.StatusForbidden {
		t.Fatalf("cross-origin login: %d %s", st, body)
	}
}

// TestSecurityConsoleForgedDecision replays a cross-site request forgery:
// a logged-in approver's browser sends a decision that another page made
// (its cookie goes along), without the CSRF token, with a wrong one, or
// from another origin. Each is refused and reaches no decision.
func TestSecurityConsoleForgedDecision(t *testing.T) {
	f := newFixture(t, false)
	b := f.browser(t)
	csrf := f.loginWithCode(t, b)
	forged := []struct {
		name   string
		header map[string]string
	}{
		{"no-token", map[string]string{"Content-Type": "application/json"}},
		{"form", map[string]string{"Content-Type": "application/x-www-form-urlencoded"}},
		{"wrong-token", map[string]string{"Content-Type": "application/json", CSRFHeader: csrf[:len(csrf)-1] + "x"}},
		{"cross-origin", map[string]string{"Content-Type": "application/json", CSRFHeader: csrf, "Origin": "http://evil.example"}},
		{"cross-site", map[string]string{"Content-Type": "application/json", CSRFHeader: csrf, "Sec-Fetch-Site": "cross-site"}},
		{"same-site-other-port", map[string]string{"Content-Type": "application/json", CSRFHeader: csrf, "Sec-Fetch-Site": "same-site"}},
	}
	for _, tc := range forged {
		t.Run(tc.name, func(t *testing.T) {
			st, body, _ := do(t, b, "POST", f.srv.URL+"/ui/api/approvals/abc", `{"decision":"allow-always"}`, tc.header)
			if st != http.StatusForbidden {
				t.Fatalf("forged decision answered %d %s", st, body)
			}
		})
	}
	if got := f.decided.got(); len(got) != 0 {
		t.Fatalf("a forged request reached the decision route: %q", got)
	}
	// The page's own request passes.
	st, body, _ := do(t, b, "POST", f.srv.URL+"/ui/api/approvals/abc", `{"decision":"deny"}`,
		map[string]string{"Content-Type": "application/json", CSRFHeader: csrf, "Origin": f.srv.URL, "Sec-Fetch-Site": "same-origin"})
	if st != http.StatusOK || len(f.decided.got()) != 1 {
		t.Fatalf("the page's decision: %d %s, decided %q", st, body, f.decided.got())
	}
}

func TestBadDecisionBody(t *testing.T) {
	f := newFixture(t, false)
	b := f.browser(t)
	csrf := f.loginWithCode(t, b)
	for _, body := range []string{``, `{`, `{"decision":"allow-once","extra":1}`, `[1]`} {
		st, out, _ := do(t, b, "POST", f.srv.URL+"/ui/api/approvals/abc", body,
			map[string]string{"Content-Type": "application/json", CSRFHeader: csrf})
		if st != http.StatusBadRequest || !strings.Contains(out, "bad request body") {
			t.Errorf("body %q: %d %s", body, st, out)
		}
	}
	if got := f.decided.got(); len(got) != 0 {
		t.Fatalf("bad bodies reached the decision route: %q", got)
	}
}

func TestSessionsForwardReadOnlyActions(t *testing.T) {
	f := newFixture(t, false)
	b := f.browser(t)
	f.loginWithCode(t, b)
	if st, body, _ := do(t, b, "GET", f.srv.URL+"/ui/api/sessions?agentId=a1&sessionKey=k", "", nil); st != http.StatusOK {
		t.Fatalf("list: %d %s", st, body)
	}
	if st, body, _ := do(t, b, "GET", f.srv.URL+"/ui/api/sessions/s%2F1/log?agentId=a1&limit=5", "", nil); st != http.StatusOK {
		t.Fatalf("log: %d %s", st, body)
	}
	if st, body, _ := do(t, b, "GET", f.srv.URL+"/ui/api/sessions/s1/log?limit=x", "", nil); st != http.StatusBadRequest {
		t.Fatalf("log with a bad limit: %d %s", st, body)
	}
	want := []string{
		`POST /v1/tools/process {"action":"list","agentId":"a1","sessionKey":"k"}`,
		`POST /v1/tools/process {"action":"log","sessionId":"s/1","limit":5,"agentId":"a1"}`,
	}
	if got := f.api.got(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("API calls:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestPageHeaders(t *testing.T) {
	f := newFixture(t, false)
	for _, path := range []string{"/ui/", "/ui/static/app.js", "/ui/static/style.css"} {
		st, body, res := do(t, f.browser(t), "GET", f.srv.URL+path, "", nil)
		if st != http.StatusOK || body == "" {
			t.Fatalf("%s: %d", path, st)
		}
		if csp := res.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") {
			t.Errorf("%s: CSP %q", path, csp)
		}
		if res.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s: no nosniff", path)
		}
	}
	if st, _, _ := do(t, f.browser(t), "GET", f.srv.URL+"/ui/static/nothing.js", "", nil); st != http.StatusNotFound {
		t.Errorf("missing asset: %d", st)
	}
	if st, _, _ := do(t, f.browser(t), "GET", f.srv.URL+"/ui/static/..%2fconsole.go", "", nil); st != http.StatusNotFound {
		t.Errorf("traversal: %d", st)
	}
}

// TestVetRefusesLoginAndDecision: a vet (the daemon's approver check on
// its socket) that refuses keeps the one-time code valid, and makes a
// session cookie worthless: no view, no decision.
func TestVetRefusesLoginAndDecision(t *testing.T) {
	f := newFixture(t, false)
	refuse := true
	var mu sync.Mutex
	vetted := httptest.NewServer(f.c.WithVet(func(*http.Request) error {
		mu.Lock()
		defer mu.Unlock()
		if refuse {
			return errors.New("not allowed to decide approvals: test")
		}
		return nil
	}))
	defer vetted.Close()
	code, err := f.c.MintLoginCode()
	if err != nil {
		t.Fatal(err)
	}
	b := f.browser(t)
	if st, body, _ := do(t, b, "GET", vetted.URL+LoginPath+"?code="+code, "", nil); st != http.StatusForbidden || !strings.Contains(body, "not allowed") {
		t.Fatalf("vetted login: %d %s", st, body)
	}
	mu.Lock()
	refuse = false
	mu.Unlock()
	if st, body, _ := do(t, b, "GET", vetted.URL+LoginPath+"?code="+code, "", nil); st != http.StatusSeeOther {
		t.Fatalf("the code after a refused use: %d %s", st, body)
	}
	st, body, _ := do(t, b, "GET", vetted.URL+"/ui/api/me", "", nil)
	var me struct{ CSRF string }
	if err := json.Unmarshal([]byte(body), &me); st != http.StatusOK || err != nil {
		t.Fatalf("me: %d %s", st, body)
	}
	mu.Lock()
	refuse = true
	mu.Unlock()
	if st, _, _ := do(t, b, "GET", vetted.URL+"/ui/api/approvals", "", nil); st != http.StatusForbidden {
		t.Fatalf("viewing with the session under a refusing vet: %d", st)
	}
	if got := f.api.got(); len(got) != 0 {
		t.Fatalf("a refused client reached the daemon's routes: %q", got)
	}
	st, body, _ = do(t, b, "POST", vetted.URL+"/ui/api/approvals/abc", `{"decision":"allow-once"}`,
		map[string]string{"Content-Type": "application/json", CSRFHeader: me.CSRF})
	if st != http.StatusForbidden || len(f.decided.got()) != 0 {
		t.Fatalf("vetted decision: %d %s, decided %q", st, body, f.decided.got())
	}
}

// TestSecurityLoginStaysOnItsListener: a login code (minted for `sandboxctl
// ui`, the socket) does not log in on the TCP listener, where no process is
// vetted; and a session cookie works only on the listener that made it (a
// browser sends a cookie of 127.0.0.1 to each of its ports).
func TestSecurityLoginStaysOnItsListener(t *testing.T) {
	f := newFixture(t, false)
	code, err := f.c.MintLoginCode()
	if err != nil {
		t.Fatal(err)
	}
	tcp := &http.Client{Transport: f.tcp.Client().Transport, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	if st, body, _ := do(t, tcp, "GET", f.tcp.URL+LoginPath+"?code="+code, "", nil); st != http.StatusForbidden || !strings.Contains(body, "sandboxctl ui") {
		t.Fatalf("a login code on the TCP listener: %d %s", st, body)
	}
	// The code still works where it belongs.
	st, body, res := do(t, f.browser(t), "GET", f.srv.URL+LoginPath+"?code="+code, "", nil)
	if st != http.StatusSeeOther {
		t.Fatalf("redeem on the socket: %d %s", st, body)
	}
	ck := sessionCookie(t, res)
	cookie := map[string]string{"Cookie": CookieName + "=" + ck.Value}
	if st, body, _ := do(t, tcp, "GET", f.tcp.URL+"/ui/api/me", "", cookie); st != http.StatusUnauthorized {
		t.Fatalf("the socket's session on the TCP listener: %d %s", st, body)
	}
	if st, body, _ := do(t, tcp, "POST", f.tcp.URL+"/ui/api/approvals/x", `{"decision":"allow-once"}`, cookie); st != http.StatusUnauthorized {
		t.Fatalf("the socket's session deciding on the TCP listener: %d %s", st, body)
	}
	if got := f.decided.got(); len(got) != 0 {
		t.Fatalf("decided: %v", got)
	}
	// And a TCP session does not work on the socket.
	st, body, res = do(t, tcp, "POST", f.tcp.URL+"/ui/api/login", `{"token":"`+approverToken+`"}`, map[string]string{"Content-Type": "application/json"})
	if st != http.StatusOK {
		t.Fatalf("token login on TCP: %d %s", st, body)
	}
	ck = sessionCookie(t, res)
	if st, body, _ := do(t, f.browser(t), "GET", f.srv.URL+"/ui/api/me", "", map[string]string{"Cookie": CookieName + "=" + ck.Value}); st != http.StatusUnauthorized {
		t.Fatalf("the TCP session on the socket: %d %s", st, body)
	}
}

// TestAuditForwardsTheNewest: the audit page asks the daemon for the
// newest records with the page's filters only, and needs a session.
func TestAuditForwardsTheNewest(t *testing.T) {
	var got []string
	var mu sync.Mutex
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Method+" "+r.URL.Path+"?"+r.URL.RawQuery)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-ndjson")
		_, _ = io.WriteString(w, `{"seq":1,"kind":"exec.request"}`+"\n")
	})
	c := New(Options{API: api, Decide: &recorder{}, ToolToken: toolToken, ApproverToken: approverToken})
	srv := httptest.NewServer(c.WithVet(func(*http.Request) error { return nil }))
	t.Cleanup(srv.Close)
	f := &fixture{c: c, srv: srv}
	b := f.browser(t)
	if st, _, _ := do(t, b, "GET", srv.URL+"/ui/api/audit", "", nil); st != http.StatusUnauthorized {
		t.Fatalf("without a session: %d", st)
	}
	f.loginWithCode(t, b)
	st, body, _ := do(t, b, "GET", srv.URL+"/ui/api/audit?agent=a1&kind=exec.request&last=99999&since=1h", "", nil)
	if st != http.StatusOK || !strings.Contains(body, `"seq":1`) {
		t.Fatalf("audit: %d %s", st, body)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 || got[0] != "GET /v1/audit?agent=a1&kind=exec.request&last=200" {
		t.Fatalf("API calls: %q", got)
	}
}

// TestSandboxChangesForOperatorsOnly: pause, resume, remove, snapshot,
// rollback, fork and a snapshot's removal reach the
// daemon's lifecycle routes for a session that may decide only, with its
// CSRF token; a view-only session, a forged request or an unknown action
// reaches nothing.
func TestSandboxChangesForOperatorsOnly(t *testing.T) {
	f := newFixture(t, false)
	login := func(token string) *http.Client {
		c := f.browser(t)
		if st, body, _ := do(t, c, "POST", f.srv.URL+"/ui/api/login", `{"token":"`+token+`"}`,
			map[string]string{"Content-Type": "application/json"}); st != http.StatusOK {
			t.Fatalf("login: %d %s", st, body)
		}
		return c
	}
	change := func(c *http.Client, csrf, method, path string, body ...string) (int, string) {
		st, out, _ := do(t, c, method, f.srv.URL+"/ui/api/sandboxes/"+path, strings.Join(body, ""), map[string]string{CSRFHeader: csrf, "Content-Type": "application/json"})
		return st, out
	}
	viewer := login(toolToken)
	for _, req := range [][3]string{{"POST", "sbx-a/pause"}, {"POST", "sbx-a/resume"}, {"DELETE", "sbx-a"},
		{"POST", "sbx-a/snapshot", `{}`}, {"POST", "sbx-a/rollback", `{"snapshot":"s1"}`}, {"POST", "sbx-a/fork", `{"agentId":"b"}`},
		{"DELETE", "sbx-a/snapshots/s1"}} {
		if st, body := change(viewer, f.csrf(t, viewer), req[0], req[1], req[2]); st != http.StatusForbidden || !strings.Contains(body, "change sandboxes") {
			t.Errorf("view-only %s %s: %d %s", req[0], req[1], st, body)
		}
	}
	op := login(approverToken)
	if st, _ := change(op, "forged", "POST", "sbx-a/pause"); st != http.StatusForbidden {
		t.Errorf("pause without the CSRF token: %d", st)
	}
	if st, _ := change(op, f.csrf(t, op), "POST", "sbx-a/frobnicate"); st != http.StatusNotFound {
		t.Errorf("unknown action: %d", st)
	}
	if st, _ := change(op, f.csrf(t, op), "POST", "sbx-a/fork", `{"agentId":"b","privileged":true}`); st != http.StatusBadRequest {
		t.Errorf("fork with an unknown field: %d", st)
	}
	if got := f.api.got(); len(got) != 0 {
		t.Fatalf("refused changes reached the daemon: %q", got)
	}
	csrf := f.csrf(t, op)
	for _, req := range [][3]string{{"POST", "sbx-a/pause"}, {"POST", "sbx-a/resume"}, {"DELETE", "sbx-a"},
		{"POST", "sbx-a/snapshot", `{"name":"s1"}`}, {"POST", "sbx-a/rollback", `{"snapshot":"s1"}`},
		{"POST", "sbx-a/fork", `{"agentId":"b","snapshot":"s1"}`}, {"DELETE", "sbx-a/snapshots/s1"}} {
		if st, body := change(op, csrf, req[0], req[1], req[2]); st != http.StatusOK {
			t.Errorf("operator %s %s: %d %s", req[0], req[1], st, body)
		}
	}
	want := []string{"POST /v1/sandboxes/sbx-a/pause ", "POST /v1/sandboxes/sbx-a/resume ", "DELETE /v1/sandboxes/sbx-a ",
		`POST /v1/sandboxes/sbx-a/snapshots {"name":"s1"}`, `POST /v1/sandboxes/sbx-a/rollback {"snapshot":"s1"}`,
		`POST /v1/sandboxes/sbx-a/fork {"agentId":"b","snapshot":"s1"}`, "DELETE /v1/sandboxes/sbx-a/snapshots/s1 "}
	if got := f.api.got(); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("forwarded: %q, want %q", got, want)
	}
}
