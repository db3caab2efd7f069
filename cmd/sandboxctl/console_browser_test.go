package main_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sandboxctl/sandboxctl/internal/dockertest"
	"github.com/sandboxctl/sandboxctl/sandbox/sandboxconfig"
)

// browser starts headless Chromium (Debian's chromium, installed by
// scripts/toolchain.sh) for the test; it fails, not skips, without one.
func browser(t *testing.T) context.Context {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("the console's browser tests need chromium (scripts/toolchain.sh installs it): %v", err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.DisableGPU,
		chromedp.WindowSize(1280, 1000), chromedp.UserDataDir(t.TempDir()))
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox) // Chromium refuses to run as root with its sandbox
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	t.Cleanup(func() { cancel(); cancelAlloc() })
	// The first Run starts the browser; it lives as long as ctx.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// within runs actions with a deadline (the browser outlives it).
func within(t *testing.T, ctx context.Context, d time.Duration, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	tctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	if err := chromedp.Do(tctx, steps...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// screenshot writes the page to name.png in the test's artifact directory:
// under -outputdir when go test runs with -artifacts (make test does),
// otherwise a temporary directory removed after the test.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	tctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	png, err := chromedp.Run(tctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	path := filepath.Join(t.ArtifactDir(), name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
}

func evalJS[T any](t *testing.T, ctx context.Context, expr string, opts ...chromedp.EvaluateOption) T {
	t.Helper()
	tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	v, err := chromedp.Run(tctx, chromedp.Evaluate[T](expr, opts...))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// waitJS waits until the JavaScript predicate holds in the page.
func waitJS(t *testing.T, ctx context.Context, d time.Duration, what, predicate string) {
	t.Helper()
	tctx, cancel := context.WithTimeout(ctx, d+5*time.Second)
	defer cancel()
	if _, err := chromedp.Run(tctx, chromedp.Poll[bool](predicate, chromedp.WithPollingInterval(100*time.Millisecond), chromedp.WithPollingTimeout(d))); err != nil {
		body, _ := chromedp.Run(ctx, chromedp.Evaluate[string]("document.body.innerText"))
		t.Fatalf("%s: %v\npage:\n%s", what, err, body)
	}
}

// waitLocation waits until the page's address is want (across the
// navigations on the way, during which the page cannot answer).
func waitLocation(t *testing.T, ctx context.Context, d time.Duration, want string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		tctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		loc, err := chromedp.Run(tctx, chromedp.Location())
		cancel()
		if err == nil && loc == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the page did not reach %s within %v (at %q, %v)", want, d, loc, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// approvalView is the approval id as `approvals list --json` shows it.
func approvalView(t *testing.T, e *env, id string) (v struct {
	ID, Shell string
	Argv      []string
}) {
	t.Helper()
	r := e.run(t, "--json", "approvals", "list")
	var list []struct {
		ID, Shell string
		Argv      []string
	}
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil {
		t.Fatalf("approvals list: %+v", r)
	}
	for _, a := range list {
		if a.ID == id {
			v.ID, v.Shell, v.Argv = a.ID, a.Shell, a.Argv
			return v
		}
	}
	t.Fatalf("approval %s not listed: %s", id, r.stdout)
	return v
}

var loginLink = regexp.MustCompile(`console: (http://127\.0\.0\.1:\d+/ui/login\?code=[A-Za-z0-9_-]+)`)

// startUI runs `sandboxctl ui --no-open` for e, as a person would from a
// shell, and returns the one-time login link it prints.
func startUI(t *testing.T, e *env) string {
	t.Helper()
	cmd := exec.Command(binary, "--state", e.state, "--config", e.config, "ui", "--no-open")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	})
	links := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if m := loginLink.FindStringSubmatch(sc.Text()); m != nil {
				links <- m[1]
			}
		}
		close(links)
	}()
	select {
	case link, ok := <-links:
		if !ok {
			_ = cmd.Wait()
			t.Fatalf("sandboxctl ui printed no login link; stderr: %s", stderr.String())
		}
		return link
	case <-time.After(30 * time.Second):
		t.Fatalf("sandboxctl ui printed no login link within 30s; stderr: %s", stderr.String())
	}
	return ""
}

// hostile is what an agent's command prints (and is): markup that runs
// script if the page ever treats it as HTML.
const hostile = `<img src=x onerror="window.__pwned='img'"><script>window.__pwned='script'</script>`

