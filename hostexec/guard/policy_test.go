package guard

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandboxctl/sandboxctl/envguard"
	"github.com/sandboxctl/sandboxctl/vocab"
)

func TestRequiresApproval(t *testing.T) {
	reqCases := []struct {
		ask     vocab.Ask
		sec     vocab.Security
		ok, sat bool
		want    bool
	}{
		{vocab.AskAlways, vocab.SecurityFull, true, true, true},
		{vocab.AskOnMiss, vocab.SecurityAllowlist, true, true, false},
		{vocab.AskOnMiss, vocab.SecurityAllowlist, false, true, true},
		{vocab.AskOnMiss, vocab.SecurityAllowlist, true, false, true},
		{vocab.AskOnMiss, vocab.SecurityFull, false, false, false},
		{vocab.AskOff, vocab.SecurityAllowlist, false, false, false},
	}
	for _, c := range reqCases {
		if got := RequiresApproval(c.ask, c.sec, c.ok, c.sat); got != c.want {
			t.Errorf("RequiresApproval(%+v) = %v", c, got)
		}
	}
}

func TestPatterns(t *testing.T) {
	match := []struct {
		pat, path string
		want      bool
	}{
		{"/usr/bin/git", "/usr/bin/git", true},
		{"/usr/bin/git", "/usr/bin/GIT", false},
		{"/usr/bin/*", "/usr/bin/git", true},
		{"/usr/bin/*", "/usr/bin/sub/git", false},
		{"/usr/**", "/usr/bin/sub/git", true},
		{"/usr/bin/g?t", "/usr/bin/git", true},
		{"/usr/bin/g?t", "/usr/bin/g/t", false},
		{"/opt/**/bin/tool", "/opt/a/b/bin/tool", true},
		{"git", "/usr/bin/git", true},
		{"git", "/usr/bin/gitk", false},
		{"py*", "/usr/bin/python3", true},
		{"Git", "/usr/bin/git", false},
		{"/usr/bin/jq", "/tmp/evil/jq", false},
	}
	for _, m := range match {
		got, err := MatchPattern(m.pat, m.path, m.path)
		if err != nil || got != m.want {
			t.Errorf("MatchPattern(%q, %q) = %v, %v", m.pat, m.path, got, err)
		}
	}
	for _, bad := range []string{"", " git", "git ", "/usr/bin/[gh]it", "/usr/bin/{a,b}", "bin/git", "./git", "/usr/../bin/git", "/usr//bin", "/usr/bin/***", "*", "**", "/**", "/*", "?", "~/bin/x", "/usr/bin/a\\b", "/usr/bin/$x", "/usr/bin/\x01", "**git"} {
		if err := ValidatePattern(bad); !errors.Is(err, ErrBadPattern) {
			t.Errorf("ValidatePattern(%q) = %v, want ErrBadPattern", bad, err)
		}
		if _, err := MatchPattern(bad, "/usr/bin/git", "/usr/bin/git"); !errors.Is(err, ErrBadPattern) {
			t.Errorf("MatchPattern(%q) = %v, want ErrBadPattern", bad, err)
		}
	}
}

