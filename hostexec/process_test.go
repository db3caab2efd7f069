package hostexec

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandboxctl/sandboxctl/sessions/hostapi"
)

// testEnviron is a small, controlled inherited environment: the tests must
// not depend on (or leak) whatever the test runner's environment holds.
func testEnviron(t *testing.T) []string {
	t.Helper()
	return []string{
		"PATH=/usr/local/bin:/usr/bin:/bin",
		"HOME=" + t.TempDir(),
		"LANG=C.UTF-8",
		"SHELL=/bin/sh",
	}
}

func newTestRunner(t *testing.T, opts Options) *Runner {
	t.Helper()
	if opts.Environ == nil {
		opts.Environ = testEnviron(t)
	}
	if opts.Logf == nil {
		opts.Logf = t.Logf
	}
	r, err := NewRunner(context.Background(), opts)
	if err != nil {
		t.Fatalf("NewRunner: %v", err)
	}
	return r
}

// start starts spec and registers a Kill so that no test leaves a process
// behind, whatever it asserts.
func start(t *testing.T, r *Runner, spec hostapi.StartSpec) *Process {
	t.Helper()
	p, err := r.Start(context.Background(), spec)
	if err != nil {
		t.Fatalf("Start(%q): %v", spec.Command, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := p.Kill(ctx); err != nil {
			t.Errorf("cleanup Kill: %v", err)
		}
		if _, _, err := p.Wait(ctx); err != nil {
			t.Errorf("cleanup Wait: %v", err)
		}
	})
	return p
}

// collector reads a stream to EOF in the background.
type collector struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	err  error
	done chan struct{}
}

func collect(r io.Reader) *collector {
	c := &collector{done: make(chan struct{})}
	go func() {
		defer close(c.done)
		b := make([]byte, 4096)
		for {
			n, err := r.Read(b)
			c.mu.Lock()
			c.buf.Write(b[:n])
			c.mu.Unlock()
			if err != nil {
				if !errors.Is(err, io.EOF) {
					c.mu.Lock()
					c.err = err
					c.mu.Unlock()
				}
				return
			}
		}
	}()
	return c
}

func (c *collector) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.String()
}

// wait waits for EOF and fails the test if it does not come within d.
func (c *collector) wait(t *testing.T, d time.Duration) string {
	t.Helper()
	select {
	case <-c.done:
	case <-time.After(d):
		t.Fatalf("no EOF within %v; output so far %q", d, c.String())
	}
	if c.err != nil {
		t.Fatalf("read error: %v", c.err)
	}
	return c.String()
}

// waitFor polls the collected output until it contains want.
func (c *collector) waitFor(t *testing.T, want string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !strings.Contains(c.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("output %q does not contain %q after %v", c.String(), want, d)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func waitExit(t *testing.T, p *Process, d time.Duration) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	code, sig, err := p.Wait(ctx)
	if err != nil {
		t.Fatalf("Wait: %v", err)
	}
	return code, sig
}

// runPipes runs a pipe command to completion and returns stdout, stderr and
// the exit status.
func runPipes(t *testing.T, r *Runner, spec hostapi.StartSpec) (stdout, stderr string, code int, sig string) {
	t.Helper()
	p := start(t, r, spec)
	o, e := collect(p.Stdout()), collect(p.Stderr())
	code, sig = waitExit(t, p, 10*time.Second)
	return o.wait(t, 5*time.Second), e.wait(t, 5*time.Second), code, sig
}

func TestOutputAndExitCode(t *testing.T) {
	r := newTestRunner(t, Options{})
	tests := []struct {
		name, command, stdout, stderr string
		code                          int
	}{
		{"echo", "echo hello", "hello\n", "", 0},
		{"stderr", "echo out; echo err >&2", "out\n", "err\n", 0},
		{"nonzero", "echo partial; exit 3", "partial\n", "", 3},
		{"failing command", "false", "", "", 1},
		{"no output", "true", "", "", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, code, sig := runPipes(t, r, hostapi.StartSpec{Command: tc.command})
			if out != tc.stdout || errOut != tc.stderr || code != tc.code || sig != "" {
				t.Errorf("got stdout %q stderr %q code %d signal %q; want %q %q %d \"\"",
					out, errOut, code, sig, tc.stdout, tc.stderr, tc.code)
			}
		})
	}
}