// TestConsoleBrowser drives the console in headless Chromium: log in with
// the link of `sandboxctl ui`, see a pending approval appear with all it
// binds, approve it, and watch the approved command's output arrive. The
// command and its output are hostile markup, which the page shows as text
// and never runs. A screenshot of each page goes to the artifact
// directory.
func TestConsoleBrowser(t *testing.T) {
	e := guardEnv(t, "")
	// echo is allowlisted: a session that needs no approval and lives in a
	// scope no approval or sandbox names.
	allow := `{"version":1,"defaults":{},"agents":{"*":{"allowlist":[{"id":"echo","pattern":"/usr/bin/echo"}]}}}`
	if err := os.WriteFile(filepath.Join(e.state, "approvals.json"), []byte(allow), 0o600); err != nil {
		t.Fatal(err)
	}
	// Start the daemon (the first request does) before the console.
	if r := e.run(t, "approvals", "list"); r.code != 0 {
		t.Fatalf("approvals list: %+v", r)
	}
	link := startUI(t, e)
	base := link[:strings.Index(link, "/ui/")]
	ctx := browser(t)

	within(t, ctx, 30*time.Second, "log in with the one-time link",
		chromedp.Navigate(link), chromedp.WaitVisible(chromedp.CSS("#nav")))
	if loc := evalJS[string](t, ctx, "location.href"); loc != base+"/ui/" {
		t.Fatalf("after login the browser is at %s, want %s/ui/ (the link must not stay in the address bar)", loc, base)
	}
	if who := evalJS[string](t, ctx, "document.getElementById('who').textContent"); who != "approver" {
		t.Fatalf("logged in as %q, want approver", who)
	}
	waitJS(t, ctx, 10*time.Second, "empty approvals list", `document.querySelector('#approvals-list').textContent.includes('No pending approvals')`)
	screenshot(t, ctx, "approvals-empty")

	// An agent asks to run a command that is itself hostile markup.
	dir := t.TempDir()
	command := "printf '%s\\n' " + quote(t, hostile) + "; echo console-output-arrived"
	d := execJSON(t, e, "--agent", "agent-7", "--workdir", dir, "--env", "CONSOLE_NOTE="+hostile, "--env", "CONSOLE_BIDI=gpj.\u202eexe", "--", command)
	if d.Status != "approval-pending" {
		t.Fatalf("want approval-pending, got %v", d)
	}
	id := d.ApprovalID
	sid := d.SessionID
	card := `.approval[data-id="` + id + `"]`
	waitJS(t, ctx, 15*time.Second, "the pending approval appears", `!!document.querySelector('`+card+`')`)
	shown := evalJS[string](t, ctx, `document.querySelector('`+card+`').textContent`)
	view := approvalView(t, e, id)
	// A bidi override is shown, not obeyed: the value cannot pass for another.
	want := []string{command, dir, "agent-7", "gateway", view.Shell, "CONSOLE_NOTE=" + hostile, `CONSOLE_BIDI=gpj.\u{202e}exe`}
	want = append(want, view.Argv...)
	for _, want := range want {
		if !strings.Contains(shown, want) {
			t.Errorf("the approval card does not show %q:\n%s", want, shown)
		}
	}
	screenshot(t, ctx, "approvals-pending")

	within(t, ctx, 10*time.Second, "click allow once",
		chromedp.Click(chromedp.CSS(card+` button[data-decision="allow-once"]`)))
	waitJS(t, ctx, 15*time.Second, "the approval leaves the pending list", `!document.querySelector('`+card+`')`)
	if st := approvalStatus(t, e, id); !strings.HasPrefix(st, "allow-once") {
		t.Fatalf("after the click the approval is %q", st)
	}

	within(t, ctx, 10*time.Second, "open the sessions page", chromedp.Navigate(base+"/ui/#sessions"), chromedp.WaitVisible(chromedp.CSS("#sessions")))
	out := `.session[data-session="` + sid + `"] pre.output`
	waitJS(t, ctx, 30*time.Second, "the approved command's output arrives",
		`(() => { const e = document.querySelector('`+out+`'); return !!e && e.textContent.includes('console-output-arrived'); })()`)
	text := evalJS[string](t, ctx, `document.querySelector('`+out+`').textContent`)
	if !strings.Contains(text, hostile) {
		t.Errorf("the output is not shown as the text it is: %q", text)
	}
	screenshot(t, ctx, "sessions")

	// A background session of another agent and session key, which no
	// approval or sandbox names, is listed too.
	u := execJSON(t, e, "--agent", "agent-unnamed", "--session", "k9", "--background", "--", "echo console-unnamed-scope")
	if u.Status != "running" {
		t.Fatalf("the allowlisted background echo: %v", u)
	}
	other := `.session[data-session="` + u.SessionID + `"] pre.output`
	waitJS(t, ctx, 30*time.Second, "a session of a scope nothing else names appears",
		`(() => { const e = document.querySelector('`+other+`'); return !!e && e.textContent.includes('console-unnamed-scope'); })()`)
	if got := evalJS[string](t, ctx, `document.querySelector('#sessions-list').textContent`); !strings.Contains(got, "Agent agent-unnamed") {
		t.Errorf("the session is not shown under its agent: %q", got)
	}

	// Nothing of the hostile markup became markup or ran, on either page.
	within(t, ctx, 10*time.Second, "back to approvals", chromedp.Navigate(base+"/ui/#approvals"), chromedp.WaitVisible(chromedp.CSS("#approvals")))
	waitJS(t, ctx, 10*time.Second, "recent approvals list the hostile command", `document.querySelector('#approvals-recent').textContent.includes('onerror')`)
	for _, page := range []string{"#approvals", "#sessions"} {
		within(t, ctx, 10*time.Second, "open "+page, chromedp.Navigate(base+"/ui/"+page))
		waitJS(t, ctx, 10*time.Second, page+" rendered", `document.body.textContent.includes('onerror')`)
		if got := evalJS[string](t, ctx, `String(window.__pwned)`); got != "undefined" {
			t.Fatalf("%s: the hostile markup ran: window.__pwned = %s", page, got)
		}
		if n := evalJS[int](t, ctx, `document.querySelectorAll('img, main script, [onerror]').length`); n != 0 {
			t.Fatalf("%s: the hostile text became %d element(s)", page, n)
		}
	}

	within(t, ctx, 10*time.Second, "open the sandboxes page", chromedp.Navigate(base+"/ui/#sandboxes"), chromedp.WaitVisible(chromedp.CSS("#sandboxes")))
	waitJS(t, ctx, 10*time.Second, "sandboxes table filled", `document.querySelector('#sandboxes-table tbody').children.length > 0`)
	screenshot(t, ctx, "sandboxes")
	within(t, ctx, 10*time.Second, "open the nodes page", chromedp.Navigate(base+"/ui/#nodes"), chromedp.WaitVisible(chromedp.CSS("#nodes")))
	waitJS(t, ctx, 10*time.Second, "nodes table filled", `document.querySelector('#nodes-table tbody').children.length > 0`)
	screenshot(t, ctx, "nodes")
	// The audit page lists the records of what the test did, as text.
	within(t, ctx, 10*time.Second, "open the audit page", chromedp.Navigate(base+"/ui/#audit"), chromedp.WaitVisible(chromedp.CSS("#audit")))
	waitJS(t, ctx, 10*time.Second, "audit table filled", `document.querySelector('#audit-table tbody').textContent.includes('exec.request')`)
	screenshot(t, ctx, "audit")

	// The link worked once: a second use is refused.
	within(t, ctx, 10*time.Second, "reuse the link", chromedp.Navigate(link))
	if body := evalJS[string](t, ctx, "document.body.innerText"); !strings.Contains(body, "invalid, used or expired") {
		t.Fatalf("a used login link: %s", body)
	}
}

