package hostexec

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/creack/pty"

	"github.com/sandboxctl/sandboxctl/api"
	"github.com/sandboxctl/sandboxctl/envguard"
)

// Defaults of Options and of the output handling.
const (
	// DefaultOutputDrain is how long output readers keep waiting for more
	// output after the command itself exited (see Process.Stdout).
	DefaultOutputDrain = 250 * time.Millisecond
	// fallbackShell is used when $SHELL is unset or not a POSIX shell.
	fallbackShell = "/bin/sh"
	// loginPathTimeout bounds the one-off login-shell probe in NewRunner.
	loginPathTimeout = 5 * time.Second
	// pathMarker prefixes the PATH the login-shell probe prints, so that
	// anything a profile script prints first is ignored.
	pathMarker = "__SANDBOXCTL_PATH__="
)

// isPOSIXShell reports whether a shell name is accepted from $SHELL: these
// all understand `-c COMMAND` and `-l` with POSIX semantics. fish, csh, tcsh
// and friends do not, so a user whose login shell is one of them gets /bin/sh.
func isPOSIXShell(name string) bool {
	switch name {
	case "sh", "bash", "dash", "zsh", "ksh", "ash":
		return true
	}
	return false
}

// Options configure a Runner. The zero value is usable.
type Options struct {
	// Shell runs every command as `Shell -c COMMAND`. Default: $SHELL (from
	// Environ) if it is an absolute path to an existing POSIX shell (sh bash
	// dash zsh ksh ash), else /bin/sh.
	Shell string
	// PathPrepend is put in front of the login shell's PATH (config
	// exec.pathPrepend); duplicates are removed.
	PathPrepend []string
	// KillGrace is the wait between SIGTERM and SIGKILL in Kill. Default 3s.
	KillGrace time.Duration
	// OutputDrain is how long the output readers of a Process wait for more
	// output once the command exited while something it left behind still
	// holds the output open. Default 250ms.
	OutputDrain time.Duration
	// Environ is the inherited environment to sanitise. Default os.Environ().
	Environ []string
	// Logf, when set, receives diagnostics (login-shell probe failures).
	Logf func(format string, args ...any)
	// Launcher is the executable that implements ConfineArg (sandboxctld):
	// a Spec with Confine set starts through it. Without one, such a Spec
	// is refused.
	Launcher string
	// Envelope, when set, is what every command runs inside (through the
	// Launcher, EnvelopeArg): an identity of its own, Landlock, seccomp
	// and no_new_privs. Without it commands run as this process, and
	// only a Spec with Confine is confined.
	Envelope *Envelope
}

// Runner starts commands on this machine. It is safe for concurrent use.
type Runner struct {
	shell       string
	environ     []string // inherited, unsanitised
	pathPrepend []string
	// envOnce computes path and baseEnv on first use: the login-shell
	// probe costs a login profile's run, which a daemon whose commands all
	// go to sandboxes never needs to pay.
	envOnce     sync.Once
	path        string
	baseEnv     []string
	killGrace   time.Duration
	outputDrain time.Duration
	logf        func(format string, args ...any)
	launcher    string
	envelope    *Envelope
	// landlockABI probes the kernel's Landlock (LandlockABI); tests
	// replace it to see the behaviour of a kernel without it.
	landlockABI func() (int, error)
	// openPTY opens a PTY pair; tests replace it to exercise the pipe fallback.
	openPTY func() (ptmx, tty *os.File, err error)
}