func TestSafeBinProfiles(t *testing.T) {
	profs := DefaultSafeBinProfiles()
	cases := []struct {
		argv string
		ok   bool
		why  string
	}{
		{"head -n 5", true, ""},
		{"head -n5", true, ""},
		{"head -5", true, ""},
		{"head --lines=5", true, ""},
		{"head --lines 5", true, ""},
		{"head -c 10 -q", true, ""},
		{"head file", false, "positional"},
		{"head -n 1 -- file", false, "positional"},
		{"head --lin=5", false, "abbreviated"},
		{"head --bogus", false, "unknown option"},
		{"head -x", false, "unknown flag -x"},
		{"head -n", false, "needs a value"},
		{"tail -n 3", true, ""},
		{"tail -f", false, "denied flag -f"},
		{"tail --follow", false, "denied flag --follow"},
		{"tail --fol", false, "denied flag --follow"},
		{"tail --pid=1", false, "denied flag --pid"},
		{"cut -d: -f1", true, ""},
		{"cut -f 1 --output-delimiter=,", true, ""},
		{"cut -f1 /etc/passwd", false, "positional"},
		{"uniq -c", true, ""},
		{"uniq --all-repeated=separate", true, ""},
		{"uniq in out", false, "positional"},
		{"tr a-z A-Z", true, ""},
		{"tr -d '*'", true, ""},
		{"tr a b c", false, "positional"},
		{"wc -l", true, ""},
		{"wc --files0-from=list", false, "denied flag --files0-from"},
		{"wc --files0=list", false, "denied flag --files0-from"},
		{"wc /etc/shadow", false, "positional"},
		{"sort -rn", true, ""},
		{"sort -k 2 -t ,", true, ""},
		{"sort --compress-prog=sh", false, "denied flag --compress-program (given as --compress-prog)"},
		{"sort --compress-program=sh", false, "denied flag --compress-program"},
		{"sort -o out", false, "denied flag -o"},
		{"sort -ro out", false, "denied flag -o"},
		{"sort --output=out", false, "denied flag --output"},
		{"sort --out=out", false, "denied flag --output"},
		{"sort -T /tmp", false, "denied flag -T"},
		{"sort --rev", false, "abbreviated"},
		{"sort --ran", false, "ambiguous"},
		{"grep foo", true, ""},
		{"grep -i -e foo", true, ""},
		{"grep -e foo file", false, "positional"},
		{"grep foo file", false, "positional"},
		{"grep -r foo", false, "denied flag -r"},
		{"grep -R foo", false, "denied flag -R"},
		{"grep -ir foo", false, "denied flag -r"},
		{"grep --recursive foo", false, "denied flag --recursive"},
		{"grep --recur foo", false, "denied flag --recursive"},
		{"grep -f patterns", false, "denied flag -f"},
		{"grep --file=patterns", false, "denied flag --file"},
		{"jq .", false, "never a safe bin"},
		{"jq -n env", false, "never a safe bin"},
	}
	for _, c := range cases {
		argv := strings.Fields(strings.ReplaceAll(c.argv, "'", ""))
		err := CheckSafeBinArgs(profs[argv[0]], argv)
		if c.ok {
			if err != nil {
				t.Errorf("%s: %v, want ok", c.argv, err)
			}
			continue
		}
		if !errors.Is(err, ErrNotSafe) || !strings.Contains(err.Error(), c.why) {
			t.Errorf("%s: err %v, want ErrNotSafe containing %q", c.argv, err, c.why)
		}
	}
}

