package guard

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sandboxctl/sandboxctl/vocab"
)

// TestGadgetTable is the tested table of gadgets: every row is an argv
// (argv[0] the program as run) and whether it carries one.
func TestGadgetTable(t *testing.T) {
	cases := []struct {
		argv   string
		pty    bool
		gadget bool
	}{
		// git: global options, subcommands, subcommand options
		{"git status", false, false},
		{"git status --short", false, false},
		{"git status -uno", false, false},
		{"git log --oneline -n 5", false, false},
		{"git --no-pager log", false, false},
		{"git --exec-path", false, false},
		{"git -c core.fsmonitor=x status", false, true},
		{"git -ccore.pager=x log", false, true},
		{"git --config-env=core.fsmonitor=HOME status", false, true},
		{"git --exec-path=/tmp status", false, true},
		{"git -C /tmp status", false, true},
		{"git --git-dir=/tmp/x status", false, true},
		{"git --git-dir /tmp/x status", false, true},
		{"git -p status", false, true},
		{"git --attr-source HEAD -c core.fsmonitor=x status", false, true},
		{"git --attr-source=HEAD status", false, false},
		{"git --pag status", false, true},
		{"git rebase -x true main", false, true},
		{"git rebase --exec=true main", false, true},
		{"git rebase --exe true main", false, true},
		{"git fetch --upload-pack=x origin", false, true},
		{"git fetch -u x origin", false, true},
		{"git clone --template=/tmp/t x y", false, true},
		{"git clone -c core.x=1 x y", false, true}, // clone's -c is --config
		{"git clone --config core.x=1 x y", false, true},
		{"git grep -O less foo", false, true},
		{"git grep --open-files-in-pager=less foo", false, true},
		{"git diff --ext-diff", false, true},
		{"git difftool", false, true},
		{"git bisect run make", false, true},
		{"git submodule foreach id", false, true},
		{"git config core.pager x", false, true},
		{"git help status", false, true},
		{"git archive --remote=x HEAD", false, true},
		{"git log", true, false}, // pager: less under LESSSECURE=1
		// find
		{"find . -name f", false, false},
		{"find . -exec id ;", false, true},
		{"find . -execdir id ;", false, true},
		{"find . -ok id ;", false, true},
		{"find . -okdir id ;", false, true},
		{"find . -fprint x", false, true},
		{"find . -fprint0 x", false, true},
		{"find . -fprintf x %p", false, true},
		{"find . -fls x", false, true},
		{"find . -delete", false, true},
		{"find -- . -exec id ;", false, true},
		// sed: only --sandbox, never -i
		{"sed -n 1p f", false, true},
		{"sed --sandbox -n 1p f", false, false},
		{"sed --sandbox -e 1e\\ id f", false, false}, // sed itself rejects e in sandbox mode
		{"sed --sandbox -i s/a/b/ f", false, true},
		{"sed --sandbox -ni s/a/b/ f", false, true},
		{"sed --sandbox --in-place s/a/b/ f", false, true},
		{"sed --sandbox --in-pl=.bak s/a/b/ f", false, true},
		{"sed --sandbox -e s/i/b/ f", false, false},
		// awk and other interpreters: always
		{"awk {print}", false, true},
		{"mawk {print}", false, true},
		{"gawk --version", false, true},
		{"python3 -c pass", false, true},
		{"perl -e 1", false, true},
		{"node x.js", false, true},
		// tar
		{"tar -cf a.tar f", false, false},
		{"tar xvf a.tar", false, false},
		{"tar -xzf a.tgz -C out", false, false},
		{"tar --checkpoint-action=exec=id -cf a.tar f", false, true},
		{"tar --checkpoint-act=exec=id -cf a.tar f", false, true},
		{"tar -xf a.tar --to-command=id", false, true},
		{"tar --to-com=id -xf a.tar", false, true},
		{"tar --use-compress-program=id -cf a f", false, true},
		{"tar -I id -cf a f", false, true},
		{"tar -cIf id a f", false, true},
		{"tar cIf id a f", false, true},
		{"tar --rsh-command=id -cf h:a f", false, true},
		{"tar --info-script=id -cf a f", false, true},
		{"tar -F id -cf a f", false, true},
		{"tar --new-volume-script=id -cf a f", false, true},
		{"tar -cf host:/a.tar f", false, true},
		{"tar cf host:/a.tar f", false, true},
		{"tar --file=host:/a.tar -c f", false, true},
		{"tar --force-local -cf c:a.tar f", false, false},
		{"tar -P -xf a.tar", false, true},
		{"tar -xPf a.tar", false, true},
		{"tar -M -cf a.tar f", false, true},
		// sort
		{"sort -n f", false, false},
		{"sort -t o -k 2 f", false, false},
		{"sort --compress-program=gzip f", false, true},
		{"sort --compress-prog=gzip f", false, true},
		{"sort -o out f", false, true},
		{"sort -ro out f", false, true},
		{"sort --output=out f", false, true},
		{"sort --outp out f", false, true},
		// editors: always
		{"vim f", false, true},
		{"vi -c !id", false, true},
		{"vim.basic --version", false, true},
		{"nvim f", false, true},
		{"ed f", false, true},
		{"ex f", false, true},
		// pagers and man: always in a PTY; argv gadgets without one
		{"less f", false, false},
		{"less f", true, true},
		{"less +!id f", false, true},
		{"less -o log f", false, true},
		{"less -Rolog f", false, true},
		{"less --log-file=x f", false, true},
		{"less -k keys f", false, true},
		{"less --lesskey-src=x f", false, true},
		{"less -p o f", false, false},
		{"more f", true, true},
		{"more +/x f", false, true},
		{"man ls", false, false},
		{"man ls", true, true},
		{"man -P id ls", false, true},
		{"man --pager=id ls", false, true},
		{"man --pag=id ls", false, true},
		{"man -Hid ls", false, true},
		{"man --html=id ls", false, true},
		{"man -C conf ls", false, true},
		{"man -M /x -P id ls", false, true},
		{"man -s 1 ls", false, false},
		// zip, rsync, scp, split, diff3, nc, tcpdump, wget, apt, compilers
		{"zip a.zip f", false, false},
		{"zip -T -TT id a.zip f", false, true},
		{"zip --unzip-command=id -T a.zip f", false, true},
		{"rsync -a a b", false, false},
		{"rsync -e id a h:b", false, true},
		{"rsync -ave id a h:b", false, true},
		{"rsync --rsh=id a h:b", false, true},
		{"rsync --rsync-path=id a h:b", false, true},
		{"scp a h:b", false, false},
		{"scp -S id a h:b", false, true},
		{"scp -o ProxyCommand=id a h:b", false, true},
		{"split --filter=id f", false, true},
		{"split -l 10 f", false, false},
		{"diff3 --diff-program=id a b c", false, true},
		{"sdiff --diff-program=id a b", false, true},
		{"nc -e /bin/sh h 1", false, true},
		{"ncat --sh-exec id h 1", false, true},
		{"nc -z h 1", false, false},
		{"tcpdump -z id -w x", false, true},
		{"tcpdump -n -i eth0", false, false},
		{"tcpdump -D -z id", false, true},
		{"wget --use-askpass=id u", false, true},
		{"wget -q u", false, false},
		{"apt-get -o APT::Update::Pre-Invoke::=id update", false, true},
		{"apt-get -c conf update", false, true},
		{"apt-get -y install x", false, false},
		{"gcc -wrapper id x.c", false, true},
		{"gcc -fplugin=x.so x.c", false, true},
		{"gcc -B/tmp x.c", false, true},
		{"gcc @opts x.c", false, true},
		{"gcc -O2 -o x x.c", false, false},
		{"gcc-12 -wrapper id x.c", false, true},
		// build tools and other command readers: always
		{"make", false, true},
		{"make -n", false, true},
		{"npm test", false, true},
		{"go version", false, true},
		{"terraform plan", false, true},
		{"ansible-playbook site.yml", false, true},
		{"sqlite3 x.db", false, true},
		{"crontab -l", false, true},
		{"ldd /bin/ls", false, true},
		{"openssl dgst -sha256 f", false, false},
		{"openssl req -engine x", false, true},
		{"openssl x509 -config c", false, true},
		{"systemctl status x", false, false},
		{"systemctl edit x", false, true},
		{"zip -TTid a.zip f", false, true},
		{"git log --output=x", false, true},
		{"visudo", false, true},
		// not in the table
		{"ls -la", true, false},
		{"cat f", false, false},
	}
	for _, c := range cases {
		argv := strings.Fields(c.argv)
		arg, why := Gadget(argv, c.pty, argv[0])
		if (why != "") != c.gadget {
			t.Errorf("Gadget(%q, pty=%v) = %q %q, want gadget=%v", c.argv, c.pty, arg, why, c.gadget)
		}
		if why != "" && arg == "" {
			t.Errorf("Gadget(%q): a reason without the argument", c.argv)
		}
	}
}

