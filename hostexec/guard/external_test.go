package guard

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sandboxctl/sandboxctl/internal/shellword"
	"github.com/sandboxctl/sandboxctl/vocab"
)

func TestExternalPaths(t *testing.T) {
	h := newHost(t)
	outside := filepath.Join(filepath.Dir(h.ws), "outside", "deep")
	if err := os.MkdirAll(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(h.ws, "link")); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		cmd  string
		want []string
	}{
		{"cat a.txt sub/b.txt ./c", nil},
		{"cat /etc/passwd", []string{"/etc/passwd"}},
		{"cat ../x", []string{h.ws + "/../x"}},
		{"rm -rf link/file", []string{h.ws + "/link/file"}},
		{"cat link/../secret", []string{h.ws + "/link/../secret"}},
		{"cd link && touch x", []string{h.ws + "/link", h.ws + "/link/x"}},
		{"cd /etc && cat passwd", []string{"/etc", "/etc/passwd"}},
		{"cp -t/etc a", []string{"/etc"}},
		{"cp --target-directory=/etc a", []string{"/etc"}},
		{"mv -- -x /tmp/y", []string{"/tmp/y"}},
		{"chmod 600 /etc/shadow", []string{"/etc/shadow"}},
		{"chown root:root sub/x", nil},
		{"mkdir -m 755 -p out/dir", nil},
		{"touch -r /etc/passwd x", []string{"/etc/passwd"}},
		{"ls /etc", nil}, // not an external-directory command
		{"bash -c 'cat /etc/hosts'", []string{"/etc/hosts"}}, // through a wrapper
		{"timeout 5 rm /x", []string{"/x"}},
		{"cat -", nil},
	}
	for _, c := range cases {
		a := Analyze(c.cmd, h.env)
		if !a.OK {
			t.Errorf("%q: %s", c.cmd, a.Reason)
			continue
		}
		got := ExternalPaths(a, h.ws)
		want := slices.Clone(c.want)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("%q: external %v, want %v", c.cmd, got, want)
		}
	}
	// Through Evaluate: needs approval, names the path; ask off denies.
	a := Analyze("cat link/../secret", h.env)
	p := Policy{Security: vocab.SecurityAllowlist, Ask: vocab.AskOnMiss, Allowlist: []Entry{{ID: "c", Pattern: "/usr/bin/cat"}}, Workspace: h.ws}
	if v := p.Evaluate(a); v.Decision != vocab.DecisionApprovalPending || !strings.Contains(v.Reason, "link/../secret") || v.Satisfied {
		t.Errorf("verdict %+v", v)
	}
	p.Ask = vocab.AskOff
	if v := p.Evaluate(a); v.Decision != vocab.DecisionDeny {
		t.Errorf("ask off: %+v", v)
	}
	// no workspace (node host / sandbox): no external check
	p.Workspace = ""
	if v := p.Evaluate(a); v.Decision != vocab.DecisionRun {
		t.Errorf("no workspace: %+v", v)
	}
}

func TestExplain(t *testing.T) {
	h := newHost(t)
	a := Analyze(`env -i timeout 5 bash -lc 'git status 2>&1 | head -n 1'`, h.env)
	ex := a.Explain()
	for _, want := range []string{"analysis: ok", "segment 1: git status 2>&1", "runs: /usr/bin/git", "via env: env -i", "via timeout: timeout 5", "via shell: bash -lc", "redirect: 2>&1", "env: cleared", "will execute: /usr/bin/env -i 'EDITOR=/bin/false' 'GIT_EDITOR=/bin/false' 'LESSSECURE=1' 'PAGER=/bin/cat' 'VISUAL=/bin/false' /bin/timeout 5"} {
		if !strings.Contains(ex, want) {
			t.Errorf("explain lacks %q:\n%s", want, ex)
		}
	}
	b := Analyze(`ls && ./sh -c id && echo $HOME`, h.env)
	ex = b.Explain()
	for _, want := range []string{"analysis: REFUSED (wrapper-spoof)", "segment 2: ./sh -c id", "REFUSED wrapper-spoof", "REFUSED parameter-expansion"} {
		if !strings.Contains(ex, want) {
			t.Errorf("explain lacks %q:\n%s", want, ex)
		}
	}
	if strings.Contains(ex, "will execute") {
		t.Error("refused analysis shows a command to execute")
	}
}

func TestAnalyzeEnvHooks(t *testing.T) {
	h := newHost(t)
	env := h.env
	calls := 0
	env.Lookup = func(name string) (string, error) {
		calls++
		if name == "mytool" {
			return "/usr/bin/true", nil
		}
		if name == "rel" {
			return "bin/rel", nil
		}
		return "/usr/bin/" + name, nil
	}
	env.EnvCheck = func(m map[string]string) error {
		if _, ok := m["FOO"]; ok {
			return ErrEnvBlocked
		}
		return nil
	}
	a := Analyze("mytool x", env)
	if !a.OK || a.Segments[0].Path != "/usr/bin/true" || calls != 1 {
		t.Errorf("lookup hook not used: %+v", a)
	}
	if a := Analyze("rel", env); a.OK || a.Rule != RuleNotFound {
		t.Errorf("relative lookup result accepted: %s", a.Reason)
	}
	if a := Analyze("env FOO=1 ls", env); a.OK || a.Rule != RuleEnvBlocked {
		t.Errorf("EnvCheck hook not used: %s", a.Reason)
	}
	if a := Analyze("env LD_PRELOAD=1 ls", env); !a.OK {
		t.Errorf("custom EnvCheck replaces the default: %s", a.Reason)
	}
	// env -i changes PATH: the hook (which models the configured PATH) is
	// not used for what env runs (only for env itself).
	calls = 0
	if a := Analyze("env -i ls", env); !a.OK || calls != 1 || a.Segments[0].Path != "/bin/ls" {
		t.Errorf("env -i: calls %d, %+v", calls, a.Segments)
	}
	// depth limit
	cmd := "ls"
	for i := 0; i < 5; i++ {
		q, err := shellword.Quote(cmd)
		if err != nil {
			t.Fatal(err)
		}
		cmd = "sh -c " + q
	}
	if a := Analyze(cmd, h.env); a.OK || !hasRule(a, RuleDepth) {
		t.Errorf("5 nested shells: %s", a.Reason)
	}
	env2 := h.env
	env2.MaxDepth = 6
	if a := Analyze(cmd, env2); !a.OK {
		t.Errorf("MaxDepth 6: %s", a.Reason)
	}
}

// TestRebuiltWordsArePOSIX: the rebuilt line runs under whatever POSIX shell
// the host has, so newlines and tabs inside quoted words survive as literal
// characters (never bash's $'...'), and a word with no POSIX form (an
// invisible no-break space) is refused rather than rebuilt.
func TestRebuiltWordsArePOSIX(t *testing.T) {
	h := newHost(t)
	a := Analyze("git commit -m 'line1\nline2\tx'", h.env)
	if !a.OK || !strings.Contains(a.Rebuilt, "line1\"\n\"line2\"\t\"x") || strings.Contains(a.Rebuilt, "$'") {
		t.Errorf("newline/tab word: ok=%v %s rebuilt %q", a.OK, a.Reason, a.Rebuilt)
	}
	a = Analyze("git commit -m 'a\u00a0b'", h.env)
	if a.OK || !hasRule(a, RuleControlChar) {
		t.Errorf("no-break space accepted: ok=%v rule %s %s rebuilt %q", a.OK, a.Rule, a.Reason, a.Rebuilt)
	}
}
