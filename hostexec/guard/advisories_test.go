package guard

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandboxctl/sandboxctl/vocab"
)

// Each test here is one line of reference/advisories.md that concerns
// analysis, safe bins, allowlist persistence, approval binding or env.
// Every command that could do harm tries to create a marker file; a Run
// verdict is executed with /bin/sh -c exactly as the gateway would, and
// the marker must not exist afterwards. Refused commands are never run.

type advCase struct {
	cmd    string         // {m} is the marker path
	policy Policy         // zero Security means allowlist + ask off + allowlist below
	want   vocab.Decision // expected decision
	rule   Rule           // expected analysis rule ("" = analysis passes)
	reason string         // substring of Verdict.Reason
}

var advAllow = []Entry{{ID: "echo", Pattern: "/usr/bin/echo"}, {ID: "cat", Pattern: "/usr/bin/cat"}, {ID: "printf", Pattern: "/usr/bin/printf"}}

func runAdvisory(t *testing.T, h *testHost, cases []advCase) {
	t.Helper()
	for _, c := range cases {
		marker := filepath.Join(h.ws, "MARKER")
		_ = os.Remove(marker)
		cmd := strings.ReplaceAll(h.expand(c.cmd), "{m}", marker)
		p := c.policy
		if p.Security == "" {
			p = Policy{Security: vocab.SecurityAllowlist, Ask: vocab.AskOff, Allowlist: advAllow}
		}
		a := Analyze(cmd, h.env)
		v := p.Evaluate(a)
		if c.rule == "" && !a.OK {
			t.Errorf("%q: analysis refused (%s), want accepted", c.cmd, a.Reason)
		}
		if c.rule != "" && (a.OK || !hasRule(a, c.rule)) {
			t.Errorf("%q: analysis rule %q (%s), want %s", c.cmd, a.Rule, a.Reason, c.rule)
		}
		if v.Decision != c.want || !strings.Contains(v.Reason, c.reason) {
			t.Errorf("%q: %s (%s), want %s containing %q", c.cmd, v.Decision, v.Reason, c.want, c.reason)
		}
		out := runIfRun(t, h.ws, v)
		mustNotExist(t, marker)
		mustNotExist(t, filepath.Join(h.evil, "TROJAN_RAN"))
		_ = out
	}
}

// echo "output: $(whoami)" ; echo "output: `id`" (subst inside double quotes) -> reject
func TestAdvisorySubstitutionInDoubleQuotes(t *testing.T) {
	h := newHost(t)
	runAdvisory(t, h, []advCase{
		{cmd: `echo "output: $(touch {m})"`, want: vocab.DecisionDeny, rule: RuleSubstitution, reason: "substitution"},
		{cmd: "echo \"output: `touch {m}`\"", want: vocab.DecisionDeny, rule: RuleSubstitution, reason: "substitution"},
		{cmd: `echo "output: $(touch {m})"`, policy: Policy{Security: vocab.SecurityAllowlist, Ask: vocab.AskOnMiss, Allowlist: advAllow}, want: vocab.DecisionApprovalPending, rule: RuleSubstitution, reason: "analysis refused"},
		{cmd: `bash -c "echo \"$(touch {m})\""`, want: vocab.DecisionDeny, rule: RuleSubstitution, reason: "substitution"},
	})
	// Structural check as well, without the lexical pre-check.
	for _, src := range []string{`echo "a $(id)"`, "echo \"`id`\"", `cat <(id)`, `echo "${x}"`, `echo $((1))`} {
		f, err := parseForTest(src)
		if err != nil {
			t.Fatal(err)
		}
		if rule, _ := forbiddenNodes(f); rule == "" {
			t.Errorf("%q: structural walk found nothing", src)
		}
	}
}