// A program is found by any of its names: as run, on PATH, resolved.
func TestGadgetNames(t *testing.T) {
	if _, why := Gadget([]string{"vi", "f"}, false, "vi", "vi", "vim.basic"); why == "" {
		t.Error("vi → vim.basic not an editor")
	}
	if _, why := Gadget([]string{"awk", "1"}, false, "awk", "awk", "mawk"); why == "" {
		t.Error("awk → mawk not an interpreter")
	}
	if _, why := Gadget([]string{"mytool", "-exec"}, false, "mytool"); why != "" {
		t.Errorf("unknown program has gadgets: %s", why)
	}
	if !ArgvMatched("git") || !ArgvMatched("find") || ArgvMatched("python3") || ArgvMatched("ls") || ArgvMatched("make") {
		t.Error("ArgvMatched: git and find are argv-matched; python3, make (always) and ls (not listed) are not")
	}
}

func TestParsePatternArgv(t *testing.T) {
	for _, c := range []struct {
		p    string
		head string
		args []string
		bad  bool
	}{
		{p: "/usr/bin/git", head: "/usr/bin/git"},
		{p: "git", head: "git"},
		{p: "/usr/bin/git status", head: "/usr/bin/git", args: []string{"status"}},
		{p: "git log '--format=%h %s' -n 3", head: "git", args: []string{"log", "--format=%h %s", "-n", "3"}},
		{p: `/usr/bin/grep 'a b' "c"`, head: "/usr/bin/grep", args: []string{"a b", "c"}},
		{p: "/usr/bin/git status ", bad: true},
		{p: "/usr/bin/git  status", head: "/usr/bin/git", bad: true},
		{p: "/usr/bin/git $X", bad: true},
		{p: "/usr/bin/git *", bad: true},
		{p: "/usr/bin/git a; id", bad: true},
		{p: "/usr/bin/git a | id", bad: true},
		{p: "/usr/bin/git a > x", bad: true},
		{p: "/usr/bin/git '$(id)'", bad: true},
		{p: "/usr/bin/git ~", bad: true},
		{p: "** status", bad: true},
		{p: "rel/git status", bad: true},
	} {
		head, args, err := ParsePattern(c.p)
		if (err != nil) != c.bad {
			t.Errorf("ParsePattern(%q) err = %v, want bad=%v", c.p, err, c.bad)
			continue
		}
		if err == nil && (head != c.head || !slices.Equal(args, c.args)) {
			t.Errorf("ParsePattern(%q) = %q %q, want %q %q", c.p, head, args, c.head, c.args)
		}
	}
	for _, args := range [][]string{{"status"}, {"log", "--format=%h %s"}, {"it's", "a\"b", "$HOME", "*", "{a,b}", "~"}, {""}} {
		p, ok := FormatArgvPattern("/usr/bin/git", args)
		if !ok {
			t.Errorf("FormatArgvPattern(%q) failed", args)
			continue
		}
		if _, got, err := ParsePattern(p); err != nil || !slices.Equal(got, args) {
			t.Errorf("round trip %q → %q → %q %v", args, p, got, err)
		}
	}
	if p, ok := FormatArgvPattern("/usr/bin/git", []string{"a\x01b"}); ok {
		t.Errorf("control character formatted as %q", p)
	}
	if _, ok := FormatArgvPattern("/usr/bin/git", nil); ok {
		t.Error("no arguments formatted")
	}
}

