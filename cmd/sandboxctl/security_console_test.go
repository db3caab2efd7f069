package main_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSecurityCommandCannotApproveThroughConsole replays issue 19's rule
// that no process sandboxctl started may decide through the web console:
// a command logs itself into the console over the daemon's socket (a
// one-time login code, the session cookie, the page's CSRF token — the
// whole protocol a browser follows through `sandboxctl ui`) and approves a
// pending request; another runs `sandboxctl ui` itself. The daemon refuses
// to mint the login code for either, so the request stays pending and its
// command never runs.
func TestSecurityCommandCannotApproveThroughConsole(t *testing.T) {
	e := attackEnv(t)
	dir := t.TempDir()
	id, sid, marker := pendingTouch(t, e, dir, "APPROVED-THROUGH-CONSOLE")
	sock := filepath.Join(e.state, "sandboxctl.sock")

	// The attacker's script: every step a browser makes, with curl.
	script := filepath.Join(dir, "attack.sh")
	jar := filepath.Join(dir, "jar")
	src := `set -u
sock=` + quote(t, sock) + `
jar=` + quote(t, jar) + `
c() { curl -sS --unix-socket "$sock" -b "$jar" -c "$jar" "$@"; echo; }
path=$(c -X POST -H 'Content-Type: application/json' -d '{}' http://sandboxctl/v1/ui/login)
echo "mint: $path"
code=$(printf %s "$path" | sed -n 's/.*code=\([A-Za-z0-9_-]*\).*/\1/p')
echo "redeem: $(c -o /dev/null -w '%{http_code}' "http://sandboxctl/ui/login?code=$code")"
me=$(c http://sandboxctl/ui/api/me)
echo "me: $me"
csrf=$(printf %s "$me" | sed -n 's/.*"csrf":"\([^"]*\)".*/\1/p')
echo "decide: $(c -X POST -H "X-Sandboxctl-Csrf: $csrf" -H 'Content-Type: application/json' -d '{"decision":"allow-always"}' http://sandboxctl/ui/api/approvals/` + id + `)"
`
	if err := os.WriteFile(script, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, command string }{
		{"curl-as-a-browser", "sh " + quote(t, script)},
		{"curl-as-a-browser-clean-env", "env -i /bin/sh " + quote(t, script)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_ = os.Remove(jar)
			// A human approves the script once (it looks harmless); an
			// approved command still may not decide other requests.
			a := execJSON(t, e, "--", tc.command)
			if a.Status != "approval-pending" {
				t.Fatalf("want approval-pending for the script, got %v", a)
			}
			if r := e.run(t, "approvals", "resolve", a.ApprovalID, "allow-once"); r.code != 0 {
				t.Fatalf("human resolve: %+v", r)
			}
			out, _ := pollUntilDone(t, e, a.SessionID)
			if st := approvalStatus(t, e, id); st != "pending" {
				t.Fatalf("the script decided the approval through the console: status %q; it printed:\n%s", st, out)
			}
			if !strings.Contains(out, "not allowed to decide approvals") {
				t.Errorf("the login code was not refused with the reason:\n%s", out)
			}
			if !strings.Contains(out, `decide: {"error":"not allowed to decide approvals`) {
				t.Errorf("the decision was not refused with the reason:\n%s", out)
			}
		})
	}
	t.Run("sandboxctl-ui", func(t *testing.T) {
		cmd := quote(t, binary) + " --state " + quote(t, e.state) + " --config " + quote(t, e.config) + " ui --no-open"
		r := e.run(t, "--json", "exec", "--", cmd)
		if !strings.Contains(r.stdout, "not allowed to decide approvals") || strings.Contains(r.stdout, "/ui/login?code=") {
			t.Fatalf("sandboxctl ui run by a command got a login link or no refusal: %+v", r)
		}
	})
	if st := approvalStatus(t, e, id); st != "pending" {
		t.Fatalf("approval decided: %q", st)
	}
	if r := e.run(t, "approvals", "resolve", id, "deny"); r.code != 0 {
		t.Fatalf("human resolve from the test's shell: %+v", r)
	}
	if out, last := pollUntilDone(t, e, sid); !strings.Contains(last, "denied") {
		t.Fatalf("session after deny: %q", out)
	}
	if exists(marker) {
		t.Fatal("the command ran although only the attacker approved it")
	}
}

// TestUIRefusesNonLoopbackListen: the console's local port carries a
// logged-in session; it is never opened to other machines.
func TestUIRefusesNonLoopbackListen(t *testing.T) {
	e := newEnv(t)
	for _, addr := range []string{"0.0.0.0:0", ":0", "192.0.2.1:0", "nonsense"} {
		r := e.run(t, "ui", "--no-open", "--listen", addr)
		if r.code != 2 || !strings.Contains(r.stderr, "--listen") {
			t.Errorf("ui --listen %s: %+v", addr, r)
		}
	}
	if _, err := os.Stat(filepath.Join(e.state, "sandboxctl.sock")); err == nil {
		t.Errorf("a refused ui started a daemon")
	}
}

