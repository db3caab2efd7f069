package sessions_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandboxctl/sandboxctl/api"

	"github.com/sandboxctl/sandboxctl/envguard"
	"github.com/sandboxctl/sandboxctl/hostexec"
	"github.com/sandboxctl/sandboxctl/hostexec/guard"
	"github.com/sandboxctl/sandboxctl/internal/testbuild"
	"github.com/sandboxctl/sandboxctl/sessions"
	"github.com/sandboxctl/sandboxctl/sessions/config"
	"github.com/sandboxctl/sandboxctl/vocab"
)

// Attack replays of issue 25 findings 3 (options the gadget table missed:
// clusters, short aliases, abbreviations, config commands, path options)
// and 4 (variables a program reads as options or commands) against the real
// gateway: a Manager over hostexec.Runner judged by the real GateGuard, with
// exec.cwd (the guard's Workspace) set. A marker file proves a command ran
// or a file was written.

// newWorkspaceGateway is newGuardedGateway with the external-directory
// check on: ws is the gateway's exec.cwd and the guard's Workspace, and
// the real sandboxctld as the confining launcher.
func newWorkspaceGateway(t *testing.T, ws string) *guardedGateway {
	t.Helper()
	// Lines of the path-checked programs (tar, zip, unzip, wget, cd, cp
	// ...) run confined to the workspace, through sandboxctld.
	launcher, err := sharedLauncher()
	if err != nil {
		t.Fatal(err)
	}
	r, err := hostexec.NewRunner(context.Background(), hostexec.Options{Shell: "/bin/sh", Logf: t.Logf, Launcher: launcher,
		Environ: []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	store, err := guard.OpenStore(filepath.Join(t.TempDir(), "approvals.json"))
	if err != nil {
		t.Fatal(err)
	}
	gate := &guard.Gate{Store: store, Config: guard.GateConfig{
		Security: vocab.SecurityAllowlist, Ask: vocab.AskOff, AskFallback: vocab.SecurityDeny, Workspace: ws,
		EnvCheck: func(assign map[string]string) error { return envguard.CheckRequest(vocab.HostGateway, assign) },
	}}
	cfg := config.Default()
	cfg.Exec.Host, cfg.Exec.Security, cfg.Exec.Ask = "gateway", "allowlist", "off"
	m, err := sessions.New(sessions.Options{
		Config: cfg,
		Hosts:  map[vocab.Host]sessions.Host{"gateway": sessions.NewGatewayHost(r, ws)},
		Guard:  sessions.NewGateGuard(gate, r),
		Logf:   t.Logf, Getenv: func(string) string { return "" },
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
	return &guardedGateway{m: m, store: store, workdir: ws}
}

// sharedLauncher builds sandboxctld once for the package's tests (a build
// per test took minutes on a loaded machine); TestMain removes it.
var sharedLauncher = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "sandboxctl-sessions-test-")
	if err != nil {
		return "", err
	}
	sharedLauncherDir.Store(&dir)
	bins, err := testbuild.Build(dir, "sandboxctld")
	if err != nil {
		return "", err
	}
	return bins[0], nil
})

var sharedLauncherDir atomic.Pointer[string]

func TestMain(m *testing.M) {
	code := m.Run()
	if d := sharedLauncherDir.Load(); d != nil {
		os.RemoveAll(*d)
	}
	os.Exit(code)
}

func needProgram(t *testing.T, names ...string) {
	t.Helper()
	for _, n := range names {
		if _, err := exec.LookPath(n); err != nil {
			t.Fatalf("%s is needed for this attack test (scripts/toolchain.sh installs it): %v", n, err)
		}
	}
}

func runOK(t *testing.T, dir string, argv ...string) {
	t.Helper()
	c := exec.Command(argv[0], argv[1:]...)
	c.Dir = dir
	if out, err := c.CombinedOutput(); err != nil {
		t.Fatalf("%v: %v %s", argv, err, out)
	}
}

// mustComplete runs cmd and fails unless it completed with exit 0.
func (g *guardedGateway) mustComplete(t *testing.T, cmd string) {
	t.Helper()
	r, err := g.exec(t, api.ExecParams{Command: cmd, Workdir: g.workdir})
	if err != nil || r.Details.Status != api.StatusCompleted || r.Details.ExitCode != api.Code(0) {
		t.Fatalf("%s: should run: %v %v (%s)", cmd, r.Details, err, firstText(r))
	}
}

// Finding 3: tar extracting (-C) or writing (-f) outside the workspace, in
// every spelling getopt accepts, and tar's command-running options in
// clusters and abbreviations.
func TestSecurityTarWritesOutsideWorkspace(t *testing.T) {
	needProgram(t, "tar")
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "pwned"), []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	runOK(t, ws, "tar", "-cf", "a.tar", "pwned")
	if err := os.Mkdir(filepath.Join(ws, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	g := newWorkspaceGateway(t, ws)
	g.allow(t, "/usr/bin/tar")
	// Plain uses inside the workspace still run.
	g.mustComplete(t, "tar -cf b.tar pwned")
	g.mustComplete(t, "tar -tvf a.tar")
	g.mustComplete(t, "tar -xf a.tar -C sub")
	for _, tmpl := range []string{
		"tar -xf a.tar -C {o}",
		"tar -x -f a.tar --directory={o}",
		"tar -x -f a.tar --dir {o}",
		"tar -xvC{o} -f a.tar",
		"tar xfC a.tar {o}",
		"tar -cf {o}/pwned pwned",
		"tar -c --file={o}/pwned pwned",
		"tar -cvf{o}/pwned pwned",
		"tar cf {o}/pwned pwned",
		"tar -xf a.tar --to-com='touch {o}/pwned'",
		"tar -cf x.tar --checkpoint=1 --checkpoint-act=exec='touch {o}/pwned' pwned",
		"tar -cvI'touch {o}/pwned' -f y.tar pwned",
	} {
		out := t.TempDir()
		cmd := strings.ReplaceAll(tmpl, "{o}", out)
		r, err := g.exec(t, api.ExecParams{Command: cmd, Workdir: ws})
		settledRefused(t, cmd, r, err, filepath.Join(out, "pwned"))
	}
}

// Finding 3: zip's -TT inside a cluster of short options (-qTT CMD).
func TestSecurityZipUnzipCommandInCluster(t *testing.T) {
	needProgram(t, "zip", "unzip")
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "f"), []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	g := newWorkspaceGateway(t, ws)
	g.allow(t, "/usr/bin/zip")
	g.mustComplete(t, "zip -q z0.zip f")
	for _, tmpl := range []string{
		"zip z.zip f -T -qTT 'touch {m}'",
		"zip -qTT'touch {m}' -T z.zip f",
		"zip -T --unzip-comm='touch {m}' z.zip f",
	} {
		marker := filepath.Join(t.TempDir(), "pwned")
		cmd := strings.ReplaceAll(tmpl, "{m}", marker)
		r, err := g.exec(t, api.ExecParams{Command: cmd, Workdir: ws})
		settledRefused(t, cmd, r, err, marker)
	}
}

// Finding 3: wget runs wgetrc commands given with -e/--execute
// (use_askpass=CMD runs CMD) while --use-askpass was refused.
func TestSecurityWgetExecuteRunsAskpass(t *testing.T) {
	needProgram(t, "wget")
	ws := t.TempDir()
	g := newWorkspaceGateway(t, ws)
	g.allow(t, "/usr/bin/wget")
	for _, tmpl := range []string{
		"wget -q -e use_askpass={x} http://127.0.0.1:1/",
		"wget -qe use_askpass={x} http://127.0.0.1:1/",
		"wget --exec=use_askpass={x} http://127.0.0.1:1/",
		"wget --use-ask={x} http://127.0.0.1:1/",
		"wget -O {m} http://127.0.0.1:1/",
	} {
		mdir := t.TempDir()
		marker := filepath.Join(mdir, "pwned")
		evil := filepath.Join(mdir, "evil")
		writeExecutable(t, evil, "#!/bin/sh\ntouch "+marker+"\necho x\n")
		cmd := strings.NewReplacer("{m}", marker, "{x}", evil).Replace(tmpl)
		r, err := g.exec(t, api.ExecParams{Command: cmd, Workdir: ws})
		settledRefused(t, cmd, r, err, marker)
	}
}

// Finding 3: git archive -o FILE while --output was refused.
func TestSecurityGitArchiveShortOutput(t *testing.T) {
	needProgram(t, "git")
	ws := t.TempDir()
	runOK(t, ws, "git", "init", "-q", ".")
	if err := os.WriteFile(filepath.Join(ws, "f"), []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	runOK(t, ws, "git", "add", "f")
	runOK(t, ws, "git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "c")
	g := newWorkspaceGateway(t, ws)
	g.allow(t, "/usr/bin/git")
	g.mustComplete(t, "git archive --format=tar HEAD")
	for _, tmpl := range []string{
		"git archive -o {m} HEAD",
		"git archive -o{m} HEAD",
		"git archive -vo {m} HEAD",
		"git archive --out={m} HEAD",
	} {
		marker := filepath.Join(t.TempDir(), "pwned")
		cmd := strings.ReplaceAll(tmpl, "{m}", marker)
		r, err := g.exec(t, api.ExecParams{Command: cmd, Workdir: ws})
		settledRefused(t, cmd, r, err, marker)
	}
}

// Finding 3: rg --pre CMD runs CMD for every file searched.
func TestSecurityRipgrepPreprocessor(t *testing.T) {
	needProgram(t, "rg")
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "f"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	g := newWorkspaceGateway(t, ws)
	g.allow(t, "/usr/bin/rg")
	g.mustComplete(t, "rg -n hello f")
	for _, tmpl := range []string{
		"rg --pre {x} hello f",
		"rg --pre={x} hello f",
		"rg -n --pre {x} --pre-glob '*' hello f",
	} {
		mdir := t.TempDir()
		marker := filepath.Join(mdir, "pwned")
		evil := filepath.Join(mdir, "evil")
		writeExecutable(t, evil, "#!/bin/sh\ntouch "+marker+"\ncat \"$1\"\n")
		cmd := strings.ReplaceAll(tmpl, "{x}", evil)
		r, err := g.exec(t, api.ExecParams{Command: cmd, Workdir: ws})
		settledRefused(t, cmd, r, err, marker)
	}
}

// Finding 4: GIT_TEST_FSMONITOR in the request env made an allowlisted
// `git status` run a script.
func TestSecurityEnvGitTestFsmonitor(t *testing.T) {
	needProgram(t, "git")
	ws := t.TempDir()
	runOK(t, ws, "git", "init", "-q", ".")
	g := newWorkspaceGateway(t, ws)
	g.allow(t, "/usr/bin/git status")
	g.mustComplete(t, "git status")
	mdir := t.TempDir()
	marker := filepath.Join(mdir, "pwned")
	hook := filepath.Join(mdir, "fsmonitor")
	writeExecutable(t, hook, "#!/bin/sh\ntouch "+marker+"\n")
	for _, k := range []string{"GIT_TEST_FSMONITOR", "git_test_fsmonitor"} {
		r, err := g.exec(t, api.ExecParams{Command: "git status", Workdir: ws, Env: map[string]string{k: hook}})
		settledRefused(t, k, r, err, marker)
		r, err = g.exec(t, api.ExecParams{Command: "env " + k + "=" + hook + " git status", Workdir: ws})
		settledRefused(t, "env "+k, r, err, marker)
	}
}

// Finding 4: RIPGREP_CONFIG_PATH names a config file with --pre=CMD.
func TestSecurityEnvRipgrepConfigPath(t *testing.T) {
	needProgram(t, "rg")
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "f"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	mdir := t.TempDir()
	marker := filepath.Join(mdir, "pwned")
	evil := filepath.Join(mdir, "evil")
	writeExecutable(t, evil, "#!/bin/sh\ntouch "+marker+"\ncat \"$1\"\n")
	rc := filepath.Join(mdir, "rgrc")
	if err := os.WriteFile(rc, []byte("--pre="+evil+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	g := newWorkspaceGateway(t, ws)
	g.allow(t, "/usr/bin/rg")
	r, err := g.exec(t, api.ExecParams{Command: "rg hello f", Workdir: ws, Env: map[string]string{"RIPGREP_CONFIG_PATH": rc}})
	settledRefused(t, "RIPGREP_CONFIG_PATH", r, err, marker)
	r, err = g.exec(t, api.ExecParams{Command: "env RIPGREP_CONFIG_PATH=" + rc + " rg hello f", Workdir: ws})
	settledRefused(t, "env RIPGREP_CONFIG_PATH", r, err, marker)
}

// Finding 4: UNZIP="-o -d DIR" made an allowlisted unzip extract outside the
// workspace (and ZIPOPT, UNZIPOPT, ZIPINFO... the same family).
func TestSecurityEnvUnzipOptions(t *testing.T) {
	needProgram(t, "zip", "unzip")
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "pwned"), []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	runOK(t, ws, "zip", "-q", "z.zip", "pwned")
	if err := os.Remove(filepath.Join(ws, "pwned")); err != nil {
		t.Fatal(err)
	}
	g := newWorkspaceGateway(t, ws)
	g.allow(t, "/usr/bin/unzip")
	g.mustComplete(t, "unzip -l z.zip")
	for _, k := range []string{"UNZIP", "UNZIPOPT", "ZIPINFO", "ZIPINFOOPT"} {
		out := t.TempDir()
		marker := filepath.Join(out, "pwned")
		r, err := g.exec(t, api.ExecParams{Command: "unzip -q z.zip", Workdir: ws, Env: map[string]string{k: "-o -d " + out}})
		settledRefused(t, k, r, err, marker)
	}
	// unzip's own -d outside the workspace, and -: (keep ../ in names).
	out := t.TempDir()
	for _, cmd := range []string{"unzip -q z.zip -d " + out, "unzip -qd" + out + " z.zip", "unzip -q -: z.zip"} {
		r, err := g.exec(t, api.ExecParams{Command: cmd, Workdir: ws})
		settledRefused(t, cmd, r, err, filepath.Join(out, "pwned"))
	}
}

// Finding 4: the variables each modelled program reads as options, a
// command line or a configuration file are refused in a request on the
// gateway (the families and their principle are tested in envguard).
func TestSecurityEnvProgramFamiliesRefused(t *testing.T) {
	g := newGuardedGateway(t, nil, nil)
	g.allow(t, "/usr/bin/true")
	marker := filepath.Join(t.TempDir(), "never")
	for _, k := range []string{"GIT_TEST_FSMONITOR", "GIT_TEST_ANYTHING", "GIT_SEQUENCE_EDITOR", "RIPGREP_CONFIG_PATH", "UNZIP", "UNZIPOPT",
		"ZIPOPT", "ZIP", "TAR_OPTIONS", "WGETRC", "SYSTEM_WGETRC", "CURL_HOME", "GREP_OPTIONS", "LESSOPEN", "RSYNC_CONNECT_PROG",
		"SYSTEMD_PAGERSECURE", "FIND_OPTIONS", "SOMETHING_OPTIONS", "X_CONFIG_PATH"} {
		r, err := g.exec(t, api.ExecParams{Command: "true", Env: map[string]string{k: "/tmp/x"}})
		settledRefused(t, k, r, err, marker)
	}
	// Ordinary variables still pass.
	for _, k := range []string{"FOO", "GIT_AUTHOR_NAME", "LANG", "NO_COLOR"} {
		r, err := g.exec(t, api.ExecParams{Command: "true", Env: map[string]string{k: "x"}})
		if err != nil || r.Details.Status != api.StatusCompleted {
			t.Fatalf("%s: should run: %v %v", k, r.Details, err)
		}
	}
}

// Finding 3 (same class): the shortest GNU abbreviation of a gadget long
// option. GNU sort reads --o as --output; the table matched only
// abbreviations of at least two letters.
func TestSecurityShortestLongAbbreviation(t *testing.T) {
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "f"), []byte("b\na\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	g := newWorkspaceGateway(t, ws)
	g.allow(t, "/usr/bin/sort")
	g.mustComplete(t, "sort f")
	marker := filepath.Join(t.TempDir(), "pwned")
	for _, cmd := range []string{"sort --o=" + marker + " f", "sort --o " + marker + " f"} {
		r, err := g.exec(t, api.ExecParams{Command: cmd, Workdir: ws})
		settledRefused(t, cmd, r, err, marker)
	}
}