// Argv patterns match exactly; an argv with a gadget misses every entry;
// allow-always persists argv patterns for argv-matched programs.
func TestPolicyArgvPatternsAndGadgets(t *testing.T) {
	h := newHost(t)
	pol := func(patterns ...string) Policy {
		p := Policy{Security: vocab.SecurityAllowlist, Ask: vocab.AskOff}
		for i, pat := range patterns {
			p.Allowlist = append(p.Allowlist, Entry{ID: string(rune('a' + i)), Pattern: pat})
		}
		return p
	}
	for _, c := range []struct {
		p    Policy
		cmd  string
		want vocab.Decision
		why  string
	}{
		{pol("/usr/bin/git status"), "git status", vocab.DecisionRun, "allowlist satisfied"},
		{pol("git status"), "git status", vocab.DecisionRun, "allowlist satisfied"},
		{pol("/usr/bin/git status"), "git status -s", vocab.DecisionDeny, "not allowlisted"},
		{pol("/usr/bin/git status"), "git -c core.fsmonitor=id status", vocab.DecisionDeny, "not allowlisted"},
		{pol("/usr/bin/git"), "git -c core.fsmonitor=id status", vocab.DecisionDeny, "sets configuration"},
		{pol("/usr/bin/git"), "git log", vocab.DecisionRun, "allowlist satisfied"},
		{pol("/usr/bin/git -c core.pager=id log"), "git -c core.pager=id log", vocab.DecisionDeny, "sets configuration"},
		{pol("/usr/bin/find"), "find . -exec id ;", vocab.DecisionDeny, "runs a command"},
		{pol("/usr/bin/find"), "find . -name x", vocab.DecisionRun, "allowlist satisfied"},
		{pol("/usr/bin/mawk", "/usr/bin/gawk", "/usr/bin/awk"), "awk 1", vocab.DecisionDeny, "interpreter"},
		{pol("/usr/bin/man"), "man ls", vocab.DecisionRun, "allowlist satisfied"},
		{Policy{Security: vocab.SecurityAllowlist, Ask: vocab.AskOff, PTY: true, Allowlist: []Entry{{ID: "m", Pattern: "/usr/bin/man"}}}, "man ls", vocab.DecisionDeny, "pager"},
		{Policy{Security: vocab.SecurityAllowlist, Ask: vocab.AskOnMiss, PTY: true, Allowlist: []Entry{{ID: "m", Pattern: "/usr/bin/man"}}}, "man ls", vocab.DecisionApprovalPending, "pager"},
		{pol("ls"), "./ls", vocab.DecisionDeny, "not allowlisted"},
		{pol("ls"), "{evil}/ls", vocab.DecisionDeny, "not allowlisted"},
		{pol("ls"), "ls", vocab.DecisionRun, "allowlist satisfied"},
		{Policy{Security: vocab.SecurityAllowlist, Ask: vocab.AskOff, UntrustedDirs: []string{h.evil}, Allowlist: []Entry{{ID: "e", Pattern: h.evil + "/ls"}}}, "{evil}/ls", vocab.DecisionDeny, "a sandbox can write"},
		{Policy{Security: vocab.SecurityAllowlist, Ask: vocab.AskOff, UntrustedDirs: []string{"/usr"}}, "head -n 1", vocab.DecisionDeny, "a sandbox can write"},
	} {
		cmd := h.expand(c.cmd)
		env := h.env
		env.Cwd = h.evil
		a := Analyze(cmd, env)
		v := c.p.Evaluate(a)
		if v.Decision != c.want || !strings.Contains(v.Reason, c.why) {
			t.Errorf("%v %q → %s (%s), want %s containing %q", patterns(c.p), cmd, v.Decision, v.Reason, c.want, c.why)
		}
	}
	for cmd, want := range map[string][]string{
		"git status":                {"/usr/bin/git status"},
		"git log '--format=%h %s'":  {"/usr/bin/git log '--format=%h %s'"},
		"git -c core.pager=id log":  nil,
		"git":                       nil,
		"ls -la && git status":      {"/usr/bin/ls", "/usr/bin/git status"},
		"awk 1":                     nil,
		"find . -name x -print":     {"/usr/bin/find . -name x -print"},
		"find . -exec id ';'":       nil,
		"vim x":                     nil,
		"bash -c 'git diff --stat'": {"/usr/bin/git diff --stat"},
	} {
		a := Analyze(cmd, h.env)
		if got := PersistablePaths(a); !slices.Equal(got, want) {
			t.Errorf("PersistablePaths(%q) = %q, want %q", cmd, got, want)
		}
	}
}