// TestSecurityConsoleCrossSiteForm replays a cross-site request forgery in
// the browser: while an approver is logged into the console, a page on
// another port of 127.0.0.1 (same site, so SameSite lets the cookie go
// along) posts a decision with a form and with fetch. Both are refused and
// the request stays pending.
func TestSecurityConsoleCrossSiteForm(t *testing.T) {
	e := guardEnv(t, "")
	dir := t.TempDir()
	marker := filepath.Join(dir, "FORGED")
	d := execJSON(t, e, "--workdir", dir, "--", "touch", marker)
	if d.Status != "approval-pending" {
		t.Fatalf("want approval-pending, got %v", d)
	}
	id := d.ApprovalID
	link := startUI(t, e)
	base := link[:strings.Index(link, "/ui/")]
	ctx := browser(t)
	within(t, ctx, 30*time.Second, "log in", chromedp.Navigate(link), chromedp.WaitVisible(chromedp.CSS("#nav")))

	target := base + "/ui/api/approvals/" + id
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, `<!doctype html><body>
<form id="f" method="POST" action="%s" enctype="text/plain"><input name='{"decision":"allow-always","x":"' value='"}'></form>
<script>
fetch(%q, {method: "POST", mode: "no-cors", credentials: "include", headers: {"Content-Type": "text/plain"}, body: '{"decision":"allow-always"}'})
  .finally(() => { document.title = "fetch-done"; document.getElementById("f").submit(); });
</script></body>`, target, target)
	}))
	defer evil.Close()
	within(t, ctx, 20*time.Second, "visit the attacker's page", chromedp.Navigate(evil.URL))
	// The form's answer replaces the attacker's page: wait for it.
	waitLocation(t, ctx, 15*time.Second, target)
	body := evalJS[string](t, ctx, "document.body.innerText")
	if !strings.Contains(body, "CSRF") {
		t.Errorf("the forged form's answer does not say it was refused as CSRF: %s", body)
	}
	if st := approvalStatus(t, e, id); st != "pending" {
		t.Fatalf("a forged request decided the approval: %q (answer: %s)", st, body)
	}
	if r := e.run(t, "approvals", "resolve", id, "deny"); r.code != 0 {
		t.Fatalf("human resolve: %+v", r)
	}
	if exists(marker) {
		t.Fatal("the forged approval ran the command")
	}
}

