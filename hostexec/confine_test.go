package hostexec

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

	"github.com/creack/pty"
	"github.com/landlock-lsm/go-landlock/landlock"
	"golang.org/x/sys/unix"

	"github.com/sandboxctl/sandboxctl/sessions/hostapi"
)

// TestMain makes this test binary its own confining launcher (what
// cmd/sandboxctld does for the daemon): `<test binary> ConfineArg ...`.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == ConfineArg {
		err := ConfineExec(os.Args[2:])
		fmt.Fprintln(os.Stderr, "launcher:", err)
		os.Exit(126)
	}
	if len(os.Args) > 1 && os.Args[1] == EnvelopeArg {
		err := EnvelopeExec(os.Args[2:])
		fmt.Fprintln(os.Stderr, "launcher:", err)
		os.Exit(126)
	}
	if len(os.Args) > 4 && os.Args[1] == confineABI1Arg {
		// The ruleset as a kernel of Landlock ABI 1 gets it.
		err := confineAt(landlock.V1, 1, os.Args[2])
		if err == nil {
			err = unix.Exec(os.Args[3], os.Args[4:], os.Environ())
		}
		fmt.Fprintln(os.Stderr, "launcher:", err)
		os.Exit(126)
	}
	os.Exit(m.Run())
}

// confineABI1Arg makes the test binary a launcher that confines as on a
// kernel of Landlock ABI 1.
const confineABI1Arg = "--test-confine-abi1"