func TestStartRefusesBadSpecs(t *testing.T) {
	r := newTestRunner(t, Options{})
	for name, spec := range map[string]hostapi.StartSpec{
		"empty command": {Command: "  "},
		"PATH override": {Command: "true", Env: map[string]string{"PATH": "/tmp"}},
		"bad tag":       {Command: "true", Tag: "a b"},
		"huge pty":      {Command: "true", PTY: true, Cols: 1 << 20},
	} {
		t.Run(name, func(t *testing.T) {
			if p, err := r.Start(context.Background(), spec); err == nil {
				_ = p.Kill(context.Background())
				t.Fatalf("Start(%+v) succeeded, want error", spec)
			} else if !errors.Is(err, os.ErrInvalid) {
				t.Errorf("error %v does not wrap os.ErrInvalid", err)
			}
		})
	}
}

func TestDirAndEnv(t *testing.T) {
	r := newTestRunner(t, Options{})
	dir := t.TempDir()
	out, _, code, _ := runPipes(t, r, hostapi.StartSpec{
		Command: `pwd; printf '%s\n' "$FOO" "$SANDBOXCTL_RUN"`,
		Dir:     dir,
		Env:     map[string]string{"FOO": "bar baz"},
		Tag:     "tag-123",
	})
	want := dir + "\nbar baz\ntag-123\n"
	if out != want || code != 0 {
		t.Errorf("got %q (code %d), want %q", out, code, want)
	}
}

func TestStdinWriteAndClose(t *testing.T) {
	r := newTestRunner(t, Options{})
	p := start(t, r, hostapi.StartSpec{Command: "cat", KeepStdin: true})
	o := collect(p.Stdout())
	if _, err := p.Write([]byte("abc\n")); err != nil {
		t.Fatalf("Write: %v", err)
	}
	o.waitFor(t, "abc\n", 5*time.Second)
	if err := p.CloseStdin(); err != nil {
		t.Fatalf("CloseStdin: %v", err)
	}
	if code, sig := waitExit(t, p, 5*time.Second); code != 0 || sig != "" {
		t.Errorf("exit %d %q, want 0", code, sig)
	}
	if got := o.wait(t, 5*time.Second); got != "abc\n" {
		t.Errorf("output %q", got)
	}
	if err := p.CloseStdin(); !errors.Is(err, ErrExited) && !errors.Is(err, ErrNoStdin) {
		t.Errorf("second CloseStdin: %v, want ErrExited or ErrNoStdin", err)
	}
	if _, err := p.Write([]byte("x")); !errors.Is(err, ErrExited) {
		t.Errorf("Write after exit: %v, want ErrExited", err)
	}
}

func TestNoStdinMeansEOF(t *testing.T) {
	r := newTestRunner(t, Options{})
	begin := time.Now()
	out, _, code, _ := runPipes(t, r, hostapi.StartSpec{Command: "cat; echo after-cat"})
	if out != "after-cat\n" || code != 0 {
		t.Errorf("got %q code %d", out, code)
	}
	if d := time.Since(begin); d > 10*time.Second { // an open stdin would hang until the test's timeout
		t.Errorf("cat without stdin took %v", d)
	}
	p := start(t, r, hostapi.StartSpec{Command: "true"})
	if err := p.CloseStdin(); err != nil && !errors.Is(err, ErrNoStdin) && !errors.Is(err, ErrExited) {
		t.Errorf("CloseStdin without KeepStdin: %v", err)
	}
	if _, err := p.Write([]byte("x")); err == nil {
		t.Error("Write without KeepStdin succeeded")
	}
	collect(p.Stdout())
	collect(p.Stderr())
	waitExit(t, p, 5*time.Second)
}