// "$\<newline>(" line continuation inside double quotes -> reject
func TestAdvisoryLineContinuation(t *testing.T) {
	h := newHost(t)
	runAdvisory(t, h, []advCase{
		{cmd: "echo \"$\\\n(touch {m})\"", want: vocab.DecisionDeny, rule: RuleLineContinuation, reason: "line-continuation"},
		{cmd: "echo \"$\\\n(touch {m})\"", policy: Policy{Security: vocab.SecurityFull, Ask: vocab.AskAlways}, want: vocab.DecisionApprovalPending, rule: RuleLineContinuation, reason: "ask is always"},
		{cmd: "tou\\\nch {m}", want: vocab.DecisionDeny, rule: RuleLineContinuation, reason: "line-continuation"},
	})
}

// unquoted heredoc body with $(cmd) ` ${ $VAR $? $$ $1 $@ -> reject; <<'EOF' ok
func TestAdvisoryHeredoc(t *testing.T) {
	h := newHost(t)
	runAdvisory(t, h, []advCase{
		{cmd: "cat <<EOF\n$(touch {m})\nEOF", want: vocab.DecisionDeny, rule: RuleSubstitution, reason: "substitution"},
		{cmd: "cat <<EOF\n`touch {m}`\nEOF", want: vocab.DecisionDeny, rule: RuleSubstitution, reason: "substitution"},
		{cmd: "cat <<EOF\n${x:=$(touch {m})}\nEOF", want: vocab.DecisionDeny, rule: RuleSubstitution, reason: "substitution"},
		{cmd: "cat <<EOF\n${x}\nEOF", want: vocab.DecisionDeny, rule: RuleHeredoc, reason: "heredoc"},
		{cmd: "cat <<EOF\n$HOME\nEOF", want: vocab.DecisionDeny, rule: RuleHeredoc, reason: "heredoc"},
		{cmd: "cat <<EOF\n$?\nEOF", want: vocab.DecisionDeny, rule: RuleHeredoc, reason: "heredoc"},
		{cmd: "cat <<EOF\n$$\nEOF", want: vocab.DecisionDeny, rule: RuleHeredoc, reason: "heredoc"},
		{cmd: "cat <<EOF\n$1\nEOF", want: vocab.DecisionDeny, rule: RuleHeredoc, reason: "heredoc"},
		{cmd: "cat <<EOF\n$@\nEOF", want: vocab.DecisionDeny, rule: RuleHeredoc, reason: "heredoc"},
	})
	// <<'EOF' is literal: it runs, and prints its body unexpanded.
	a := Analyze("cat <<'EOF'\n$HOME ${x} $? $$ $1 $@\nEOF", h.env)
	v := Policy{Security: vocab.SecurityAllowlist, Ask: vocab.AskOff, Allowlist: advAllow}.Evaluate(a)
	if v.Decision != vocab.DecisionRun {
		t.Fatalf("quoted heredoc: %s (%s)", v.Decision, v.Reason)
	}
	if out := runIfRun(t, h.ws, v); out != "$HOME ${x} $? $$ $1 $@\n" {
		t.Errorf("quoted heredoc printed %q", out)
	}
}