// TestConsoleBrowserTCP logs into the console of `serve --listen` with a
// token typed into its login form: the tool token shows the approvals
// without the means to decide them, the approver token decides.
func TestConsoleBrowserTCP(t *testing.T) {
	e := guardEnv(t, "")
	const tool, approver = "console-tool-token-0123456789", "console-approver-token-0123456789"
	base := serveTCP(t, e, "SANDBOXCTL_TOKEN="+tool, "SANDBOXCTL_APPROVER_TOKEN="+approver)
	d := execJSON(t, e, "--", "touch", filepath.Join(t.TempDir(), "denied"))
	if d.Status != "approval-pending" {
		t.Fatalf("want approval-pending, got %v", d)
	}
	id := d.ApprovalID
	card := `.approval[data-id="` + id + `"]`
	ctx := browser(t)

	login := func(token string) {
		t.Helper()
		within(t, ctx, 20*time.Second, "log in with a token",
			chromedp.Navigate(base+"/ui/"), chromedp.WaitVisible(chromedp.CSS("#login-form")),
			chromedp.SendKeys(chromedp.CSS("#token"), token), chromedp.Click(chromedp.CSS("#login-form button")),
			chromedp.WaitVisible(chromedp.CSS("#nav")))
	}
	within(t, ctx, 20*time.Second, "open the console", chromedp.Navigate(base+"/ui/"), chromedp.WaitVisible(chromedp.CSS("#login-form")))
	screenshot(t, ctx, "login")
	within(t, ctx, 20*time.Second, "a wrong token",
		chromedp.SendKeys(chromedp.CSS("#token"), "wrong-token-0123456789"), chromedp.Click(chromedp.CSS("#login-form button")))
	waitJS(t, ctx, 10*time.Second, "the wrong token is refused", `document.getElementById('status').textContent.includes('wrong token')`)

	login(tool)
	waitJS(t, ctx, 10*time.Second, "the approval appears", `!!document.querySelector('`+card+`')`)
	if who := evalJS[string](t, ctx, "document.getElementById('who').textContent"); who != "view only" {
		t.Fatalf("the tool token logged in as %q, want view only", who)
	}
	if n := evalJS[int](t, ctx, `document.querySelectorAll('`+card+` button:disabled').length`); n != 3 {
		t.Fatalf("a view-only session has %d of 3 decision buttons disabled", n)
	}
	screenshot(t, ctx, "approvals-view-only")
	// Even a decision the page would not offer is refused.
	answer := evalJS[string](t, ctx, `(async () => {
		const me = await (await fetch('/ui/api/me')).json();
		const r = await fetch('/ui/api/approvals/`+id+`', {method: 'POST', headers: {'Content-Type': 'application/json', 'X-Sandboxctl-Csrf': me.csrf}, body: '{"decision":"allow-once"}'});
		return r.status + ' ' + await r.text();
	})()`, chromedp.EvalAwaitPromise)
	if !strings.HasPrefix(answer, "403 ") {
		t.Fatalf("a view-only session's decision: %s", answer)
	}
	if st := approvalStatus(t, e, id); st != "pending" {
		t.Fatalf("a view-only session decided: %q", st)
	}
	within(t, ctx, 10*time.Second, "log out", chromedp.Click(chromedp.CSS("#logout")), chromedp.WaitVisible(chromedp.CSS("#login-form")))

	login(approver)
	if who := evalJS[string](t, ctx, "document.getElementById('who').textContent"); who != "approver" {
		t.Fatalf("the approver token logged in as %q", who)
	}
	waitJS(t, ctx, 10*time.Second, "the approval appears", `!!document.querySelector('`+card+` button[data-decision="deny"]:enabled')`)
	within(t, ctx, 10*time.Second, "deny", chromedp.Click(chromedp.CSS(card+` button[data-decision="deny"]`)))
	waitJS(t, ctx, 10*time.Second, "the approval leaves the pending list", `!document.querySelector('`+card+`')`)
	if st := approvalStatus(t, e, id); !strings.HasPrefix(st, "deny") {
		t.Fatalf("after deny the approval is %q", st)
	}

	// A node connects; the nodes page shows it.
	token, err := os.ReadFile(filepath.Join(e.state, "node-token"))
	if err != nil {
		t.Fatal(err)
	}
	ndir := t.TempDir()
	ncfg := filepath.Join(ndir, "node.yaml")
	if err := os.WriteFile(ncfg, []byte("exec:\n  security: allowlist\n  ask: on-miss\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	node := exec.Command(binary, "--state", ndir, "--config", ncfg, "node", "run", "--gateway", "ws://"+strings.TrimPrefix(base, "http://"),
		"--token", strings.TrimSpace(string(token)), "--name", "console-node", "--workdir", ndir)
	node.Stderr = os.Stderr
	if err := node.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = node.Process.Signal(os.Interrupt); _ = node.Wait() })
	within(t, ctx, 10*time.Second, "open the nodes page", chromedp.Navigate(base+"/ui/#nodes"), chromedp.WaitVisible(chromedp.CSS("#nodes")))
	waitJS(t, ctx, 20*time.Second, "the node appears", `document.querySelector('#nodes-table').textContent.includes('console-node')`)
	screenshot(t, ctx, "nodes")
}