// TestEvaluate is the policy decision table over real analyses.
func TestEvaluate(t *testing.T) {
	h := newHost(t)
	allow := []Entry{{ID: "e1", Pattern: "/usr/bin/git"}, {ID: "e2", Pattern: "ls"}, {ID: "e3", Pattern: "/usr/bin/echo"}}
	cases := []struct {
		name   string
		p      Policy
		cmd    string
		want   vocab.Decision
		reason string
	}{
		{"deny refuses all", Policy{Security: vocab.SecurityDeny, Ask: vocab.AskOff}, "ls", vocab.DecisionDeny, "security is deny"},
		{"deny beats ask always", Policy{Security: vocab.SecurityDeny, Ask: vocab.AskAlways}, "ls", vocab.DecisionDeny, "security is deny"},
		{"full runs", Policy{Security: vocab.SecurityFull, Ask: vocab.AskOff}, "rm -rf x", vocab.DecisionRun, "security is full"},
		{"full runs unanalysable", Policy{Security: vocab.SecurityFull, Ask: vocab.AskOff}, "echo $(id)", vocab.DecisionRun, "security is full"},
		{"full ask always", Policy{Security: vocab.SecurityFull, Ask: vocab.AskAlways}, "ls", vocab.DecisionApprovalPending, "ask is always"},
		{"full on-miss runs", Policy{Security: vocab.SecurityFull, Ask: vocab.AskOnMiss}, "rm x", vocab.DecisionRun, "security is full"},
		{"allowlisted path", Policy{Security: vocab.SecurityAllowlist, Ask: vocab.AskOff, Allowlist: allow}, "git status", vocab.DecisionRun, "allowlist satisfied"},
		{"allowlisted bare name", Policy{Security: vocab.SecurityAllowlist, Ask: vocab.AskOff, Allowlist: allow}, "ls -la", vocab.DecisionRun, "allowlist satisfied"},
		{"pipeline all allowlisted", Policy{Security: vocab.SecurityAllowlist, Ask: vocab.AskOnMiss, Allowlist: allow}, "git log | head -n 3 | wc -l", vocab.DecisionRun, "allowlist satisfied"},
		{"one segment missing, ask off", Policy{Security: vocab.SecurityAllowlist, Ask: vocab.AskOff, Allowlist: allow}, "git log | node", vocab.DecisionDeny, "/usr/bin/node is not allowlisted"},
		{"one segment missing, on-miss", Policy{Security: vocab.SecurityAllowlist, Ask: vocab.AskOnMiss, Allowlist: allow}, "git log | node", vocab.DecisionApprovalPending, "/usr/bin/node is not allowlisted"},
		{"analysis fail, on-miss", Policy{Security: vocab.SecurityAllowlist, Ask: vocab.AskOnMiss, Allowlist: allow}, "git log $X", vocab.DecisionApprovalPending, "analysis refused"},
		{"analysis fail, ask off", Policy{Security: vocab.SecurityAllowlist, Ask: vocab.AskOff, Allowlist: allow}, "git log $X", vocab.DecisionDeny, "parameter-expansion"},
		{"allowlisted but ask always", Policy{Security: vocab.SecurityAllowlist, Ask: vocab.AskAlways, Allowlist: allow}, "git status", vocab.DecisionApprovalPending, "ask is always"},
		{"safe bins", Policy{Security: vocab.SecurityAllowlist, Ask: vocab.AskOff}, "head -n 1 | wc -l", vocab.DecisionRun, "allowlist satisfied"},
		{"safe bin with file", Policy{Security: vocab.SecurityAllowlist, Ask: vocab.AskOff}, "head -n 1 /etc/shadow", vocab.DecisionDeny, "positional"},
		{"safe bins disabled", Policy{Security: vocab.SecurityAllowlist, Ask: vocab.AskOff, SafeBins: []string{}}, "head -n 1", vocab.DecisionDeny, "not a safe bin"},
		{"grep not default safe", Policy{Security: vocab.SecurityAllowlist, Ask: vocab.AskOff}, "grep foo", vocab.DecisionDeny, "not a safe bin"},
		{"grep listed safe", Policy{Security: vocab.SecurityAllowlist, Ask: vocab.AskOff, SafeBins: []string{"grep"}}, "grep foo", vocab.DecisionRun, "allowlist satisfied"},
		{"wrapped allowlisted", Policy{Security: vocab.SecurityAllowlist, Ask: vocab.AskOff, Allowlist: allow}, "timeout 5 nice -n 1 git status", vocab.DecisionRun, "allowlist satisfied"},
		{"shell inner allowlisted", Policy{Security: vocab.SecurityAllowlist, Ask: vocab.AskOff, Allowlist: allow}, "bash -lc 'git status && ls'", vocab.DecisionRun, "allowlist satisfied"},
		{"allowlisting env does not cover inner", Policy{Security: vocab.SecurityAllowlist, Ask: vocab.AskOff, Allowlist: []Entry{{ID: "x", Pattern: "/usr/bin/env"}}}, "env -S 'rm -rf x'", vocab.DecisionDeny, "/usr/bin/rm is not allowlisted"},
		{"cd builtin inside ws", Policy{Security: vocab.SecurityAllowlist, Ask: vocab.AskOff, Allowlist: allow, Workspace: h.ws}, "cd sub && ls", vocab.DecisionRun, "allowlist satisfied"},
		{"external cd needs approval", Policy{Security: vocab.SecurityAllowlist, Ask: vocab.AskOnMiss, Allowlist: allow, Workspace: h.ws}, "cd /etc && ls", vocab.DecisionApprovalPending, "outside the workspace: /etc"},
		{"external cat", Policy{Security: vocab.SecurityAllowlist, Ask: vocab.AskOnMiss, Allowlist: []Entry{{ID: "c", Pattern: "/usr/bin/cat"}}, Workspace: h.ws}, "cat /etc/passwd", vocab.DecisionApprovalPending, "/etc/passwd"},
		{"external rm dotdot", Policy{Security: vocab.SecurityAllowlist, Ask: vocab.AskOff, Allowlist: []Entry{{ID: "r", Pattern: "/usr/bin/rm"}}, Workspace: h.ws}, "rm -rf ../x", vocab.DecisionDeny, "outside the workspace"},
		{"external after cd relative", Policy{Security: vocab.SecurityAllowlist, Ask: vocab.AskOnMiss, Allowlist: []Entry{{ID: "c", Pattern: "/usr/bin/cat"}}, Workspace: h.ws}, "cd /etc && cat passwd", vocab.DecisionApprovalPending, "/etc/passwd"},
		{"external option value", Policy{Security: vocab.SecurityAllowlist, Ask: vocab.AskOnMiss, Allowlist: []Entry{{ID: "c", Pattern: "/usr/bin/cp"}}, Workspace: h.ws}, "cp --target-directory=/etc a", vocab.DecisionApprovalPending, "/etc"},
		{"external allowed", Policy{Security: vocab.SecurityAllowlist, Ask: vocab.AskOnMiss, Allowlist: []Entry{{ID: "c", Pattern: "/usr/bin/cat"}}, Workspace: h.ws, ExternalAllow: []string{"/etc/**"}}, "cat /etc/hostname", vocab.DecisionRun, "allowlist satisfied"},
		{"inside ws", Policy{Security: vocab.SecurityAllowlist, Ask: vocab.AskOff, Allowlist: []Entry{{ID: "c", Pattern: "/usr/bin/touch"}}, Workspace: h.ws}, "touch sub/a ./b", vocab.DecisionRun, "allowlist satisfied"},
		{"full on-miss external", Policy{Security: vocab.SecurityFull, Ask: vocab.AskOnMiss, Workspace: h.ws}, "rm -rf /etc/x", vocab.DecisionApprovalPending, "outside the workspace"},
		{"full ask off external", Policy{Security: vocab.SecurityFull, Ask: vocab.AskOff, Workspace: h.ws}, "cat /etc/hostname", vocab.DecisionRun, "security is full"},
		{"invalid security", Policy{Security: "Full", Ask: vocab.AskOff}, "ls", vocab.DecisionDeny, "invalid security"},
		{"invalid ask", Policy{Security: vocab.SecurityFull, Ask: "never"}, "ls", vocab.DecisionDeny, "invalid ask"},
		{"sudo needs sudo allowlisted", Policy{Security: vocab.SecurityAllowlist, Ask: vocab.AskOff, Allowlist: allow}, "sudo git status", vocab.DecisionDeny, "sudo itself is not allowlisted"},
		{"sudo safe bin not enough", Policy{Security: vocab.SecurityAllowlist, Ask: vocab.AskOff}, "sudo head -n 1", vocab.DecisionDeny, "sudo itself is not allowlisted"},
		{"sudo allowlisted", Policy{Security: vocab.SecurityAllowlist, Ask: vocab.AskOff, TrustedDirs: h.env.TrustedDirs, Allowlist: append([]Entry{{ID: "s", Pattern: "sudo"}}, allow...)}, "sudo -u root git status", vocab.DecisionRun, "allowlist satisfied"},
		{"sudo bare name outside the trusted dirs", Policy{Security: vocab.SecurityAllowlist, Ask: vocab.AskOff, Allowlist: append([]Entry{{ID: "s", Pattern: "sudo"}}, allow...)}, "sudo -u root git status", vocab.DecisionDeny, "sudo itself is not allowlisted"},
		{"hijacked head not safe", Policy{Security: vocab.SecurityAllowlist, Ask: vocab.AskOff}, "{evil}/head -n 1", vocab.DecisionDeny, "outside the trusted dirs"},
	}
	for _, c := range cases {
		a := Analyze(h.expand(c.cmd), h.env)
		v := c.p.Evaluate(a)
		if v.Decision != c.want || !strings.Contains(v.Reason, h.expand(c.reason)) {
			t.Errorf("%s: %q → %s (%s), want %s containing %q\n%s", c.name, c.cmd, v.Decision, v.Reason, c.want, c.reason, a.Explain())
		}
		if v.Decision == vocab.DecisionRun && a.OK && v.Command != a.Rebuilt {
			t.Errorf("%s: command %q is not the rebuilt form", c.name, v.Command)
		}
	}
}