func patterns(p Policy) []string {
	var out []string
	for _, e := range p.Allowlist {
		out = append(out, e.Pattern)
	}
	return out
}

// An executable in a directory another user owns, or that group/others
// can write, never satisfies an entry (a sandbox user's workspace).
func TestPolicyInsecureExecutableDir(t *testing.T) {
	h := newHost(t)
	dir := filepath.Join(h.ws, "shared")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	tool := filepath.Join(dir, "tool")
	writeExec(t, tool, "#!/bin/sh\nexit 0\n")
	p := Policy{Security: vocab.SecurityAllowlist, Ask: vocab.AskOff, Allowlist: []Entry{{ID: "t", Pattern: tool}}}
	if v := p.Evaluate(Analyze(tool, h.env)); v.Decision != vocab.DecisionRun {
		t.Fatalf("owner-only dir: %s (%s)", v.Decision, v.Reason)
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if v := p.Evaluate(Analyze(tool, h.env)); v.Decision != vocab.DecisionDeny || !strings.Contains(v.Reason, "writable by group or others") {
		t.Fatalf("world-writable dir: %s (%s)", v.Decision, v.Reason)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// A symlink to a trusted binary in a writable directory: the rebuilt
	// line executes the link, which others could swap after the check.
	link := filepath.Join(dir, "ls")
	if err := os.Symlink("/usr/bin/ls", link); err != nil {
		t.Fatal(err)
	}
	q := Policy{Security: vocab.SecurityAllowlist, Ask: vocab.AskOff, Allowlist: []Entry{{ID: "l", Pattern: "/usr/bin/ls"}}}
	if v := q.Evaluate(Analyze(link, h.env)); v.Decision != vocab.DecisionRun {
		t.Fatalf("link in an owner-only dir: %s (%s)", v.Decision, v.Reason)
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if v := q.Evaluate(Analyze(link, h.env)); v.Decision != vocab.DecisionDeny || !strings.Contains(v.Reason, "writable by group or others") {
		t.Fatalf("link in a world-writable dir: %s (%s)", v.Decision, v.Reason)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() != 0 {
		return
	}
	if err := os.Chown(dir, 1000, 1000); err != nil {
		t.Fatal(err)
	}
	if v := p.Evaluate(Analyze(tool, h.env)); v.Decision != vocab.DecisionDeny || !strings.Contains(v.Reason, "owned by uid 1000") {
		t.Fatalf("dir of uid 1000: %s (%s)", v.Decision, v.Reason)
	}
}

// env cannot unset the host's pinned LESSSECURE, and env -i sets it again.
func TestEnvKeepsPinnedVariables(t *testing.T) {
	h := newHost(t)
	a := Analyze("env -u LESSSECURE git log", h.env)
	if a.OK || !hasRule(a, RuleEnvBlocked) {
		t.Fatalf("env -u LESSSECURE accepted: %s", a.Reason)
	}
	a = Analyze("env --unset=LESSSECURE git log", h.env)
	if a.OK {
		t.Fatal("env --unset=LESSSECURE accepted")
	}
	a = Analyze("env LESSSECURE=0 git log", h.env)
	if a.OK {
		t.Fatal("env LESSSECURE=0 accepted")
	}
	a = Analyze("env -i git log", h.env)
	if !a.OK || !strings.Contains(a.Rebuilt, " -i 'EDITOR=/bin/false' 'GIT_EDITOR=/bin/false' 'LESSSECURE=1' 'PAGER=/bin/cat'") {
		t.Fatalf("env -i not rebuilt with LESSSECURE=1: %s %s", a.Reason, a.Rebuilt)
	}
}

// An approval decided for a piped run does not admit the same command with
// a PTY: the binding covers the terminal.
func TestGateApprovalBindsPTY(t *testing.T) {
	h := newHost(t)
	st, err := OpenStore(filepath.Join(t.TempDir(), "approvals.json"))
	if err != nil {
		t.Fatal(err)
	}
	g := &Gate{Store: st, Config: GateConfig{Security: vocab.SecurityAllowlist, Ask: vocab.AskOnMiss}}
	ctx := t.Context()
	req := GateRequest{Line: "man ls", Argv: []string{"/bin/sh", "-c", "man ls"}, Cwd: h.ws, Path: h.env.Path}
	v, err := g.Check(ctx, req)
	if err != nil || v.Pending == nil {
		t.Fatalf("man ls did not ask: %v %+v", err, v)
	}
	if err := st.Resolve(ctx, v.Pending.ID, vocab.AllowOnce); err != nil {
		t.Fatal(err)
	}
	pty := req
	pty.PTY = true
	w, err := g.Check(ctx, pty)
	if err != nil {
		t.Fatal(err)
	}
	if w.Decision != vocab.DecisionApprovalPending || w.Pending == nil || w.Pending.ID == v.Pending.ID {
		t.Fatalf("the piped run's approval admitted a PTY run: %s %+v", w.Decision, w.Pending)
	}
	if !strings.Contains(w.Pending.Explain, "terminal: PTY") {
		t.Errorf("the PTY is not shown to the human: %q", w.Pending.Explain)
	}
	// The piped run itself still uses its approval, once.
	u, err := g.Check(ctx, req)
	if err != nil || u.Decision != vocab.DecisionRun {
		t.Fatalf("approved piped run: %v %s %s", err, u.Decision, u.Reason)
	}
}