// safe bins head/tail/grep with * or $HOME/... -> must not expand (quote argv)
func TestAdvisorySafeBinExpansion(t *testing.T) {
	h := newHost(t)
	// Files whose names would be read as options if * expanded.
	for _, n := range []string{"--files0-from=x", "-oMARKER"} {
		if err := os.WriteFile(filepath.Join(h.ws, n), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	safe := Policy{Security: vocab.SecurityAllowlist, Ask: vocab.AskOff, Allowlist: advAllow, SafeBins: []string{"head", "tail", "grep", "tr", "wc", "sort"}}
	runAdvisory(t, h, []advCase{
		{cmd: `head -n 1 *`, policy: safe, want: vocab.DecisionDeny, rule: RuleGlob, reason: "glob"},
		{cmd: `sort *`, policy: safe, want: vocab.DecisionDeny, rule: RuleGlob, reason: "glob"},
		{cmd: `tail -n 1 $HOME/.ssh/id_rsa`, policy: safe, want: vocab.DecisionDeny, rule: RuleParamExpansion, reason: "parameter-expansion"},
		{cmd: `grep -e x ~/.ssh/id_rsa`, policy: safe, want: vocab.DecisionDeny, rule: RuleTilde, reason: "tilde"},
		{cmd: `head -n 1 '*'`, policy: safe, want: vocab.DecisionDeny, reason: "positional"},
		{cmd: `echo hi | grep '$HOME'`, policy: safe, want: vocab.DecisionRun, reason: "allowlist satisfied"},
		{cmd: `printf 'a*b\n' | tr -d '*' | wc -c`, policy: safe, want: vocab.DecisionRun, reason: "allowlist satisfied"},
	})
	// The rebuilt command single-quotes every word: '*' and '$HOME' reach
	// the program literally.
	a := Analyze(`printf '%s\n' '$HOME' 'x*y' | grep -F '$HOME'`, h.env)
	v := safe.Evaluate(a)
	if v.Decision != vocab.DecisionRun || !strings.Contains(v.Command, `'$HOME'`) || !strings.Contains(v.Command, `'x*y'`) {
		t.Fatalf("verdict %s %q", v.Decision, v.Command)
	}
	if out := runIfRun(t, h.ws, v); out != "$HOME\n" {
		t.Errorf("grep output %q, want literal $HOME", out)
	}
}

// sort --compress-prog (prefix of denied --compress-program) -> reject; sort -o/--output; grep -r/-R
func TestAdvisorySafeBinDeniedFlags(t *testing.T) {
	h := newHost(t)
	safe := Policy{Security: vocab.SecurityAllowlist, Ask: vocab.AskOff, Allowlist: advAllow, SafeBins: []string{"sort", "grep"}}
	runAdvisory(t, h, []advCase{
		{cmd: `sort --compress-prog='touch {m}' -S 1`, policy: safe, want: vocab.DecisionDeny, reason: "denied flag --compress-program (given as --compress-prog)"},
		{cmd: `sort --compress-program='touch {m}'`, policy: safe, want: vocab.DecisionDeny, reason: "denied flag --compress-program"},
		{cmd: `echo x | sort -o {m}`, policy: safe, want: vocab.DecisionDeny, reason: "denied flag -o"},
		{cmd: `echo x | sort -ro{m}`, policy: safe, want: vocab.DecisionDeny, reason: "denied flag -o"},
		{cmd: `echo x | sort --output={m}`, policy: safe, want: vocab.DecisionDeny, reason: "denied flag --output"},
		{cmd: `echo x | sort --outp {m}`, policy: safe, want: vocab.DecisionDeny, reason: "denied flag --output"},
		{cmd: `grep -r secret /`, policy: safe, want: vocab.DecisionDeny, reason: "denied flag -r"},
		{cmd: `grep -R secret /`, policy: safe, want: vocab.DecisionDeny, reason: "denied flag -R"},
		{cmd: `grep --recursive secret`, policy: safe, want: vocab.DecisionDeny, reason: "denied flag --recursive"},
		{cmd: `grep -f /etc/shadow`, policy: safe, want: vocab.DecisionDeny, reason: "denied flag -f"},
		{cmd: `echo x | sort -r`, policy: safe, want: vocab.DecisionRun, reason: "allowlist satisfied"},
	})
}

// jq as safe bin fails closed (env/$__loc__/modules)
func TestAdvisoryJqNeverSafe(t *testing.T) {
	h := newHost(t)
	jq := Policy{Security: vocab.SecurityAllowlist, Ask: vocab.AskOff, Allowlist: advAllow, SafeBins: []string{"jq"}}
	runAdvisory(t, h, []advCase{
		{cmd: `jq -n env`, policy: jq, want: vocab.DecisionDeny, reason: "never a safe bin"},
		{cmd: `jq -n '$__loc__'`, policy: jq, want: vocab.DecisionDeny, reason: "never a safe bin"},
		{cmd: `jq -n -L /tmp 'import "x" as x; 1'`, policy: jq, want: vocab.DecisionDeny, reason: "never a safe bin"},
		{cmd: `echo '{}' | jq .`, policy: jq, want: vocab.DecisionDeny, reason: "never a safe bin"},
		{cmd: `echo '{}' | jq .`, policy: Policy{Security: vocab.SecurityAllowlist, Ask: vocab.AskOnMiss, Allowlist: advAllow, SafeBins: []string{"jq"}}, want: vocab.DecisionApprovalPending, reason: "never a safe bin"},
	})
}

// PATH-hijacked trojan jq; case-variant path -> trusted dirs only, case-sensitive
func TestAdvisoryPathHijack(t *testing.T) {
	h := newHost(t)
	h.env.Path = h.evil + ":" + h.env.Path
	safe := Policy{Security: vocab.SecurityAllowlist, Ask: vocab.AskOff, Allowlist: advAllow, SafeBins: []string{"head", "jq", "HEAD"}}
	runAdvisory(t, h, []advCase{
		{cmd: `head -n 1`, policy: safe, want: vocab.DecisionDeny, reason: "outside the trusted dirs"},
		{cmd: `HEAD -n 1`, policy: safe, want: vocab.DecisionDeny, reason: "has no profile"},
		{cmd: `jq .`, policy: safe, want: vocab.DecisionDeny, reason: "not allowlisted"},
		{cmd: `jq .`, policy: Policy{Security: vocab.SecurityAllowlist, Ask: vocab.AskOff, Allowlist: []Entry{{ID: "j", Pattern: "/usr/bin/jq"}}}, want: vocab.DecisionDeny, reason: "not allowlisted"},
		{cmd: `env ls`, policy: safe, want: vocab.DecisionDeny, rule: RuleWrapperSpoof, reason: "wrapper-spoof"},
		{cmd: `sh -c ls`, policy: safe, want: vocab.DecisionDeny, rule: RuleWrapperSpoof, reason: "wrapper-spoof"},
	})
	// Trusted-dir and pattern comparisons are case-sensitive.
	p := Policy{TrustedDirs: []string{"/usr/bin"}}
	if inDirs("/USR/BIN/head", p.trustedDirs()) {
		t.Error("trusted dir check is case-insensitive")
	}
	if ok, _ := MatchPattern("/usr/bin/jq", "/usr/bin/JQ", "/usr/bin/JQ"); ok {
		t.Error("allowlist match is case-insensitive")
	}
}

// env -S '...' / --split-string wrapper -> analyze what actually runs
func TestAdvisoryEnvSplitString(t *testing.T) {
	h := newHost(t)
	envOnly := Policy{Security: vocab.SecurityAllowlist, Ask: vocab.AskOff, Allowlist: []Entry{{ID: "env", Pattern: "/usr/bin/env"}}}
	runAdvisory(t, h, []advCase{
		{cmd: `env -S 'touch {m}'`, policy: envOnly, want: vocab.DecisionDeny, reason: "/usr/bin/touch is not allowlisted"},
		{cmd: `env --split-string='touch {m}'`, policy: envOnly, want: vocab.DecisionDeny, reason: "/usr/bin/touch is not allowlisted"},
		{cmd: `env -S 'sh -c "touch {m}"'`, policy: envOnly, want: vocab.DecisionDeny, reason: "/usr/bin/touch is not allowlisted"},
		{cmd: `env -S'-i touch {m}'`, policy: envOnly, want: vocab.DecisionDeny, reason: "/usr/bin/touch is not allowlisted"},
		{cmd: `env -S 'touch {m}; id'`, policy: envOnly, want: vocab.DecisionDeny, rule: RuleWrapperOption, reason: "wrapper-option"},
		{cmd: `env -S 'BASH_ENV=/x bash -c id'`, policy: envOnly, want: vocab.DecisionDeny, rule: RuleEnvBlocked, reason: "env-blocked"},
	})
	a := Analyze(`env -S 'sh -c "touch x"'`, h.env)
	if len(a.Segments) != 1 || a.Segments[0].Resolved != "/usr/bin/touch" || len(a.Segments[0].Wrappers) != 2 {
		t.Fatalf("segments %+v", a.Segments)
	}
	if ex := a.Explain(); !strings.Contains(ex, "runs: /usr/bin/touch") || !strings.Contains(ex, "via env") || !strings.Contains(ex, "via shell") {
		t.Errorf("explain does not show what runs:\n%s", ex)
	}
}

// /usr/bin/env BASH_ENV=... bash -lc ... approved as echo SAFE -> bind approval to full argv
func TestAdvisoryBashEnvApprovalBinding(t *testing.T) {
	h := newHost(t)
	marker := filepath.Join(h.ws, "MARKER")
	evil := "/usr/bin/env BASH_ENV=" + marker + ".sh bash -lc 'echo SAFE'"
	a := Analyze(evil, h.env)
	if a.OK || a.Rule != RuleEnvBlocked {
		t.Fatalf("analysis %v %s", a.OK, a.Reason)
	}
	// A human approved "echo SAFE"; the approval cannot be replayed for the
	// env-carrying command.
	st := newStore(t, h.ws, time.Now)
	ctx := context.Background()
	safe := Analyze("echo SAFE", h.env)
	env := map[string]string{"TERM": "xterm"}
	p, err := st.Request(ctx, PendingRequest{Command: "echo SAFE", Argv: []string{"/bin/sh", "-c", safe.Rebuilt}, Cwd: h.ws, AgentID: "a", EnvHash: EnvHash(env), ResolvedPaths: PersistablePaths(safe)})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Resolve(ctx, p.Slug, vocab.AllowOnce); err != nil {
		t.Fatal(err)
	}
	_, err = st.Consume(ctx, p.ID, Binding{Command: evil, Argv: []string{"/bin/sh", "-c", evil}, Cwd: h.ws, AgentID: "a", EnvHash: EnvHash(env)})
	if !errors.Is(err, ErrBindingMismatch) || !strings.Contains(err.Error(), "command") || !strings.Contains(err.Error(), "argv") {
		t.Fatalf("replay: %v", err)
	}
	mustNotExist(t, marker)
}

// ./sh wrapper spoof -> deny
func TestAdvisoryRelativeShellSpoof(t *testing.T) {
	h := newHost(t)
	writeExec(t, filepath.Join(h.ws, "sh"), "#!/bin/sh\ntouch MARKER\n")
	allowSh := Policy{Security: vocab.SecurityAllowlist, Ask: vocab.AskOff, Allowlist: []Entry{{ID: "id", Pattern: "/usr/bin/id"}, {ID: "sh", Pattern: "sh"}}}
	runAdvisory(t, h, []advCase{
		{cmd: `./sh -c id`, policy: allowSh, want: vocab.DecisionDeny, rule: RuleWrapperSpoof, reason: "wrapper-spoof"},
		{cmd: `{ws}/sh -c id`, policy: allowSh, want: vocab.DecisionDeny, rule: RuleWrapperSpoof, reason: "wrapper-spoof"},
		{cmd: `env ./sh -c id`, policy: allowSh, want: vocab.DecisionDeny, rule: RuleWrapperSpoof, reason: "wrapper-spoof"},
		{cmd: `./sh -c id`, policy: Policy{Security: vocab.SecurityAllowlist, Ask: vocab.AskOnMiss, Allowlist: allowSh.Allowlist}, want: vocab.DecisionApprovalPending, rule: RuleWrapperSpoof, reason: "wrapper-spoof"},
	})
}

// allow-always on /bin/zsh -lc 'whoami' must not persist /bin/zsh; sh -lc '$0 "$@"' ...; xargs carriers
func TestAdvisoryAllowAlwaysNeverPersistsShell(t *testing.T) {
	h := newHost(t)
	ctx := context.Background()
	st := newStore(t, h.ws, time.Now)
	for _, cmd := range []string{"zsh -lc 'whoami'", "/bin/bash -lc 'id'", "env -i timeout 5 bash -c 'whoami | head -n 1'"} {
		a := Analyze(cmd, h.env)
		if !a.OK {
			t.Fatalf("%q: %s", cmd, a.Reason)
		}
		p, err := st.Request(ctx, PendingRequest{Command: cmd, Argv: []string{"/bin/sh", "-c", a.Rebuilt}, Cwd: h.ws, AgentID: "agent", EnvHash: EnvHash(nil), ResolvedPaths: PersistablePaths(a)})
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Resolve(ctx, p.ID, vocab.AllowAlways); err != nil {
			t.Fatal(err)
		}
	}
	entries, err := st.Allowlist(ctx, "agent")
	if err != nil {
		t.Fatal(err)
	}
	var pats []string
	for _, e := range entries {
		pats = append(pats, e.Pattern)
		if IsShellOrWrapper(e.Pattern) {
			t.Errorf("allow-always persisted a shell or wrapper: %s", e.Pattern)
		}
	}
	if strings.Join(pats, " ") != "/usr/bin/whoami /usr/bin/id /usr/bin/head" {
		t.Errorf("persisted %v, want whoami, id, head only", pats)
	}
	// With that allowlist, a shell carrying something else is not satisfied.
	p := Policy{Security: vocab.SecurityAllowlist, Ask: vocab.AskOff, Allowlist: entries}
	runAdvisory(t, h, []advCase{
		{cmd: `zsh -lc 'touch {m}'`, policy: p, want: vocab.DecisionDeny, reason: "/usr/bin/touch is not allowlisted"},
		{cmd: `bash -lc 'id && touch {m}'`, policy: p, want: vocab.DecisionDeny, reason: "/usr/bin/touch is not allowlisted"},
		{cmd: `sh -lc '$0 "$@"' touch {m}`, policy: p, want: vocab.DecisionDeny, rule: RuleParamExpansion, reason: "parameter-expansion"},
		{cmd: `echo {m} | xargs touch`, policy: p, want: vocab.DecisionDeny, rule: RuleCarrier, reason: "carrier"},
		{cmd: `id | xargs -I'{}' touch {m}`, policy: p, want: vocab.DecisionDeny, rule: RuleCarrier, reason: "carrier"},
		{cmd: `zsh -lc whoami`, policy: p, want: vocab.DecisionRun, reason: "allowlist satisfied"},
	})
}

// node.invoke approved:true from client -> strip. The guard has no
// client-settable "approved" flag at all: only a decision recorded in the
// store allows, and an undecided request stays pending.
func TestAdvisoryClientCannotSelfApprove(t *testing.T) {
	h := newHost(t)
	st := newStore(t, h.ws, time.Now)
	ctx := context.Background()
	b := Binding{Command: "touch MARKER", Argv: []string{"/bin/sh", "-c", "touch MARKER"}, Cwd: h.ws, AgentID: "a", EnvHash: EnvHash(nil)}
	p, err := st.Request(ctx, PendingRequest{Command: b.Command, Argv: b.Argv, Cwd: b.Cwd, AgentID: b.AgentID, EnvHash: b.EnvHash})
	if err != nil {
		t.Fatal(err)
	}
	r, err := st.Consume(ctx, p.ID, b)
	if err != nil || r.Outcome != OutcomePending {
		t.Fatalf("undecided request: %v %v", r.Outcome, err)
	}
	mustNotExist(t, filepath.Join(h.ws, "MARKER"))
}

// rawCommand != command[] -> reject: the command string and the argv are
// both bound; either differing is refused.
func TestAdvisoryRawCommandMismatch(t *testing.T) {
	h := newHost(t)
	st := newStore(t, h.ws, time.Now)
	ctx := context.Background()
	b := Binding{Command: "echo hi", Argv: []string{"/bin/sh", "-c", "echo hi"}, Cwd: h.ws, AgentID: "a", EnvHash: EnvHash(nil)}
	p, _ := st.Request(ctx, PendingRequest{Command: b.Command, Argv: b.Argv, Cwd: b.Cwd, AgentID: b.AgentID, EnvHash: b.EnvHash})
	if err := st.Resolve(ctx, p.ID, vocab.AllowOnce); err != nil {
		t.Fatal(err)
	}
	bad := b
	bad.Argv = []string{"/bin/sh", "-c", "touch MARKER"}
	if _, err := st.Consume(ctx, p.ID, bad); !errors.Is(err, ErrBindingMismatch) {
		t.Fatalf("argv differs from command: %v", err)
	}
	mustNotExist(t, filepath.Join(h.ws, "MARKER"))
}

// approval id reused with changed env -> binding
func TestAdvisoryApprovalReusedWithChangedEnv(t *testing.T) {
	h := newHost(t)
	st := newStore(t, h.ws, time.Now)
	ctx := context.Background()
	env := map[string]string{"LANG": "C.UTF-8"}
	b := Binding{Command: "git status", Argv: []string{"/bin/sh", "-c", "'/usr/bin/git' 'status'"}, Cwd: h.ws, AgentID: "a", EnvHash: EnvHash(env)}
	p, _ := st.Request(ctx, PendingRequest{Command: b.Command, Argv: b.Argv, Cwd: b.Cwd, AgentID: b.AgentID, EnvHash: b.EnvHash})
	if err := st.Resolve(ctx, p.ID, vocab.AllowOnce); err != nil {
		t.Fatal(err)
	}
	for _, env2 := range []map[string]string{
		{"LANG": "C.UTF-8", "GIT_SSH_COMMAND": "touch MARKER"},
		{"LANG": "C"},
		{},
		{"LANG=C.UTF-8": ""},
	} {
		bad := b
		bad.EnvHash = EnvHash(env2)
		if _, err := st.Consume(ctx, p.ID, bad); !errors.Is(err, ErrBindingMismatch) || !strings.Contains(err.Error(), "env") {
			t.Errorf("env %v: %v", env2, err)
		}
	}
	if r, err := st.Consume(ctx, p.ID, b); err != nil || r.Outcome != OutcomeAllow {
		t.Errorf("original binding: %v %v", r.Outcome, err)
	}
	mustNotExist(t, filepath.Join(h.ws, "MARKER"))
}

// long command truncated in approval UI -> show/bind full
func TestAdvisoryLongCommandNotTruncated(t *testing.T) {
	h := newHost(t)
	st := newStore(t, h.ws, time.Now)
	ctx := context.Background()
	long := "echo " + strings.Repeat("a", 10000) + " && touch MARKER"
	a := Analyze(long, h.env)
	if !a.OK {
		t.Fatal(a.Reason)
	}
	ex := a.Explain()
	if !strings.Contains(ex, "touch MARKER") || !strings.Contains(ex, "/usr/bin/touch") {
		t.Fatal("explain hides the tail of a long command")
	}
	p, _ := st.Request(ctx, PendingRequest{Command: long, Argv: []string{"/bin/sh", "-c", a.Rebuilt}, Cwd: h.ws, EnvHash: EnvHash(nil), Explain: ex})
	list, _ := st.List(ctx)
	if len(list) != 1 || list[0].Command != long || list[0].Explain != ex {
		t.Fatal("stored request is not the full command")
	}
	trunc := long[:200] + "…"
	if _, err := st.Check(ctx, p.ID, Binding{Command: trunc, Argv: []string{"/bin/sh", "-c", a.Rebuilt}, Cwd: h.ws, EnvHash: EnvHash(nil)}); !errors.Is(err, ErrBindingMismatch) {
		t.Errorf("truncated command binding: %v", err)
	}
	v := Policy{Security: vocab.SecurityAllowlist, Ask: vocab.AskOff, Allowlist: advAllow}.Evaluate(a)
	if v.Decision != vocab.DecisionDeny || !strings.Contains(v.Reason, "/usr/bin/touch") {
		t.Errorf("verdict %s %s", v.Decision, v.Reason)
	}
	mustNotExist(t, filepath.Join(h.ws, "MARKER"))
}

// env {"LD_PRELOAD":"/tmp/malware.so"}; inherited NODE_OPTIONS; GLIBC_TUNABLES; JAVA_TOOL_OPTIONS; GIT_SSH_COMMAND=evil.sh
// (request env is envguard's; here: the same keys set inside the command line)
func TestAdvisoryEnvInCommandLine(t *testing.T) {
	h := newHost(t)
	p := Policy{Security: vocab.SecurityAllowlist, Ask: vocab.AskOff, Allowlist: []Entry{{ID: "all", Pattern: "/usr/bin/*"}}}
	runAdvisory(t, h, []advCase{
		{cmd: `env LD_PRELOAD=/tmp/malware.so touch {m}`, policy: p, want: vocab.DecisionDeny, rule: RuleEnvBlocked, reason: "LD_PRELOAD"},
		{cmd: `env NODE_OPTIONS=--require=/tmp/x.js node -e 1`, policy: p, want: vocab.DecisionDeny, rule: RuleEnvBlocked, reason: "NODE_OPTIONS"},
		{cmd: `env GLIBC_TUNABLES=glibc.x=1 touch {m}`, policy: p, want: vocab.DecisionDeny, rule: RuleEnvBlocked, reason: "GLIBC_TUNABLES"},
		{cmd: `env JAVA_TOOL_OPTIONS=-x touch {m}`, policy: p, want: vocab.DecisionDeny, rule: RuleEnvBlocked, reason: "JAVA_TOOL_OPTIONS"},
		{cmd: `env GIT_SSH_COMMAND='touch {m}' git ls-remote ssh://x/y`, policy: p, want: vocab.DecisionDeny, rule: RuleEnvBlocked, reason: "GIT_SSH_COMMAND"},
		{cmd: `env BASH_ENV={m} bash -c id`, policy: p, want: vocab.DecisionDeny, rule: RuleEnvBlocked, reason: "BASH_ENV"},
		{cmd: `LD_PRELOAD=/tmp/malware.so touch {m}`, policy: p, want: vocab.DecisionDeny, rule: RuleAssignment, reason: "assignment"},
		{cmd: `sudo LD_PRELOAD=/tmp/m.so touch {m}`, policy: p, want: vocab.DecisionDeny, rule: RuleEnvBlocked, reason: "LD_PRELOAD"},
	})
	if EnvHash(map[string]string{"A": "1"}) == EnvHash(map[string]string{"A": "1", "LD_PRELOAD": "x"}) {
		t.Error("env hash ignores an added variable")
	}
	if EnvHash(map[string]string{"A": "1=B"}) == EnvHash(map[string]string{"A=1": "B"}) {
		t.Error("env hash is ambiguous")
	}
	if EnvHash(nil) != EnvHash(map[string]string{}) {
		t.Error("nil and empty env hash differ")
	}
}

// `nohup sleep 600 | cat &` stuck running -> the guard refuses background jobs outright
func TestAdvisoryBackgroundRefused(t *testing.T) {
	h := newHost(t)
	runAdvisory(t, h, []advCase{
		{cmd: `nohup sleep 600 | cat &`, policy: Policy{Security: vocab.SecurityAllowlist, Ask: vocab.AskOff, Allowlist: []Entry{{ID: "a", Pattern: "/usr/bin/*"}}}, want: vocab.DecisionDeny, rule: RuleBackground, reason: "background"},
		{cmd: `touch {m} &`, policy: Policy{Security: vocab.SecurityAllowlist, Ask: vocab.AskOff, Allowlist: []Entry{{ID: "a", Pattern: "/usr/bin/*"}}}, want: vocab.DecisionDeny, rule: RuleBackground, reason: "background"},
	})
}

// echo "console.log('test')" | node -> every pipeline segment evaluated
func TestAdvisoryEveryPipelineSegment(t *testing.T) {
	h := newHost(t)
	runAdvisory(t, h, []advCase{
		{cmd: `echo "require('fs').writeFileSync('{m}','')" | node`, want: vocab.DecisionDeny, reason: "segment 2"},
		{cmd: `echo x | head -n 1 | node`, want: vocab.DecisionDeny, reason: "/usr/bin/node is not allowlisted"},
		{cmd: `echo ok | touch {m}`, want: vocab.DecisionDeny, reason: "/usr/bin/touch is not allowlisted"},
		{cmd: `echo ok && touch {m}`, want: vocab.DecisionDeny, reason: "/usr/bin/touch is not allowlisted"},
		{cmd: `echo ok || touch {m}`, want: vocab.DecisionDeny, reason: "/usr/bin/touch is not allowlisted"},
		{cmd: "echo ok\ntouch {m}", want: vocab.DecisionDeny, reason: "/usr/bin/touch is not allowlisted"},
		{cmd: `echo ok | head -n 1`, want: vocab.DecisionRun, reason: "allowlist satisfied"},
	})
}
