package sessions_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandboxctl/sandboxctl/sessions/toolapi"

	"github.com/sandboxctl/sandboxctl/api"

	"github.com/sandboxctl/sandboxctl/envguard"
	"github.com/sandboxctl/sandboxctl/hostexec"
	"github.com/sandboxctl/sandboxctl/hostexec/guard"
	"github.com/sandboxctl/sandboxctl/sessions"
	"github.com/sandboxctl/sandboxctl/sessions/config"
	"github.com/sandboxctl/sandboxctl/vocab"
)

// Attack replays of issue 12 items 4, 5 and 6 against the real gateway host:
// a Manager over hostexec.Runner (real processes, real PTYs) judged by the
// real GateGuard over an approvals.json in a temp dir. A marker file proves
// that a command ran; a denied result or a finished process settles that it
// did not.

type guardedGateway struct {
	m       *sessions.Manager
	store   *guard.Store
	workdir string
}

// newGuardedGateway: security allowlist, ask off (a miss is denied at once),
// the inherited environment environ (PATH and HOME added when missing), and
// untrusted as the sandbox-writable directories.
func newGuardedGateway(t *testing.T, environ []string, untrusted []string) *guardedGateway {
	t.Helper()
	return newGuardedGatewayPrepend(t, environ, untrusted, nil)
}