// runPTY runs a PTY command to completion and returns its output.
func runPTY(t *testing.T, r *Runner, spec hostapi.StartSpec) (string, int) {
	t.Helper()
	spec.PTY = true
	p := start(t, r, spec)
	if !p.IsPTY() {
		t.Fatalf("no PTY: %s", p.Warning())
	}
	if p.Stderr() != nil {
		t.Error("Stderr() of a PTY process is not nil")
	}
	o := collect(p.Stdout())
	code, _ := waitExit(t, p, 10*time.Second)
	return o.wait(t, 5*time.Second), code
}

func TestPTY(t *testing.T) {
	r := newTestRunner(t, Options{})
	t.Run("tty", func(t *testing.T) {
		out, code := runPTY(t, r, hostapi.StartSpec{Command: "tty"})
		if !strings.HasPrefix(out, "/dev/pts/") || code != 0 {
			t.Errorf("tty printed %q (code %d)", out, code)
		}
	})
	t.Run("default size", func(t *testing.T) {
		out, _ := runPTY(t, r, hostapi.StartSpec{Command: "stty size"})
		if strings.TrimSpace(out) != "30 120" {
			t.Errorf("stty size printed %q, want 30 120", out)
		}
	})
	t.Run("given size", func(t *testing.T) {
		out, _ := runPTY(t, r, hostapi.StartSpec{Command: "stty size", Cols: 80, Rows: 24})
		if strings.TrimSpace(out) != "24 80" {
			t.Errorf("stty size printed %q, want 24 80", out)
		}
	})
	t.Run("term and tag", func(t *testing.T) {
		out, _ := runPTY(t, r, hostapi.StartSpec{Command: `echo "$TERM $SANDBOXCTL_RUN"`, Tag: "ptytag"})
		if strings.TrimSpace(out) != "xterm-256color ptytag" {
			t.Errorf("got %q", out)
		}
	})
	t.Run("merged stderr and exit code", func(t *testing.T) {
		out, code := runPTY(t, r, hostapi.StartSpec{Command: "echo to-stderr >&2; exit 4"})
		if !strings.Contains(out, "to-stderr") || code != 4 {
			t.Errorf("got %q code %d", out, code)
		}
	})
	t.Run("session leader", func(t *testing.T) {
		// The shell leads its own session and group: pgid == sid == pid.
		out, _ := runPTY(t, r, hostapi.StartSpec{Command: `ps -o pid=,pgid=,sid= -p $$`})
		f := strings.Fields(out)
		if len(f) != 3 || f[0] != f[1] || f[1] != f[2] {
			t.Errorf("ps printed %q, want pid = pgid = sid", out)
		}
	})
}

func TestPTYInputAndEOF(t *testing.T) {
	r := newTestRunner(t, Options{})
	p := start(t, r, hostapi.StartSpec{Command: `read -r x; echo "got:$x"; cat; echo cat-done`, PTY: true})
	o := collect(p.Stdout())
	if _, err := p.Write([]byte("hi\r")); err != nil {
		t.Fatalf("Write: %v", err)
	}
	o.waitFor(t, "got:hi", 5*time.Second)
	if err := p.CloseStdin(); err != nil { // ^D at the start of a line: cat sees EOF
		t.Fatalf("CloseStdin: %v", err)
	}
	o.waitFor(t, "cat-done", 5*time.Second)
	if code, _ := waitExit(t, p, 5*time.Second); code != 0 {
		t.Errorf("exit %d", code)
	}
	o.wait(t, 5*time.Second)
}

