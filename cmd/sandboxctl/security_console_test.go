package main_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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
	marker := filepath.Join(dir, "APPROVED-THROUGH-CONSOLE")
	d := execJSON(t, e, "--workdir", dir, "--", "touch", marker)
	if d["status"] != "approval-pending" {
		t.Fatalf("want approval-pending, got %v", d)
	}
	id, _ := d["approvalId"].(string)
	sid, _ := d["sessionId"].(string)
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
			if a["status"] != "approval-pending" {
				t.Fatalf("want approval-pending for the script, got %v", a)
			}
			if r := e.run(t, "approvals", "resolve", a["approvalId"].(string), "allow-once"); r.code != 0 {
				t.Fatalf("human resolve: %+v", r)
			}
			out, _ := pollUntilDone(t, e, a["sessionId"].(string))
			if st := approvalStatus(t, e, id); st != "pending" {
				t.Fatalf("the script decided the approval through the console: status %q; it printed:\n%s", st, out)
			}
			if !strings.Contains(out, "not allowed to decide approvals") {
				t.Errorf("the login code was not refused with the reason:\n%s", out)
			}
			if !strings.Contains(out, "not logged in") {
				t.Errorf("the decision was not refused for want of a session:\n%s", out)
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