// NewRunner resolves the shell. PATH is computed once, on first use: the
// login shell's PATH (probed with `SHELL -lc`, bounded by a short timeout,
// falling back to the inherited PATH) with opts.PathPrepend in front.
func NewRunner(ctx context.Context, opts Options) (*Runner, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("hostexec: %w", err)
	}
	environ := opts.Environ
	if environ == nil {
		environ = os.Environ()
	}
	shell := opts.Shell
	if shell == "" {
		shell = pickShell(lookupEnv(environ, "SHELL"))
	} else if !filepath.IsAbs(shell) {
		return nil, fmt.Errorf("hostexec: shell %q is not an absolute path: %w", shell, os.ErrInvalid)
	}
	if fi, err := os.Stat(shell); err != nil {
		return nil, fmt.Errorf("hostexec: shell: %w", err)
	} else if fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
		return nil, fmt.Errorf("hostexec: shell %s is not an executable file: %w", shell, os.ErrInvalid)
	}
	if opts.Envelope != nil {
		if err := opts.Envelope.validate(); err != nil {
			return nil, err
		}
		if opts.Launcher == "" {
			return nil, fmt.Errorf("hostexec: an envelope needs a launcher: %w", os.ErrInvalid)
		}
	}
	r := &Runner{
		shell:       shell,
		environ:     environ,
		pathPrepend: opts.PathPrepend,
		killGrace:   opts.KillGrace,
		outputDrain: opts.OutputDrain,
		logf:        opts.Logf,
		launcher:    opts.Launcher,
		envelope:    opts.Envelope,
		landlockABI: LandlockABI,
		openPTY:     pty.Open,
	}
	if r.killGrace <= 0 {
		r.killGrace = api.KillGrace
	}
	if r.outputDrain <= 0 {
		r.outputDrain = DefaultOutputDrain
	}
	if r.logf == nil {
		r.logf = func(string, ...any) {}
	}
	return r, nil
}

// env computes PATH and the base environment on first use.
func (r *Runner) env() (path string, baseEnv []string) {
	r.envOnce.Do(func() {
		sanitized := envguard.SanitizeInherited(r.environ)
		loginPath, err := probeLoginPath(context.Background(), r.shell, sanitized)
		if err != nil {
			loginPath = lookupEnv(r.environ, "PATH")
			r.logf("hostexec: login shell PATH probe failed, using the inherited PATH: %v", err)
		}
		r.path = envguard.BuildPath(loginPath, r.pathPrepend)
		r.baseEnv = envguard.Merge(sanitized, map[string]string{"PATH": r.path})
	})
	return r.path, r.baseEnv
}

// Landlock returns the kernel's Landlock ABI version, or an error matching
// ErrLandlockUnavailable: then commands that should be confined run
// unconfined, each with a warning (see Spec.Confine).
func (r *Runner) Landlock() (int, error) { return r.landlockABI() }

// Shell is the shell every command runs under.
func (r *Runner) Shell() string { return r.shell }

// Path is the PATH every command gets.
func (r *Runner) Path() string {
	p, _ := r.env()
	return p
}

// BaseEnv is the environment every command starts from: the inherited
// environment with envguard's blocked variables dropped and PATH replaced by
// the built PATH. It returns a fresh copy.
func (r *Runner) BaseEnv() []string {
	_, b := r.env()
	return append([]string(nil), b...)
}

// pickShell returns $SHELL when it names an existing POSIX shell by absolute
// path, else /bin/sh.
func pickShell(envShell string) string {
	if envShell == "" || !filepath.IsAbs(envShell) || !isPOSIXShell(filepath.Base(envShell)) {
		return fallbackShell
	}
	if fi, err := os.Stat(envShell); err != nil || fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
		return fallbackShell
	}
	return envShell
}

// probeLoginPath runs `shell -lc` to learn the PATH the user's login profile
// sets up. The probe gets the sanitised environment (never the daemon's raw
// one), no stdin, its own process group (killed as a whole on timeout), and
// prints PATH after a marker so that profile chatter is ignored.
func probeLoginPath(ctx context.Context, shell string, env []string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, loginPathTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, shell, "-lc", `printf '\n`+pathMarker+`%s\n' "$PATH"`)
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// TERM first: profile scripts hold locks they release on exit (pyenv's
	// rehash lock, for one); a KILL mid-profile leaves them behind, and
	// every later login shell of the user then waits for them. KILL what
	// is left after a second.
	cmd.Cancel = func() error {
		pgid := cmd.Process.Pid
		time.AfterFunc(time.Second, func() { _ = syscall.Kill(-pgid, syscall.SIGKILL) })
		return syscall.Kill(-pgid, syscall.SIGTERM)
	}
	cmd.WaitDelay = 2 * time.Second
	var out bytes.Buffer
	cmd.Stdout = &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s -lc: %w", shell, err)
	}
	for _, line := range strings.Split(out.String(), "\n") {
		if p, ok := strings.CutPrefix(line, pathMarker); ok && p != "" {
			return p, nil
		}
	}
	return "", errors.New("login shell printed no PATH")
}

// lookupEnv returns the first value of key in environ, as getenv(3) does.
func lookupEnv(environ []string, key string) string {
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok && k == key {
			return v
		}
	}
	return ""
}