func TestPTYResize(t *testing.T) {
	r := newTestRunner(t, Options{})
	p := start(t, r, hostapi.StartSpec{Command: `stty size; read -r x; stty size`, PTY: true})
	o := collect(p.Stdout())
	o.waitFor(t, "30 120", 5*time.Second)
	if err := p.Resize(context.Background(), 132, 50); err != nil {
		t.Fatalf("Resize: %v", err)
	}
	if _, err := p.Write([]byte("go\r")); err != nil {
		t.Fatalf("Write: %v", err)
	}
	o.waitFor(t, "50 132", 5*time.Second)
	waitExit(t, p, 5*time.Second)
	o.wait(t, 5*time.Second)
	if err := p.Resize(context.Background(), 0, 10); !errors.Is(err, os.ErrInvalid) {
		t.Errorf("Resize(0, 10): %v, want os.ErrInvalid", err)
	}
}

func TestPTYResizeSIGWINCH(t *testing.T) {
	r := newTestRunner(t, Options{})
	// The shell runs the trap between commands once SIGWINCH arrived, so it
	// waits in short sleeps rather than in one long one.
	p := start(t, r, hostapi.StartSpec{Command: `trap 'stty size; exit 0' WINCH; echo ready; while :; do sleep 0.05; done`, PTY: true})
	o := collect(p.Stdout())
	o.waitFor(t, "ready", 5*time.Second)
	if err := p.Resize(context.Background(), 100, 40); err != nil {
		t.Fatalf("Resize: %v", err)
	}
	o.waitFor(t, "40 100", 5*time.Second)
	waitExit(t, p, 5*time.Second)
	o.wait(t, 5*time.Second)
}

func TestPTYFallbackToPipes(t *testing.T) {
	r := newTestRunner(t, Options{})
	r.openPTY = func() (*os.File, *os.File, error) { return nil, nil, errors.New("no ptys left") }
	p := start(t, r, hostapi.StartSpec{Command: "echo via-pipes; tty", PTY: true})
	if p.IsPTY() || !strings.Contains(p.Warning(), "no ptys left") {
		t.Errorf("IsPTY %v warning %q", p.IsPTY(), p.Warning())
	}
	if err := p.Resize(context.Background(), 80, 24); !errors.Is(err, ErrNotPTY) {
		t.Errorf("Resize on pipes: %v, want ErrNotPTY", err)
	}
	o, e := collect(p.Stdout()), collect(p.Stderr())
	code, _ := waitExit(t, p, 5*time.Second)
	if out := o.wait(t, 5*time.Second); !strings.HasPrefix(out, "via-pipes\nnot a tty") || code == 0 {
		t.Errorf("output %q code %d", out, code)
	}
	e.wait(t, 5*time.Second)
}

func TestKillTimeoutCase(t *testing.T) {
	t.Parallel()
	r := newTestRunner(t, Options{})
	dir := t.TempDir()
	marker := filepath.Join(dir, "MARKER")
	p := start(t, r, hostapi.StartSpec{Command: "sleep 5 && touch " + marker})
	o, e := collect(p.Stdout()), collect(p.Stderr())
	time.Sleep(200 * time.Millisecond)
	begin := time.Now()
	if err := p.Kill(context.Background()); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	if d := time.Since(begin); d > 2*time.Second {
		t.Errorf("Kill of a TERM-able tree took %v", d)
	}
	code, sig := waitExit(t, p, 5*time.Second)
	if code != -1 || sig != "SIGTERM" {
		t.Errorf("Wait = %d %q, want -1 SIGTERM", code, sig)
	}
	o.wait(t, 5*time.Second)
	e.wait(t, 5*time.Second)
	waitNoneTagged(t, p.Tag(), 5*time.Second) // nothing left that could touch it
	if _, err := os.Stat(marker); err == nil {
		t.Error("MARKER exists: the tree was not killed")
	}
}