// confinedRunner is a runner whose launcher is this test binary. The test
// fails (never skips) on a kernel without Landlock: the claim is about it.
func confinedRunner(t *testing.T) *Runner {
	t.Helper()
	if _, err := LandlockABI(); err != nil {
		t.Fatalf("this machine must have Landlock for these tests: %v", err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return newTestRunner(t, Options{Launcher: self})
}

// runSpec runs spec to its end and returns the merged output and exit code.
func runSpec(t *testing.T, r *Runner, spec hostapi.StartSpec) (string, int) {
	t.Helper()
	return runSpecWithin(t, r, spec, 20*time.Second)
}

// runSpecWithin is runSpec for a command that may take up to d.
func runSpecWithin(t *testing.T, r *Runner, spec hostapi.StartSpec, d time.Duration) (string, int) {
	t.Helper()
	p := start(t, r, spec)
	out, errs := collect(p.Stdout()), collect(p.Stderr())
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	code, sig, err := p.Wait(ctx)
	if err != nil || sig != "" {
		t.Fatalf("%q: wait: code %d signal %q err %v", spec.Command, code, sig, err)
	}
	return out.wait(t, 10*time.Second) + errs.wait(t, 10*time.Second), code
}

// confineFixture: a workspace with a file and a subdirectory, a secret
// outside it, and symlinks in the workspace that point at the secret and
// at the outside directory.
type confineFixture struct {
	ws, outsideDir, secret string
}

func newConfineFixture(t *testing.T) confineFixture {
	t.Helper()
	f := confineFixture{ws: t.TempDir(), outsideDir: t.TempDir()}
	f.secret = filepath.Join(f.outsideDir, "secret")
	for path, data := range map[string]string{
		f.secret:                        "TOP-SECRET\n",
		filepath.Join(f.ws, "in.txt"):   "inside\n",
		filepath.Join(f.ws, "sub", "x"): "x\n",
	} {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(f.secret, filepath.Join(f.ws, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(f.outsideDir, filepath.Join(f.ws, "dirlink")); err != nil {
		t.Fatal(err)
	}
	return f
}

// A confined command still works in its workspace and runs ordinary
// programs: read, write, create, rename across subdirectories, remove,
// pipes, /dev/null, a terminal.
func TestConfinedCommandWorksInWorkspace(t *testing.T) {
	r := confinedRunner(t)
	f := newConfineFixture(t)
	script := `set -e
cat in.txt
echo new > out.txt; cat out.txt
mkdir -p a/b; cp in.txt a/b/copy; mv a/b/copy sub/moved; cat sub/moved
rm sub/moved; touch t; chmod 600 t
ls sub | sort | head -n 1
echo discarded > /dev/null
date +%Y >/dev/null; id -u >/dev/null
echo via-stdout > /dev/stdout
printf '%s\n' "$(uname -s)"
echo done`
	out, code := runSpec(t, r, hostapi.StartSpec{Command: script, Dir: f.ws, Confine: f.ws})
	want := []string{"inside", "new", "x", "via-stdout", "Linux", "done"}
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Fatalf("confined script: exit %d, %q lacks %q", code, out, w)
		}
	}
	if code != 0 {
		t.Fatalf("confined script exit %d: %q", code, out)
	}
	if b, err := os.ReadFile(filepath.Join(f.ws, "out.txt")); err != nil || string(b) != "new\n" {
		t.Fatalf("out.txt: %q %v", b, err)
	}

	// A terminal works too (the pty is opened before the confinement;
	// /dev/tty is reopened by name).
	p := start(t, r, hostapi.StartSpec{Command: "cat in.txt; tty >/dev/null && echo x > /dev/tty && echo x > \"$(tty)\" && echo tty-ok", Dir: f.ws, Confine: f.ws, PTY: true})
	c := collect(p.Stdout())
	c.waitFor(t, "tty-ok", 10*time.Second)
	if s := c.wait(t, 10*time.Second); !strings.Contains(s, "inside") || strings.Contains(s, "denied") {
		t.Fatalf("confined PTY command: %q", s)
	}
}

// Outside the workspace nothing is readable or writable, whatever way the
// path is spelled: a symlink in the workspace, a directory symlink, an
// absolute path, "..". The shell and its programs still run.
func TestConfinedCommandCannotReachOutside(t *testing.T) {
	r := confinedRunner(t)
	f := newConfineFixture(t)
	home := os.Getenv("HOME")
	for _, cmd := range []string{
		"cat link",
		"cat dirlink/secret",
		"cat " + f.secret,
		"cat ../" + filepath.Base(f.outsideDir) + "/secret",
		"echo pwned > link",
		"echo pwned > dirlink/new",
		"cp in.txt " + f.outsideDir + "/copy",
		"mv in.txt dirlink/moved",
		"ln in.txt dirlink/hard",
		"rm link2 2>/dev/null; ln -s x dirlink/sym",
		"ls " + f.outsideDir,
		"cat /etc/shadow",
		"ls " + home,
		"ls /tmp",
		"cat /proc/self/environ",
	} {
		out, code := runSpec(t, r, hostapi.StartSpec{Command: cmd, Dir: f.ws, Confine: f.ws})
		if strings.Contains(out, "TOP-SECRET") || strings.Contains(out, "secret\n") {
			t.Errorf("%q: ATTACK WORKED: %q", cmd, out)
		}
		if code == 0 {
			t.Errorf("%q: succeeded (exit 0): %q", cmd, out)
		}
		if !strings.Contains(out, "Permission denied") && !strings.Contains(out, "Operation not permitted") {
			t.Errorf("%q: not refused by the kernel: exit %d %q", cmd, code, out)
		}
	}
	b, err := os.ReadFile(f.secret)
	if err != nil || string(b) != "TOP-SECRET\n" {
		t.Fatalf("the secret changed: %q %v", b, err)
	}
	entries, _ := os.ReadDir(f.outsideDir)
	if len(entries) != 1 {
		t.Fatalf("something was written outside the workspace: %v", entries)
	}
	if _, err := os.Stat(filepath.Join(f.ws, "in.txt")); err != nil {
		t.Fatalf("in.txt left the workspace: %v", err)
	}
}

// Without Confine a command behaves as before: the symlink leads out.
func TestUnconfinedCommandUnchanged(t *testing.T) {
	r := confinedRunner(t)
	f := newConfineFixture(t)
	out, code := runSpec(t, r, hostapi.StartSpec{Command: "cat link", Dir: f.ws})
	if code != 0 || out != "TOP-SECRET\n" {
		t.Fatalf("unconfined cat link: exit %d %q", code, out)
	}
	pr, err := r.Prepare(hostapi.StartSpec{Command: "true"})
	if err != nil || pr.Argv[0] != r.Shell() || pr.Warning != "" {
		t.Fatalf("unconfined Prepare: %v %q %v", pr.Argv, pr.Warning, err)
	}
}

// The start spec carries the confinement to the launcher, in the argv that
// both the direct path and the host supervisor execute.
func TestPrepareConfinedArgv(t *testing.T) {
	r := confinedRunner(t)
	pr, err := r.Prepare(hostapi.StartSpec{Command: "cat x", Confine: "/w"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{r.launcher, ConfineArg, "/w", r.Shell(), r.Shell(), "-c", "cat x"}
	if strings.Join(pr.Argv, "\x00") != strings.Join(want, "\x00") || pr.Warning != "" {
		t.Fatalf("argv %q warning %q, want %q", pr.Argv, pr.Warning, want)
	}
	if _, err := r.Prepare(hostapi.StartSpec{Command: "cat x", Confine: "rel"}); !errors.Is(err, os.ErrInvalid) {
		t.Fatalf("relative confine dir: %v", err)
	}
	noLauncher := newTestRunner(t, Options{})
	if _, err := noLauncher.Prepare(hostapi.StartSpec{Command: "cat x", Confine: "/w"}); !errors.Is(err, os.ErrInvalid) {
		t.Fatalf("no launcher: %v", err)
	}
}

// On a kernel without Landlock (injected) the command runs unconfined, and
// the process says so in its warnings: behaviour is explicit, never silent.
func TestConfineWithoutLandlockWarns(t *testing.T) {
	r := confinedRunner(t)
	r.landlockABI = func() (int, error) { return 0, fmt.Errorf("%w: ENOSYS", ErrLandlockUnavailable) }
	f := newConfineFixture(t)
	p := start(t, r, hostapi.StartSpec{Command: "cat in.txt", Dir: f.ws, Confine: f.ws})
	out := collect(p.Stdout())
	if s := out.wait(t, 10*time.Second); s != "inside\n" {
		t.Fatalf("output %q", s)
	}
	ws := p.Warnings()
	if len(ws) != 1 || !strings.Contains(ws[0], "not confined to "+f.ws) || !strings.Contains(ws[0], "landlock unavailable") {
		t.Fatalf("warnings %q", ws)
	}
}

// The launcher itself fails closed: it never execs the command without the
// ruleset (a workspace that does not exist cannot be confined to).
func TestConfineLauncherFailsClosed(t *testing.T) {
	r := confinedRunner(t)
	marker := filepath.Join(t.TempDir(), "ran")
	out, code := runSpec(t, r, hostapi.StartSpec{Command: "touch " + marker, Confine: filepath.Join(t.TempDir(), "missing")})
	if code != 126 || !strings.Contains(out, "confine: workspace") {
		t.Fatalf("exit %d %q", code, out)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the command ran without its confinement")
	}
}

// On a kernel of Landlock ABI 1 (no "refer" right) the ruleset still
// confines: go-landlock's best effort would enforce nothing if the rules
// asked for refer there. Renames across the workspace's directories then
// fail with EXDEV, which mv handles by copying.
func TestConfineABI1StillConfines(t *testing.T) {
	r := confinedRunner(t)
	f := newConfineFixture(t)
	pr, err := r.Prepare(hostapi.StartSpec{Command: "cat link; mv in.txt sub/in.txt && cat sub/in.txt", Dir: f.ws, Confine: f.ws})
	if err != nil {
		t.Fatal(err)
	}
	// Swap the launcher's mode for the ABI-1 one: same layout of argv.
	argv := append([]string{pr.Argv[0], confineABI1Arg}, pr.Argv[2:]...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir, cmd.Env = f.ws, pr.Env
	out, _ := cmd.CombinedOutput()
	if strings.Contains(string(out), "TOP-SECRET") || !strings.Contains(string(out), "link: Permission denied") {
		t.Fatalf("ABI 1 ruleset does not confine: %q", out)
	}
	if !strings.Contains(string(out), "inside") {
		t.Fatalf("mv across directories under ABI 1: %q", out)
	}
}

// TestSecurityConfinedCommandCannotReachOtherTerminals replays a confined
// command that reads and writes a terminal that is not its own: the
// person's (or another session's) pseudo-terminal of the same uid, reached
// through a workspace symlink a concurrent writer pointed at /dev/pts/N
// (the guard saw it pointing inside). Reading the terminal steals what the
// person types there (a password at a prompt included); writing puts text
// on their screen. Only the command's own terminal may stay reachable.
func TestSecurityConfinedCommandCannotReachOtherTerminals(t *testing.T) {
	r := confinedRunner(t)
	f := newConfineFixture(t)
	master, slave, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer master.Close()
	defer slave.Close()
	if err := os.Symlink(slave.Name(), filepath.Join(f.ws, "tty")); err != nil {
		t.Fatal(err)
	}
	// What the person typed, waiting in their terminal's input.
	if _, err := master.Write([]byte("TYPED-PASSWORD\n")); err != nil {
		t.Fatal(err)
	}
	for _, pt := range []bool{false, true} {
		for _, cmd := range []string{"head -n 1 tty", "head -n 1 " + slave.Name(), "echo INJECTED > tty"} {
			out, code := "", 0
			if pt {
				p := start(t, r, hostapi.StartSpec{Command: cmd + "; echo exit=$?", Dir: f.ws, Confine: f.ws, PTY: true})
				out = collect(p.Stdout()).wait(t, 20*time.Second)
				if strings.Contains(out, "exit=0") {
					code = 0
				} else {
					code = 1
				}
			} else {
				out, code = runSpec(t, r, hostapi.StartSpec{Command: cmd, Dir: f.ws, Confine: f.ws})
			}
			if strings.Contains(out, "TYPED-PASSWORD") {
				t.Fatalf("pty=%v %q: ATTACK WORKED: a confined command read another terminal's input: %q", pt, cmd, out)
			}
			if code == 0 || !strings.Contains(out, "Permission denied") {
				t.Errorf("pty=%v %q: not refused by the kernel: exit %d %q", pt, cmd, code, out)
			}
		}
	}
	// Nothing was written to the person's screen, and what they typed is
	// still there for their own program.
	if err := slave.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	n, err := slave.Read(buf)
	if err != nil || string(buf[:n]) != "TYPED-PASSWORD\n" {
		t.Fatalf("the person's input after the attack: %q %v", buf[:n], err)
	}
	if err := master.SetReadDeadline(time.Now().Add(2 * time.Second)); err != nil {
		t.Fatal(err)
	}
	n, _ = master.Read(buf)
	if strings.Contains(string(buf[:n]), "INJECTED") {
		t.Fatalf("a confined command wrote to another terminal: %q", buf[:n])
	}
}