// newGuardedGatewayPrepend is newGuardedGateway with exec.pathPrepend.
func newGuardedGatewayPrepend(t *testing.T, environ, untrusted, prepend []string) *guardedGateway {
	t.Helper()
	if !slicesHasPrefix(environ, "PATH=") {
		environ = append(environ, "PATH=/usr/local/bin:/usr/bin:/bin")
	}
	if !slicesHasPrefix(environ, "HOME=") {
		environ = append(environ, "HOME="+t.TempDir())
	}
	r, err := hostexec.NewRunner(context.Background(), hostexec.Options{Shell: "/bin/sh", Environ: environ, PathPrepend: prepend, Logf: t.Logf})
	if err != nil {
		t.Fatalf("hostexec.NewRunner: %v", err)
	}
	store, err := guard.OpenStore(filepath.Join(t.TempDir(), "approvals.json"))
	if err != nil {
		t.Fatal(err)
	}
	gate := &guard.Gate{Store: store, Config: guard.GateConfig{
		Security: vocab.SecurityAllowlist, Ask: vocab.AskOff, AskFallback: vocab.SecurityDeny,
		UntrustedDirs: untrusted,
		EnvCheck: func(assign map[string]string) error {
			return envguard.CheckRequest(vocab.HostGateway, assign)
		},
	}}
	wd := t.TempDir()
	cfg := config.Default()
	cfg.Exec.Host, cfg.Exec.Security, cfg.Exec.Ask = "gateway", "allowlist", "off"
	m, err := sessions.New(sessions.Options{
		Config: cfg,
		Hosts:  map[vocab.Host]sessions.Host{"gateway": sessions.NewGatewayHost(r, wd)},
		Guard:  sessions.NewGateGuard(gate, r),
		Logf:   t.Logf,
		Getenv: func(string) string { return "" },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := m.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return &guardedGateway{m: m, store: store, workdir: wd}
}

func slicesHasPrefix(list []string, prefix string) bool {
	for _, s := range list {
		if strings.HasPrefix(s, prefix) {
			return true
		}
	}
	return false
}

func (g *guardedGateway) allow(t *testing.T, patterns ...string) {
	t.Helper()
	for _, p := range patterns {
		if _, err := g.store.AddAllowlist(context.Background(), "", p); err != nil {
			t.Fatalf("allowlist %q: %v", p, err)
		}
	}
}

func (g *guardedGateway) exec(t *testing.T, p api.ExecParams) (api.Result, error) {
	t.Helper()
	if p.YieldMs == nil {
		p.YieldMs = new(float64(20000))
	}
	return g.m.Exec(context.Background(), p)
}

// markerAppears polls for path until deadline: the attack's command ran.
func markerAppears(path string, within time.Duration) bool {
	deadline := time.Now().Add(within)
	for {
		if _, err := os.Stat(path); err == nil {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func writeExecutable(t *testing.T, path, script string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
}

// settledRefused fails the test unless the exec was refused before anything
// ran (an error matching ErrInvalidInput, or a denied result) and the marker
// is absent. Returns a description for logs.
func settledRefused(t *testing.T, what string, r api.Result, err error, marker string) {
	t.Helper()
	if _, serr := os.Stat(marker); serr == nil {
		t.Fatalf("%s: ATTACK WORKED: marker %s exists (result %v, err %v)", what, marker, r.Details, err)
	}
	switch {
	case err != nil && errors.Is(err, toolapi.ErrInvalidInput):
		t.Logf("%s: refused: %v", what, err)
	case err != nil:
		t.Fatalf("%s: unexpected error: %v", what, err)
	case r.Details.Status == api.StatusDenied:
		t.Logf("%s: denied: %v", what, r.Details.Reason)
	default:
		if markerAppears(marker, 5*time.Second) {
			t.Fatalf("%s: ATTACK WORKED: marker %s appeared (result %v)", what, marker, r.Details)
		}
		t.Fatalf("%s: not refused: status %v (%s)", what, r.Details.Status, firstText(r))
	}
}

func firstText(r api.Result) string {
	if len(r.Content) == 0 {
		return ""
	}
	return r.Content[0].Text
}

// waitOutput polls a session's output until it contains want (deadline 20 s).
func (g *guardedGateway) waitOutput(t *testing.T, id, want string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	var all strings.Builder
	for {
		r, err := g.m.Process(context.Background(), api.ProcessParams{Action: "poll", SessionID: id, TimeoutMs: new(float64(500))})
		if err != nil {
			t.Fatal(err)
		}
		all.WriteString(firstText(r))
		if strings.Contains(all.String(), want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("session %s never printed %q: %q", id, want, all.String())
		}
	}
}

// waitDone polls a session until it is no longer running (deadline 20 s).
func (g *guardedGateway) waitDone(t *testing.T, id string) api.Result {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		r, err := g.m.Process(context.Background(), api.ProcessParams{Action: "poll", SessionID: id, TimeoutMs: new(float64(1000))})
		if err != nil {
			t.Fatal(err)
		}
		if r.Details.Status != api.StatusRunning {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("session %s still running", id)
		}
	}
}

// Item 4: a bare allowlist name matched any file of that name. `ls` is
// allowlisted; an executable ./ls in the working directory (a workspace a
// sandbox writes) must not run as "ls".
func TestSecurityBareNameMatchesOnlyTrustedPathHits(t *testing.T) {
	ws := t.TempDir() // the sandbox workspace root
	agentWs := filepath.Join(ws, "agent-main")
	if err := os.MkdirAll(agentWs, 0o755); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(t.TempDir(), "pwned")
	writeExecutable(t, filepath.Join(agentWs, "ls"), "#!/bin/sh\ntouch "+marker+"\n")
	g := newGuardedGateway(t, nil, []string{ws})
	g.allow(t, "ls")

	// The real ls still runs.
	r, err := g.exec(t, api.ExecParams{Command: "ls", Workdir: agentWs})
	if err != nil || r.Details.Status != api.StatusCompleted {
		t.Fatalf("plain ls: %v %v", r.Details, err)
	}
	for _, cmd := range []string{"./ls", agentWs + "/ls", "env ./ls", "nice ./ls"} {
		r, err := g.exec(t, api.ExecParams{Command: cmd, Workdir: agentWs})
		settledRefused(t, cmd, r, err, marker)
	}
	// A path pattern that reaches into the workspace does not match either.
	g.allow(t, ws+"/**")
	r, err = g.exec(t, api.ExecParams{Command: agentWs + "/ls", Workdir: agentWs})
	settledRefused(t, "path pattern into the workspace", r, err, marker)
	// Without the workspace configured as untrusted, the bare name still
	// matches only a PATH hit in the trusted dirs.
	g3 := newGuardedGateway(t, nil, nil)
	g3.allow(t, "ls")
	r, err = g3.exec(t, api.ExecParams{Command: "./ls", Workdir: agentWs})
	settledRefused(t, "./ls, workspace not configured", r, err, marker)
	// Nor a PATH that puts the workspace first (exec.pathPrepend).
	g2 := newGuardedGatewayPrepend(t, nil, []string{ws}, []string{agentWs})
	g2.allow(t, "ls")
	r, err = g2.exec(t, api.ExecParams{Command: "ls", Workdir: agentWs})
	settledRefused(t, "workspace first on PATH", r, err, marker)
}

// Item 6: LESS (and other variables that make a program run a command or
// load code) in the request env. man is allowlisted and runs in a real PTY.
func TestSecurityEnvLessRunsCommandInPTY(t *testing.T) {
	if _, err := exec.LookPath("man"); err != nil {
		t.Fatalf("man is needed for this attack test (scripts/toolchain.sh installs man-db): %v", err)
	}
	g := newGuardedGateway(t, nil, nil)
	g.allow(t, "/usr/bin/man")
	marker := filepath.Join(t.TempDir(), "pwned")
	r, err := g.exec(t, api.ExecParams{Command: "man ls", PTY: true, Background: true,
		Env: map[string]string{"LESS": "+!touch " + marker + "\n"}})
	if err == nil && r.Details.Status == api.StatusRunning {
		defer g.m.Process(context.Background(), api.ProcessParams{Action: "kill", SessionID: r.Details.SessionID})
		if markerAppears(marker, 10*time.Second) {
			t.Fatalf("ATTACK WORKED: LESS=+!touch in the request env ran a command (marker %s)", marker)
		}
	}
	settledRefused(t, "LESS in the request env", r, err, marker)
}

// perlLibDir returns a directory with a strict.pm that touches marker.
func perlLibDir(t *testing.T, marker string) string {
	d := t.TempDir()
	pm := "package strict; BEGIN { open(my $f, '>', '" + marker + "'); close($f); } sub import {} sub unimport {} 1;\n"
	if err := os.WriteFile(filepath.Join(d, "strict.pm"), []byte(pm), 0o644); err != nil {
		t.Fatal(err)
	}
	return d
}

// Item 6: PERLLIB (PERL5LIB was refused, PERLLIB not) made an allowlisted
// perl script load attacker code, from the request env and from the
// daemon's inherited environment.
func TestSecurityEnvPerllibLoadsCode(t *testing.T) {
	if _, err := exec.LookPath("shasum"); err != nil {
		t.Fatalf("shasum (perl) is needed for this attack test: %v", err)
	}
	marker := filepath.Join(t.TempDir(), "pwned")
	lib := perlLibDir(t, marker)

	g := newGuardedGateway(t, nil, nil)
	g.allow(t, "/usr/bin/shasum")
	r, err := g.exec(t, api.ExecParams{Command: "shasum --version", Env: map[string]string{"PERLLIB": lib}})
	settledRefused(t, "PERLLIB in the request env", r, err, marker)

	// Inherited by the daemon: dropped before any command starts.
	g2 := newGuardedGateway(t, []string{"PERLLIB=" + lib, "LESS=+!touch " + marker + "\n", "GIT_CONFIG=" + lib + "/gitconfig"}, nil)
	g2.allow(t, "/usr/bin/shasum")
	r, err = g2.exec(t, api.ExecParams{Command: "shasum --version"})
	if err != nil || r.Details.Status != api.StatusCompleted {
		t.Fatalf("shasum --version: %v %v", r.Details, err)
	}
	if _, serr := os.Stat(marker); serr == nil {
		t.Fatalf("ATTACK WORKED: PERLLIB inherited by the daemon loaded code into an allowlisted command (marker %s)", marker)
	}
}

// Item 6: every variable the issue found accepted is refused in a request
// on the gateway (the list and its principle are tested in envguard).
func TestSecurityEnvReportedVariablesRefused(t *testing.T) {
	g := newGuardedGateway(t, nil, nil)
	g.allow(t, "/usr/bin/true")
	marker := filepath.Join(t.TempDir(), "never")
	for _, k := range []string{"LESS", "PERLLIB", "GIT_CONFIG", "GIT_TRACE", "GIT_TRACE2_EVENT", "TAR_OPTIONS", "MANOPT",
		"LESSKEYIN", "LOCPATH", "NLSPATH", "TERMINFO", "LESSSECURE", "MANPAGER", "GIT_PAGER", "PYTHONWARNINGS"} {
		r, err := g.exec(t, api.ExecParams{Command: "true", Env: map[string]string{k: "/tmp/x"}})
		settledRefused(t, k, r, err, marker)
	}
}

// Item 5: allow-always on `git status` persisted /usr/bin/git, and
// `git -c core.fsmonitor='touch X' status` then ran without asking.
func TestSecurityGitApprovalDoesNotAllowConfigGadgets(t *testing.T) {
	repo := t.TempDir()
	if out, err := exec.Command("git", "init", "-q", repo).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
	g := newGuardedGateway(t, nil, nil)
	// A human approves `git status` with allow-always, as the approvals
	// API does: request, then resolve.
	gate := &guard.Gate{Store: g.store, Config: guard.GateConfig{Security: vocab.SecurityAllowlist, Ask: vocab.AskOnMiss}}
	v, err := gate.Check(context.Background(), guard.GateRequest{Line: "git status", Argv: []string{"/bin/sh", "-c", "git status"},
		Cwd: repo, Path: "/usr/local/bin:/usr/bin:/bin"})
	if err != nil || v.Pending == nil {
		t.Fatalf("git status did not ask: %v %+v", err, v)
	}
	if err := g.store.Resolve(context.Background(), v.Pending.ID, vocab.AllowAlways); err != nil {
		t.Fatal(err)
	}
	r, err := g.exec(t, api.ExecParams{Command: "git status", Workdir: repo})
	if err != nil || r.Details.Status != api.StatusCompleted {
		t.Fatalf("approved git status does not run: %v %v", r.Details, err)
	}
	marker := filepath.Join(t.TempDir(), "pwned")
	for _, cmd := range []string{
		"git -c core.fsmonitor='touch " + marker + "' status",
		"git -c core.pager='touch " + marker + "' -p status",
		"git --config-env=core.fsmonitor=HOME status",
		"git status --short",
	} {
		r, err := g.exec(t, api.ExecParams{Command: cmd, Workdir: repo})
		settledRefused(t, cmd, r, err, marker)
	}
}

// Item 5: binaries allowlisted by path ran every command-running option of
// their arguments.
func TestSecurityAllowlistedBinaryGadgets(t *testing.T) {
	g := newGuardedGateway(t, nil, nil)
	g.allow(t, "/usr/bin/find", "/usr/bin/sed", "/usr/bin/awk", "/usr/bin/gawk", "/usr/bin/mawk", "/usr/bin/tar", "/usr/bin/sort", "/usr/bin/vim.basic", "/usr/bin/zip", "/usr/bin/make", "/usr/bin/man", "/usr/bin/less")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("b\na\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Plain uses still run.
	for _, cmd := range []string{"find . -name f", "sort f", "tar -cf a.tar f"} {
		r, err := g.exec(t, api.ExecParams{Command: cmd, Workdir: dir})
		if err != nil || r.Details.Status != api.StatusCompleted {
			t.Fatalf("%s: %v %v", cmd, r.Details, err)
		}
	}
	var big strings.Builder
	for i := range 200000 {
		fmt.Fprintf(&big, "%d\n", i)
	}
	if err := os.WriteFile(filepath.Join(dir, "big"), []byte(big.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	// {m} is the marker, {x} an executable that creates it (for options
	// that exec a program rather than a shell string).
	for i, tmpl := range []string{
		"find . -name f -exec touch {m} ';'",
		"find . -name f -execdir touch {m} ';'",
		"find . -fprint {m}",
		"sed -n '1e touch {m}' f",
		"sed -n 'w {m}' f",
		"sed 's|a|touch {m}|e' f",
		"awk 'BEGIN{system(\"touch {m}\")}'",
		"tar -cf x.tar --checkpoint=1 --checkpoint-action=exec='touch {m}' f",
		"tar -xf a.tar --to-command='touch {m}'",
		"tar -c -I 'touch {m}' -f y.tar f",
		"sort -S 1k --compress-program={x} big",
		"sort -o {m} f",
		"vim -es -c '!touch {m}' -c q",
		"zip -T -TT 'touch {m}' z.zip f",
	} {
		mdir := t.TempDir()
		marker := filepath.Join(mdir, fmt.Sprintf("pwned%d", i))
		evil := filepath.Join(mdir, "evil")
		writeExecutable(t, evil, "#!/bin/sh\ntouch "+marker+"\ncat\n")
		cmd := strings.NewReplacer("{m}", marker, "{x}", evil).Replace(tmpl)
		r, err := g.exec(t, api.ExecParams{Command: cmd, Workdir: dir})
		settledRefused(t, cmd, r, err, marker)
	}
}

// Item 5: a pager run in a PTY takes shell escapes typed by the agent. man
// is allowlisted; `!touch X` typed into its pager must not run.
func TestSecurityPagerShellEscapeInPTY(t *testing.T) {
	g := newGuardedGateway(t, nil, nil)
	g.allow(t, "/usr/bin/man", "/usr/bin/less")
	marker := filepath.Join(t.TempDir(), "pwned")
	hostname := filepath.Join(t.TempDir(), "hostname")
	if err := os.WriteFile(hostname, []byte("just-a-file\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"man ls": "ls", "less " + hostname: "just-a-file"}
	for _, cmd := range []string{"man ls", "less " + hostname} {
		r, err := g.exec(t, api.ExecParams{Command: cmd, PTY: true, Background: true})
		if err == nil && r.Details.Status == api.StatusRunning {
			id := r.Details.SessionID
			// Wait for the pager to draw, then type the escape.
			g.waitOutput(t, id, want[cmd])
			if _, err := g.m.Process(context.Background(), api.ProcessParams{Action: "write", SessionID: id, Data: "!touch " + marker + "\n"}); err != nil {
				t.Fatal(err)
			}
			if markerAppears(marker, 10*time.Second) {
				g.m.Process(context.Background(), api.ProcessParams{Action: "kill", SessionID: id})
				t.Fatalf("ATTACK WORKED: %s in a PTY ran a typed shell escape (marker %s)", cmd, marker)
			}
			g.m.Process(context.Background(), api.ProcessParams{Action: "kill", SessionID: id})
		}
		settledRefused(t, cmd+" in a PTY", r, err, marker)
	}
}

// Item 5/6: a program that is not a pager itself starts one in a PTY (git
// log → less). `!touch X` typed into it must not run: every gateway command
// gets PAGER=/bin/cat and LESSSECURE=1 (envguard.Pinned), which the request
// cannot change. The repository's own core.pager = less (the operator's
// repository: trusted) makes git start less anyway, so this exercises
// LESSSECURE.
func TestSecurityPagerOfAllowlistedProgramInPTY(t *testing.T) {
	repo := t.TempDir()
	msg := "subject\n\n" + strings.Repeat("a long body line\n", 120)
	for _, args := range [][]string{{"init", "-q", repo}, {"-C", repo, "config", "core.pager", "less"},
		{"-C", repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", msg}} {
		if out, err := exec.Command("git", args...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	g := newGuardedGateway(t, nil, nil)
	g.allow(t, "/usr/bin/git log")
	marker := filepath.Join(t.TempDir(), "pwned")
	r, err := g.exec(t, api.ExecParams{Command: "git log", Workdir: repo, PTY: true, Background: true})
	if err != nil || r.Details.Status != api.StatusRunning {
		t.Fatalf("git log in a PTY: %v %v", r.Details, err)
	}
	id := r.Details.SessionID
	g.waitOutput(t, id, "a long body line")
	// The typed text is read as less commands too (h opens help), so
	// several q leave help and then less.
	for _, keys := range []string{"!touch " + marker + "\n", "qqqqqq"} {
		if _, err := g.m.Process(context.Background(), api.ProcessParams{Action: "write", SessionID: id, Data: keys}); err != nil {
			t.Fatal(err)
		}
	}
	// q ends less and git: the session's end settles whether the escape ran.
	end := g.waitDone(t, id)
	if _, err := os.Stat(marker); err == nil {
		t.Fatalf("ATTACK WORKED: a shell escape typed into git's pager ran (marker %s)", marker)
	}
	t.Logf("session ended %v; marker absent", end.Details.Status)
}

// Item 4/5 chained: a sandbox writes .git/config (core.fsmonitor) into its
// workspace; an approved `git status` run on the gateway in that workspace
// must not run the repository's command.
func TestSecurityGitRepoConfigInWorkspace(t *testing.T) {
	ws := t.TempDir() // the sandbox workspace root
	repo := filepath.Join(ws, "agent-main")
	if out, err := exec.Command("git", "init", "-q", repo).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
	marker := filepath.Join(t.TempDir(), "pwned")
	f, err := os.OpenFile(filepath.Join(repo, ".git", "config"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(f, "[core]\n\tfsmonitor = touch %s\n", marker)
	f.Close()
	g := newGuardedGateway(t, nil, []string{ws})
	g.allow(t, "/usr/bin/git status")
	r, err := g.exec(t, api.ExecParams{Command: "git status", Workdir: repo})
	settledRefused(t, "git status in a sandbox-written repository", r, err, marker)
	// The same approved command still runs in a repository the operator owns.
	own := t.TempDir()
	if out, err := exec.Command("git", "init", "-q", own).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
	r, err = g.exec(t, api.ExecParams{Command: "git status", Workdir: own})
	if err != nil || r.Details.Status != api.StatusCompleted {
		t.Fatalf("git status in the operator's repository: %v %v", r.Details, err)
	}
}

// Item 5/6: an allowlisted program opens an editor in a PTY (git commit
// without -m → vi), whose :!cmd the agent can type. Every gateway command
// gets EDITOR, VISUAL and GIT_EDITOR=/bin/false (envguard.Pinned): git
// fails at once instead.
func TestSecurityEditorOfAllowlistedProgramInPTY(t *testing.T) {
	repo := t.TempDir()
	if out, err := exec.Command("git", "init", "-q", repo).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
	g := newGuardedGateway(t, nil, nil)
	for _, kv := range [][2]string{{"user.name", "t"}, {"user.email", "t@t"}} {
		if out, err := exec.Command("git", "-C", repo, "config", kv[0], kv[1]).CombinedOutput(); err != nil {
			t.Fatalf("git config: %v %s", err, out)
		}
	}
	g.allow(t, "/usr/bin/git commit --allow-empty")
	marker := filepath.Join(t.TempDir(), "pwned")
	r, err := g.exec(t, api.ExecParams{Command: "git commit --allow-empty", Workdir: repo, PTY: true, Background: true})
	if err != nil || r.Details.Status != api.StatusRunning {
		t.Fatalf("git commit in a PTY: %v %v", r.Details, err)
	}
	id := r.Details.SessionID
	// Either an editor draws its screen (vi shows ~ lines) or git ends.
	deadline := time.Now().Add(20 * time.Second)
	var out strings.Builder
	for {
		p, err := g.m.Process(context.Background(), api.ProcessParams{Action: "poll", SessionID: id, TimeoutMs: new(float64(500))})
		if err != nil {
			t.Fatal(err)
		}
		out.WriteString(firstText(p))
		if p.Details.Status != api.StatusRunning {
			break
		}
		if strings.Contains(out.String(), "~") {
			g.m.Process(context.Background(), api.ProcessParams{Action: "write", SessionID: id, Data: "\x1b:!touch " + marker + "\n"})
			if markerAppears(marker, 10*time.Second) {
				g.m.Process(context.Background(), api.ProcessParams{Action: "kill", SessionID: id})
				t.Fatalf("ATTACK WORKED: :!touch typed into the editor git commit opened ran (marker %s)", marker)
			}
			g.m.Process(context.Background(), api.ProcessParams{Action: "kill", SessionID: id})
			t.Fatalf("an editor opened in the PTY: %q", out.String())
		}
		if time.Now().After(deadline) {
			t.Fatalf("git commit neither ended nor opened an editor: %q", out.String())
		}
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatalf("ATTACK WORKED: marker %s", marker)
	}
	if !strings.Contains(out.String(), "/bin/false") {
		t.Fatalf("git commit did not fail on the pinned editor: %q", out.String())
	}
}