func TestKillSetsidEscapee(t *testing.T) {
	t.Parallel()
	r := newTestRunner(t, Options{})
	dir := t.TempDir()
	marker := filepath.Join(dir, "MARKER2")
	for _, ptyMode := range []bool{false, true} {
		name := "pipes"
		if ptyMode {
			name = "pty"
		}
		t.Run(name, func(t *testing.T) {
			m := marker + name
			p := start(t, r, hostapi.StartSpec{Command: "setsid sh -c 'sleep 3; touch " + m + "' & echo started; sleep 30", PTY: ptyMode})
			o := collect(p.Stdout())
			if !ptyMode {
				collect(p.Stderr())
			}
			o.waitFor(t, "started", 5*time.Second)
			waitTagged(t, p.Tag(), 3) // sh, setsid'd sh, its sleep (+ sleep 30)
			if err := p.Kill(context.Background()); err != nil {
				t.Fatalf("Kill: %v", err)
			}
			if pids, err := TaggedPIDs(p.Tag()); err != nil || len(pids) != 0 {
				t.Errorf("after Kill, tagged processes %v (err %v)", pids, err)
			}
			waitExit(t, p, 5*time.Second)
			o.wait(t, 5*time.Second)
			// No tagged process is left (checked above) to touch it later.
			if _, err := os.Stat(m); err == nil {
				t.Error("MARKER2 exists: the setsid child escaped")
			}
		})
	}
}