func TestAnalyzeRelativeCwd(t *testing.T) {
	a := Analyze("ls", AnalyzeEnv{Path: "/usr/bin", Cwd: "rel/dir"})
	if !a.OK {
		t.Fatalf("relative cwd is joined to the process cwd: %s", a.Reason)
	}
	for _, s := range a.Segments {
		for _, c := range s.Cwds {
			if c == "" || c[0] != '/' {
				t.Errorf("cwd %q not absolute", c)
			}
		}
	}
}

func TestEvaluateHitsAndFallback(t *testing.T) {
	h := newHost(t)
	p := Policy{Security: vocab.SecurityAllowlist, Ask: vocab.AskOnMiss, Allowlist: []Entry{{ID: "g", Pattern: "/usr/bin/git"}}}
	v := p.Evaluate(Analyze("git status | head -n 1", h.env))
	if v.Decision != vocab.DecisionRun || len(v.Hits) != 1 || v.Hits[0].EntryID != "g" || v.Hits[0].ResolvedPath != "/usr/bin/git" || v.Hits[0].Segment != 1 {
		t.Fatalf("hits = %+v (%s)", v.Hits, v.Reason)
	}
	if len(v.Segments) != 2 || v.Segments[1].By != "safe bin" {
		t.Errorf("segment verdicts = %+v", v.Segments)
	}
	miss := Analyze("node -e 1", h.env)
	sat := Analyze("git status", h.env)
	for _, c := range []struct {
		fb   vocab.Security
		a    Analysis
		want vocab.Decision
	}{
		{"", miss, vocab.DecisionDeny}, {vocab.SecurityDeny, sat, vocab.DecisionDeny},
		{vocab.SecurityAllowlist, miss, vocab.DecisionDeny}, {vocab.SecurityAllowlist, sat, vocab.DecisionRun},
		{vocab.SecurityFull, miss, vocab.DecisionRun}, {"bogus", sat, vocab.DecisionDeny},
	} {
		q := p
		q.AskFallback = c.fb
		if got := q.Fallback(c.a); got.Decision != c.want || !strings.Contains(got.Reason, "expired") {
			t.Errorf("fallback %q on %q = %s (%s), want %s", c.fb, c.a.Command, got.Decision, got.Reason, c.want)
		}
	}
}