// runApproved runs command as an agent would (allowlisted, or with a
// human's allow-once: it looks harmless), and returns its output once it
// ended.
func runApproved(t *testing.T, e *env, command string) string {
	t.Helper()
	a := execJSON(t, e, "--", command)
	if a.Status == "completed" {
		if a.Aggregated == nil {
			return ""
		}
		return *a.Aggregated
	}
	if a.Status != "approval-pending" {
		t.Fatalf("want completed or approval-pending for %q, got %v", command, a)
	}
	if r := e.run(t, "approvals", "resolve", a.ApprovalID, "allow-once"); r.code != 0 {
		t.Fatalf("human resolve: %+v", r)
	}
	out, _ := pollUntilDone(t, e, a.SessionID)
	return out
}

// TestSecurityStolenConsoleLinkThroughUI replays a command that got hold
// of what logs a person into the console (the login link, which xdg-open
// and the browser carry in their command lines; a session cookie and its
// CSRF token) and uses it through the person's own `sandboxctl ui`. The
// forwarder names the process behind each connection and the daemon holds
// it to the approval API's rule: the command's login and its decision are
// refused (so is its view), while the person's own use of the same link
// and cookie works.
func TestSecurityStolenConsoleLinkThroughUI(t *testing.T) {
	e := attackEnv(t)
	dir := t.TempDir()
	id, _, marker := pendingTouch(t, e, dir, "APPROVED-WITH-STOLEN-COOKIE")
	link := startUI(t, e)
	base := link[:strings.Index(link, "/ui/")]

	// The command redeems the stolen link first.
	out := runApproved(t, e, "curl -sS -o /dev/null -w 'redeem=%{http_code}' "+quote(t, link))
	if !strings.Contains(out, "redeem=403") {
		t.Fatalf("a command redeemed the person's login link through sandboxctl ui: %s", out)
	}
	// The link still logs the person in: the refusal did not use it up.
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	person := &http.Client{Jar: jar, Timeout: 20 * time.Second}
	res, err := person.Get(link)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK || res.Request.URL.Path != "/ui/" {
		t.Fatalf("the person's login after the refused one: %d at %s", res.StatusCode, res.Request.URL)
	}
	var me struct{ CSRF string }
	res, err = person.Get(base + "/ui/api/me")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.NewDecoder(res.Body).Decode(&me); err != nil || me.CSRF == "" {
		t.Fatalf("me: %v", err)
	}
	res.Body.Close()
	u, err := url.Parse(base + "/ui/")
	if err != nil {
		t.Fatal(err)
	}
	cookies := jar.Cookies(u)
	if len(cookies) != 1 {
		t.Fatalf("cookies: %v", cookies)
	}

	// With the person's cookie the command sees nothing...
	view := "curl -sS -w ' status=%{http_code}' -b " + quote(t, cookies[0].Name+"="+cookies[0].Value) + " " + quote(t, base+"/ui/api/approvals")
	if out := runApproved(t, e, view); !strings.Contains(out, "status=403") || strings.Contains(out, id) {
		t.Fatalf("a command viewed the approvals with a stolen console cookie: %s", out)
	}
	// ...and decides nothing, with the CSRF token too.
	decide := "curl -sS -w ' status=%{http_code}' -X POST -H 'Content-Type: application/json'" +
		" -H " + quote(t, "X-Sandboxctl-Csrf: "+me.CSRF) + " -b " + quote(t, cookies[0].Name+"="+cookies[0].Value) +
		" -d '{\"decision\":\"allow-always\"}' " + quote(t, base+"/ui/api/approvals/"+id)
	out = runApproved(t, e, decide)
	if st := approvalStatus(t, e, id); st != "pending" {
		t.Fatalf("a command decided with a stolen console cookie through sandboxctl ui: %q; it got %s", st, out)
	}
	if !strings.Contains(out, "status=403") || !strings.Contains(out, "not allowed to decide approvals") {
		t.Errorf("the stolen cookie's decision was not refused with the reason: %s", out)
	}

	// The person decides with the same cookie: deny.
	req, err := http.NewRequest("POST", base+"/ui/api/approvals/"+id, strings.NewReader(`{"decision":"deny"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Sandboxctl-Csrf", me.CSRF)
	res, err = person.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("the person's decision: %d %s", res.StatusCode, body)
	}
	if st := approvalStatus(t, e, id); !strings.HasPrefix(st, "deny") {
		t.Fatalf("after the person's deny: %q", st)
	}
	if exists(marker) {
		t.Fatal("the command ran")
	}
}

// TestSecurityUIForwarderReachesOnlyTheConsole replays a command that
// skips the console and talks to the daemon's own API through the
// person's `sandboxctl ui`: the forwarder's port is the daemon's socket
// with the person's credentials (the socket peer is the forwarder, which
// passes the approver check). The command decides a pending approval on
// the approval API, mints itself a login code, and runs a command through
// the tool API — none of which the console's own vet sees. Each is refused
// and the approval stays pending.
func TestSecurityUIForwarderReachesOnlyTheConsole(t *testing.T) {
	e := attackEnv(t)
	dir := t.TempDir()
	id, _, marker := pendingTouch(t, e, dir, "APPROVED-THROUGH-FORWARDER")
	link := startUI(t, e)
	base := link[:strings.Index(link, "/ui/")]
	curl := "curl -sS -w ' status=%{http_code}' -X POST -H 'Content-Type: application/json' "
	for _, path := range []string{"/v1/approvals/" + id, "/ui/../v1/approvals/" + id, "/ui/%2e%2e/v1/approvals/" + id} {
		out := runApproved(t, e, curl+"--path-as-is -d '{\"decision\":\"allow-always\"}' "+quote(t, base+path))
		if st := approvalStatus(t, e, id); st != "pending" {
			t.Fatalf("a command decided an approval through sandboxctl ui's port (%s): %q; it got %s", path, st, out)
		}
		if strings.Contains(out, "status=200") {
			t.Errorf("%s through the forwarder answered 200: %s", path, out)
		}
	}
	out := runApproved(t, e, curl+"-d '{}' "+quote(t, base+"/v1/ui/login"))
	if strings.Contains(out, "code=") {
		t.Errorf("a command minted a login code through sandboxctl ui's port: %s", out)
	}
	exe := filepath.Join(dir, "EXEC-THROUGH-FORWARDER")
	out = runApproved(t, e, curl+"-d "+quote(t, `{"command":"touch `+exe+`","host":"gateway","security":"full","ask":"off"}`)+" "+quote(t, base+"/v1/tools/exec"))
	if exists(exe) || strings.Contains(out, "status=200") {
		t.Errorf("a command used the tool API through sandboxctl ui's port: %s", out)
	}
	denyAndCheckNotRun(t, e, id, marker)
}

// TestSecurityLoginLinkOnlyThroughUI replays a command that got the
// person's one-time login link (xdg-open and the browser carry it in their
// command lines) and redeems it on the daemon's TCP listener (`serve
// --listen`) instead of through `sandboxctl ui`: there no process is
// vetted, and the code logs in with decisions — without the approver
// token, on a daemon that has none. The code is refused there, so the
// command can neither log in nor decide, and the link still works for the
// person through sandboxctl ui.
func TestSecurityLoginLinkOnlyThroughUI(t *testing.T) {
	e := attackEnv(t)
	const tool = "console-tool-token-0123456789"
	base := serveTCP(t, e, "SANDBOXCTL_TOKEN="+tool)
	dir := t.TempDir()
	id, _, marker := pendingTouch(t, e, dir, "APPROVED-WITH-LINK-ON-TCP")
	link := startUI(t, e)
	stolen := base + link[strings.Index(link, "/ui/"):]
	jar := filepath.Join(dir, "jar")
	script := filepath.Join(dir, "attack.sh")
	src := `set -u
c() { curl -sS -b ` + quote(t, jar) + ` -c ` + quote(t, jar) + ` "$@"; echo; }
echo "redeem: $(c -o /dev/null -w '%{http_code}' ` + quote(t, stolen) + `)"
me=$(c ` + quote(t, base+"/ui/api/me") + `)
echo "me: $me"
csrf=$(printf %s "$me" | sed -n 's/.*"csrf":"\([^"]*\)".*/\1/p')
echo "decide: $(c -X POST -H "X-Sandboxctl-Csrf: $csrf" -H 'Content-Type: application/json' -d '{"decision":"allow-always"}' ` + quote(t, base+"/ui/api/approvals/"+id) + `)"
`
	if err := os.WriteFile(script, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	out := runApproved(t, e, "sh "+quote(t, script))
	if st := approvalStatus(t, e, id); st != "pending" {
		t.Fatalf("a command decided with the person's login link on the TCP listener: %q; it printed:\n%s", st, out)
	}
	if !strings.Contains(out, "redeem: 403") {
		t.Errorf("the login link was not refused on TCP:\n%s", out)
	}
	// The person's link still works through sandboxctl ui.
	jarP, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := (&http.Client{Jar: jarP, Timeout: 20 * time.Second}).Get(link)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK || res.Request.URL.Path != "/ui/" {
		t.Fatalf("the person's login after the refused one: %d at %s", res.StatusCode, res.Request.URL)
	}
	// The person's session cookie (a browser sends it to every port of
	// 127.0.0.1) does not work on the TCP listener either.
	u, err := url.Parse(link)
	if err != nil {
		t.Fatal(err)
	}
	cookies := jarP.Cookies(u)
	if len(cookies) != 1 {
		t.Fatalf("cookies: %v", cookies)
	}
	view := "curl -sS -w ' status=%{http_code}' -b " + quote(t, cookies[0].Name+"="+cookies[0].Value) + " " + quote(t, base+"/ui/api/me")
	if out := runApproved(t, e, view); !strings.Contains(out, "status=401") || strings.Contains(out, "csrf") {
		t.Fatalf("the person's console cookie worked on the TCP listener: %s", out)
	}
	denyAndCheckNotRun(t, e, id, marker)
}

// TestSecurityCommandOfAnOlderSupervisorCannotMintLogin replays an upgrade:
// the daemon crashed (or was killed) after its executable was replaced on
// disk, and the new daemon re-adopted the host supervisor still running the
// old one. A gateway command that double-forks out of its tagged shell and
// clears its environment then descends only from that supervisor — whose
// executable is no longer the same file as the daemon's — and asked for a
// console login code. It must be refused like any command.
func TestSecurityCommandOfAnOlderSupervisorCannotMintLogin(t *testing.T) {
	e := attackEnv(t)
	work := t.TempDir()
	daemonExe := filepath.Join(work, "sandboxctld")
	copyExe := func(dst string) {
		t.Helper()
		data, err := os.ReadFile(daemonBinary)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, data, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	copyExe(daemonExe)
	t.Setenv("SANDBOXCTLD", daemonExe)
	// The first gateway command starts the daemon and its host supervisor.
	if out := runApproved(t, e, "true"); strings.Contains(out, "error") {
		t.Fatalf("first command: %s", out)
	}
	raw, err := os.ReadFile(filepath.Join(e.state, "daemon.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil {
		t.Fatal(err)
	}
	// The upgrade: a new file at the same path; then the old daemon dies.
	copyExe(daemonExe + ".new")
	if err := os.Rename(daemonExe+".new", daemonExe); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for syscall.Kill(pid, 0) == nil {
		if time.Now().After(deadline) {
			t.Fatalf("daemon %d survived SIGKILL", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
	out := filepath.Join(work, "login.out")
	sock := filepath.Join(e.state, "sandboxctl.sock")
	// The detached copy drops SANDBOXCTL_RUN only once `env -i` runs; until
	// then the end of the command's session would sweep it. So the command
	// waits until the copy has opened its output file (which its shell does
	// after env -i), as a command that wants to outlive its session would.
	attack := "setsid -f env -i /bin/sh -c " + quote(t, "/usr/bin/curl -sS --unix-socket "+quote(t, sock)+
		" -X POST -H 'Content-Type: application/json' -d '{}' http://sandboxctl/v1/ui/login > "+quote(t, out+".tmp")+" 2>&1; mv "+quote(t, out+".tmp")+" "+quote(t, out)) +
		"; i=0; while [ ! -e " + quote(t, out+".tmp") + " ] && [ ! -e " + quote(t, out) + " ] && [ $i -lt 200 ]; do sleep 0.1; i=$((i+1)); done"
	runApproved(t, e, attack)
	for !exists(out) {
		if time.Now().After(deadline.Add(20 * time.Second)) {
			t.Fatal("the detached attacker wrote nothing")
		}
		time.Sleep(50 * time.Millisecond)
	}
	got, _ := os.ReadFile(out)
	if strings.Contains(string(got), "code=") {
		t.Fatalf("a command under the re-adopted older supervisor minted a console login code: %s", got)
	}
	if !strings.Contains(string(got), "not allowed to decide approvals") {
		t.Fatalf("not refused with the reason: %s", got)
	}
}

// pendingTouch asks (on the gateway, in dir) to run `touch dir/name`,
// which needs approval, and returns the approval, its session and the
// marker the command would create.
func pendingTouch(t *testing.T, e *env, dir, name string) (id, sid, marker string) {
	t.Helper()
	marker = filepath.Join(dir, name)
	d := execJSON(t, e, "--workdir", dir, "--", "touch", marker)
	if d.Status != "approval-pending" {
		t.Fatalf("want approval-pending, got %v", d)
	}
	id = d.ApprovalID
	sid = d.SessionID
	return id, sid, marker
}

// denyAndCheckNotRun has the person deny the approval id, and fails if the
// command it held ran anyway (its marker exists).
func denyAndCheckNotRun(t *testing.T, e *env, id, marker string) {
	t.Helper()
	if r := e.run(t, "approvals", "resolve", id, "deny"); r.code != 0 {
		t.Fatalf("human resolve: %+v", r)
	}
	if exists(marker) {
		t.Fatal("the command ran although only the attacker approved it")
	}
}