// TestConsoleBrowserSandbox shows an agent's sandbox in the console: its
// row with its template, labels and expiry, on Explain its limits, the
// hardening read back from the Engine and its resource use; and an
// operator pauses, resumes, snapshots, rolls back (the detail's snapshot
// list), removes the snapshot and removes the sandbox with the buttons.
func TestConsoleBrowserSandbox(t *testing.T) {
	dockertest.Require(t, sandboxconfig.DefaultConfig().Docker.Image)
	e := newEnv(t)
	cfg := fmt.Sprintf("sandbox:\n  workspaceRoot: %s\n", filepath.Join(e.state, "ws"))
	if err := os.WriteFile(e.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	agent := fmt.Sprintf("console-%d", time.Now().UnixNano())
	t.Cleanup(func() { e.run(t, "sandbox", "rm", "--agent", agent) })
	if r := e.run(t, "sandbox", "create", "--agent", agent, "--label", "team=red", "--ttl", "1h"); r.code != 0 {
		t.Fatalf("sandbox create: %+v", r)
	}
	if r := e.run(t, "exec", "--agent", agent, "--", "echo in-sandbox"); r.code != 0 {
		t.Fatalf("sandbox exec: %+v", r)
	}
	r := e.run(t, "--json", "sandbox", "ls")
	var list []struct{ Name, AgentID string }
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil {
		t.Fatalf("sandbox ls: %+v", r)
	}
	name := ""
	for _, s := range list {
		if s.AgentID == agent {
			name = s.Name
		}
	}
	if name == "" {
		t.Fatalf("no sandbox of %s: %s", agent, r.stdout)
	}
	link := startUI(t, e)
	base := link[:strings.Index(link, "/ui/")]
	ctx := browser(t)
	row := `#sandboxes-table tr[data-name="` + name + `"]`
	within(t, ctx, 30*time.Second, "log in and open the sandboxes page",
		chromedp.Navigate(link), chromedp.WaitVisible(chromedp.CSS("#nav")),
		chromedp.Navigate(base+"/ui/#sandboxes"), chromedp.WaitVisible(chromedp.CSS(row)),
		chromedp.Click(chromedp.CSS(row+" button")))
	detail := `[data-sandbox="` + name + `"]`
	waitJS(t, ctx, 30*time.Second, "the sandbox's hardening and resource use",
		`(() => { const e = document.querySelector('`+detail+`'); return !!e && e.textContent.includes('memoryBytes') && e.textContent.includes('capDrop'); })()`)
	shown := evalJS[string](t, ctx, `document.querySelector('`+detail+`').textContent`)
	for _, want := range []string{"readOnlyRootfs", "pidsLimit", "cpuPercent", "pids"} {
		if !strings.Contains(shown, want) {
			t.Errorf("the sandbox detail does not show %s:\n%s", want, shown)
		}
	}
	screenshot(t, ctx, "sandbox-explain")

	cells := `document.querySelector('` + row + `').textContent`
	if shown := evalJS[string](t, ctx, cells); !strings.Contains(shown, "team=red") || !strings.Contains(shown, "default") || !strings.Contains(shown, "running") {
		t.Fatalf("the sandbox's row does not show its template, labels and state: %s", shown)
	}
	within(t, ctx, 10*time.Second, "pause", chromedp.Click(chromedp.CSS(row+` button[data-action="pause"]`)))
	waitJS(t, ctx, 30*time.Second, "the sandbox paused", `!!document.querySelector('`+row+` button[data-action="resume"]')`)
	if st := e.run(t, "sandbox", "ls", "--filter", "agent="+agent, "--format", "{{.State}}"); strings.TrimSpace(st.stdout) != "paused" {
		t.Fatalf("after Pause: %+v", st)
	}
	within(t, ctx, 10*time.Second, "resume", chromedp.Click(chromedp.CSS(row+` button[data-action="resume"]`)))
	waitJS(t, ctx, 30*time.Second, "the sandbox running again", `!!document.querySelector('`+row+` button[data-action="pause"]')`)
	evalJS[bool](t, ctx, `(window.confirm = () => true, true)`)

	// Snapshot from the row; the open detail lists it, with rollback and
	// removal.
	snapRow := detail + ` tr[data-snapshot]`
	within(t, ctx, 10*time.Second, "snapshot", chromedp.Click(chromedp.CSS(row+` button[data-action="snapshot"]`)))
	waitJS(t, ctx, 60*time.Second, "the snapshot listed", `!!document.querySelector('`+snapRow+` button[data-action="rollback"]')`)
	snapName := evalJS[string](t, ctx, `document.querySelector('`+snapRow+`').dataset.snapshot`)
	if st := e.run(t, "sandbox", "snapshots", agent); st.code != 0 || !strings.Contains(st.stdout, snapName) {
		t.Fatalf("the console's snapshot %q is not listed: %+v", snapName, st)
	}
	if r := e.run(t, "exec", "--agent", agent, "--", "echo later > /workspace/later.txt"); r.code != 0 {
		t.Fatalf("exec: %+v", r)
	}
	idOf := func() string {
		return strings.TrimSpace(e.run(t, "sandbox", "ls", "--filter", "agent="+agent, "--format", "{{.ID}} {{.State}}").stdout)
	}
	before := idOf()
	within(t, ctx, 10*time.Second, "roll back", chromedp.Click(chromedp.CSS(snapRow+` button[data-action="rollback"]`)))
	// The rollback makes the container anew: done once another one runs
	// (the row's Pause button is there before, during and after).
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if now := idOf(); now != before && strings.HasSuffix(now, " running") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the console's Roll back made no new container in 60 s (before: %q, now: %q)", before, idOf())
		}
	}
	waitJS(t, ctx, 60*time.Second, "the sandbox rolled back and running", `!!document.querySelector('`+row+` button[data-action="pause"]')`)
	if r := e.run(t, "exec", "--agent", agent, "--", "test ! -e /workspace/later.txt"); r.code != 0 {
		t.Fatalf("a file written after the snapshot is still there after Roll back: %+v", r)
	}
	within(t, ctx, 10*time.Second, "remove the snapshot", chromedp.Click(chromedp.CSS(snapRow+` button[data-action="remove-snapshot"]`)))
	waitJS(t, ctx, 30*time.Second, "no snapshot listed", `(() => { const e = document.querySelector('`+detail+`'); return !!e && !e.querySelector('tr[data-snapshot]') && e.textContent.includes('No snapshots.'); })()`)

	within(t, ctx, 10*time.Second, "remove", chromedp.Click(chromedp.CSS(row+` button[data-action="remove"]`)))
	waitJS(t, ctx, 30*time.Second, "the sandbox's row gone", `!document.querySelector('`+row+`')`)
	if st := e.run(t, "sandbox", "ls", "--filter", "agent="+agent, "--format", "{{.ID}}"); strings.TrimSpace(st.stdout) != "" {
		t.Fatalf("after Remove: %+v", st)
	}
}