// waitTagged waits until at least n processes carry the tag.
func waitTagged(t *testing.T, tag string, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		pids, err := TaggedPIDs(tag)
		if err != nil {
			t.Fatalf("TaggedPIDs: %v", err)
		}
		if len(pids) >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d tagged processes (%v), want %d", len(pids), pids, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitNoneTagged waits until no live process carries the tag.
func waitNoneTagged(t *testing.T, tag string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		pids, err := TaggedPIDs(tag)
		if err != nil {
			t.Fatalf("TaggedPIDs: %v", err)
		}
		if len(pids) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("tagged processes %v still alive after %v", pids, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestKillEscalatesToSIGKILL(t *testing.T) {
	t.Parallel()
	r := newTestRunner(t, Options{KillGrace: 300 * time.Millisecond})
	p := start(t, r, hostapi.StartSpec{Command: "trap '' TERM; echo armed; sleep 30; true"})
	o := collect(p.Stdout())
	collect(p.Stderr())
	o.waitFor(t, "armed", 5*time.Second)
	begin := time.Now()
	if err := p.Kill(context.Background()); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	if d := time.Since(begin); d < 250*time.Millisecond || d > 10*time.Second { // not before the grace, nor sleep 30
		t.Errorf("Kill took %v, want about the 300ms grace", d)
	}
	if code, sig := waitExit(t, p, 5*time.Second); code != -1 || sig != "SIGKILL" {
		t.Errorf("Wait = %d %q, want -1 SIGKILL", code, sig)
	}
}

func TestKillAfterExitIsSafeAndSweepsLeftovers(t *testing.T) {
	r := newTestRunner(t, Options{})
	for _, ptyMode := range []bool{false, true} {
		t.Run(map[bool]string{false: "pipes", true: "pty"}[ptyMode], func(t *testing.T) {
			// The leftover keeps the output open (and ignores the PTY's
			// hangup); the reader must still reach EOF soon after the exit.
			// The pause lets the subshell set its trap before the session
			// leader's exit hangs the terminal up.
			p := start(t, r, hostapi.StartSpec{Command: `(trap '' HUP; exec sleep 600) & sleep 0.3; echo started`, PTY: ptyMode})
			o := collect(p.Stdout())
			var e *collector
			if !ptyMode {
				e = collect(p.Stderr())
			}
			if code, _ := waitExit(t, p, 5*time.Second); code != 0 {
				t.Errorf("exit %d", code)
			}
			if out := o.wait(t, 3*time.Second); !strings.Contains(out, "started") {
				t.Errorf("output %q", out)
			}
			if e != nil {
				e.wait(t, 3*time.Second)
			}
			waitTagged(t, p.Tag(), 1)
			for range 2 { // idempotent
				if err := p.Kill(context.Background()); err != nil {
					t.Fatalf("Kill after exit: %v", err)
				}
			}
			if pids, _ := TaggedPIDs(p.Tag()); len(pids) != 0 {
				t.Errorf("leftover survived Kill: %v", pids)
			}
		})
	}
}

func TestOutputWrittenBeforeCutoffIsKept(t *testing.T) {
	r := newTestRunner(t, Options{OutputDrain: 50 * time.Millisecond})
	// 200 KB (more than a pipe buffer) while a leftover holds the pipe open,
	// and a reader that starts late: nothing written before the exit may be
	// lost to the cut-off.
	p := start(t, r, hostapi.StartSpec{Command: `(exec sleep 600) & i=0; while [ $i -lt 2000 ]; do echo 0123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789; i=$((i+1)); done`})
	collect(p.Stderr())
	done := make(chan string)
	go func() {
		time.Sleep(300 * time.Millisecond)
		b, _ := io.ReadAll(p.Stdout())
		done <- string(b)
	}()
	select {
	case out := <-done:
		if len(out) != 2000*101 {
			t.Errorf("read %d bytes, want %d", len(out), 2000*101)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("reader wedged")
	}
}

func TestEnvironmentIsSanitized(t *testing.T) {
	prepend := t.TempDir()
	script := filepath.Join(prepend, "sbx-hello")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho from-prepend\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	environ := append(testEnviron(t),
		"LD_PRELOAD=/nonexistent/evil.so",
		"BASH_ENV=/nonexistent/evil.sh",
		"KEEP_ME=yes",
		"SANDBOXCTL_RUN=inherited-tag",
	)
	r := newTestRunner(t, Options{Environ: environ, PathPrepend: []string{prepend}})
	for _, kv := range r.BaseEnv() {
		if strings.HasPrefix(kv, "LD_PRELOAD=") || strings.HasPrefix(kv, "BASH_ENV=") {
			t.Errorf("BaseEnv keeps %s", kv)
		}
	}
	out, _, _, _ := runPipes(t, r, hostapi.StartSpec{Command: `env; echo "PATH1=${PATH%%:*}"; sbx-hello`, Tag: "fresh-tag"})
	for _, bad := range []string{"LD_PRELOAD=", "BASH_ENV=", "SANDBOXCTL_RUN=inherited-tag"} {
		if strings.Contains(out, bad) {
			t.Errorf("child environment has %s", bad)
		}
	}
	for _, want := range []string{"KEEP_ME=yes", "SANDBOXCTL_RUN=fresh-tag", "PATH1=" + prepend + "\n", "from-prepend"} {
		if !strings.Contains(out, want) {
			t.Errorf("child output lacks %q:\n%s", want, out)
		}
	}
	if !strings.HasPrefix(r.Path(), prepend+":") {
		t.Errorf("Path() = %q, want %s first", r.Path(), prepend)
	}
}

func TestLoginPathProbe(t *testing.T) {
	t.Run("login shell PATH", func(t *testing.T) {
		// /etc/profile (Debian) sets its own PATH for a login sh; whatever it
		// sets, the probe must return a non-empty absolute list.
		r := newTestRunner(t, Options{Shell: "/bin/sh", PathPrepend: []string{"/opt/first"}})
		if !strings.HasPrefix(r.Path(), "/opt/first:") || len(r.Path()) <= len("/opt/first:") {
			t.Errorf("Path() = %q", r.Path())
		}
	})
	t.Run("probe fails: inherited PATH", func(t *testing.T) {
		dir := t.TempDir()
		shell := filepath.Join(dir, "sh")
		if err := os.WriteFile(shell, []byte("#!/bin/sh\nexit 7\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		var logged []string
		r, err := NewRunner(context.Background(), Options{
			Shell:   shell,
			Environ: []string{"PATH=/inherited/bin:/usr/bin"},
			Logf:    func(f string, a ...any) { logged = append(logged, f) },
		})
		if err != nil {
			t.Fatal(err)
		}
		if r.Path() != "/inherited/bin:/usr/bin" {
			t.Errorf("Path() = %q, want the inherited PATH", r.Path())
		}
		if len(logged) == 0 {
			t.Error("probe failure not logged")
		}
	})
	t.Run("profile chatter ignored", func(t *testing.T) {
		dir := t.TempDir()
		shell := filepath.Join(dir, "sh")
		// A "shell" whose profile prints a banner before running -c.
		body := "#!/bin/sh\necho 'Welcome PATH=/evil'\nshift\nexec /bin/sh -c \"PATH=/from/login; $1\"\n"
		if err := os.WriteFile(shell, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
		r, err := NewRunner(context.Background(), Options{Shell: shell, Environ: []string{"PATH=/usr/bin:/bin"}})
		if err != nil {
			t.Fatal(err)
		}
		if r.Path() != "/from/login" {
			t.Errorf("Path() = %q, want /from/login", r.Path())
		}
	})
}

func TestPickShell(t *testing.T) {
	tests := map[string]string{
		"":                     "/bin/sh",
		"/bin/bash":            "/bin/bash",
		"/usr/bin/dash":        "/usr/bin/dash",
		"bash":                 "/bin/sh", // not absolute
		"/usr/bin/fish":        "/bin/sh", // not POSIX
		"/nonexistent/bin/zsh": "/bin/sh", // missing
		"/etc":                 "/bin/sh",
	}
	for in, want := range tests {
		if got := pickShell(in); got != want {
			t.Errorf("pickShell(%q) = %q, want %q", in, got, want)
		}
	}
	if _, err := NewRunner(context.Background(), Options{Shell: "sh", Environ: []string{}}); !errors.Is(err, os.ErrInvalid) {
		t.Errorf("relative Options.Shell: %v, want os.ErrInvalid", err)
	}
	r := newTestRunner(t, Options{Environ: []string{"SHELL=/usr/bin/fish", "PATH=/usr/bin:/bin"}})
	if r.Shell() != "/bin/sh" {
		t.Errorf("Shell() = %q with SHELL=fish", r.Shell())
	}
}

func TestSweepTagValidation(t *testing.T) {
	if _, err := SweepTag(""); !errors.Is(err, os.ErrInvalid) {
		t.Errorf("SweepTag(\"\"): %v", err)
	}
	if _, err := TaggedPIDs("x\x00y"); !errors.Is(err, os.ErrInvalid) {
		t.Errorf("TaggedPIDs with NUL: %v", err)
	}
	if n, err := SweepTag(NewTag()); err != nil || n != 0 {
		t.Errorf("sweep of an unused tag: %d %v", n, err)
	}
}

func TestWaitHonoursContextAndBadDir(t *testing.T) {
	r := newTestRunner(t, Options{})
	p := start(t, r, hostapi.StartSpec{Command: "sleep 30"})
	collect(p.Stdout())
	collect(p.Stderr())
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, _, err := p.Wait(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Wait with an expired ctx: %v, want DeadlineExceeded", err)
	}
	// Kill with an already-cancelled ctx skips the grace but still kills.
	done, cancelDone := context.WithCancel(context.Background())
	cancelDone()
	if err := p.Kill(done); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	if _, sig := waitExit(t, p, 5*time.Second); sig != "SIGKILL" && sig != "SIGTERM" {
		t.Errorf("signal %q", sig)
	}

	if _, err := r.Start(context.Background(), hostapi.StartSpec{Command: "true", Dir: filepath.Join(t.TempDir(), "missing")}); err == nil {
		t.Error("Start in a missing directory succeeded")
	}
	cctx, ccancel := context.WithCancel(context.Background())
	ccancel()
	if _, err := r.Start(cctx, hostapi.StartSpec{Command: "true"}); !errors.Is(err, context.Canceled) {
		t.Errorf("Start with a cancelled ctx: %v", err)
	}
}