// TestRebuiltEquivalent runs accepted lines both as written and rebuilt and
// compares the output: pinning and quoting must not change meaning.
func TestRebuiltEquivalent(t *testing.T) {
	h := newHost(t)
	if err := os.WriteFile(filepath.Join(h.ws, "f.txt"), []byte("b\na\nb\nc\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{
		`echo hello world`, `echo "a\$b" 'c d' e\ f`, `printf '%s|' a 'b c' "d"`, `sort f.txt | uniq -c | head -n 2`,
		`echo 'it'\''s' && echo x || echo y`, "cat <<'EOF'\n$HOME ${x} \\n\nEOF", `bash -c 'echo "in bash" && echo two'`,
		`env -i FOO=1 env`, `env -S 'echo split string' tail`, `cd sub && pwd`, `timeout 5 nice -n 1 echo wrapped`,
		`sh -c 'sh -c "echo deep"'`, `ls 2>&1 | wc -l`, `tr -d '*' < /dev/null; echo done`,
	} {
		a := Analyze(cmd, h.env)
		if strings.Contains(cmd, "< /dev/null") {
			if a.OK {
				t.Errorf("%q accepted: input redirection must be refused", cmd)
			}
			continue
		}
		if !a.OK {
			t.Errorf("%q: %s", cmd, a.Reason)
			continue
		}
		run := func(c string) string {
			x := exec.Command("/bin/sh", "-c", c)
			x.Dir = h.ws
			x.Env = []string{"PATH=/usr/bin:/bin", "HOME=/nonexistent"}
			out, err := x.CombinedOutput()
			if err != nil {
				t.Errorf("%q: %v: %s", c, err, out)
			}
			return string(out)
		}
		// env -i is rebuilt with the host's pinned variables set again
		// (envguard.Pinned): the one intended difference.
		pinned := envguard.Pinned()
		var kept []string
		for _, line := range strings.SplitAfter(run(a.Rebuilt), "\n") {
			if k, v, ok := strings.Cut(strings.TrimSuffix(line, "\n"), "="); !ok || pinned[k] != v {
				kept = append(kept, line)
			}
		}
		if got, want := strings.Join(kept, ""), run(cmd); got != want {
			t.Errorf("%q: rebuilt %q printed %q, original printed %q", cmd, a.Rebuilt, got, want)
		}
	}
}
