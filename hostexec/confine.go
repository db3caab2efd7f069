package hostexec

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/landlock-lsm/go-landlock/landlock"
	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// ConfineArg, as the first argument of the launcher executable
// (Options.Launcher: sandboxctld), makes it the confining launcher of one
// command: `LAUNCHER --confine-workspace DIR PATH ARGV0 ARGS...` restricts
// itself with a Landlock ruleset (ConfineRules: DIR read-write, the system
// directories read and execute, nothing else of the file system) and execs
// PATH. The ruleset is inherited by everything the command runs, so the
// kernel refuses at open what the guard's external-directory check refused
// by name (issue 12 item 9).
const ConfineArg = "--confine-workspace"

// ErrLandlockUnavailable is returned when the kernel offers no Landlock
// (older than 5.13, or the LSM not enabled at boot).
var ErrLandlockUnavailable = errors.New("landlock unavailable")

// confineABI is the Landlock ABI whose file-system rights the ruleset
// handles (V5: every file right up to truncate and device ioctls). Newer
// kernels enforce exactly these; older ones (V1..V4) the subset they know
// (best effort), which still confines reads, writes and execution.
var confineABI = landlock.V5

// LandlockABI returns the kernel's Landlock ABI version, or
// ErrLandlockUnavailable.
func LandlockABI() (int, error) {
	v, err := llsys.LandlockGetABIVersion()
	if err != nil || v < 1 {
		if err == nil {
			err = fmt.Errorf("ABI version %d", v)
		}
		return 0, fmt.Errorf("%w: %v", ErrLandlockUnavailable, err)
	}
	return v, nil
}

// System paths a confined command may read and execute from: what a
// program needs to run (binaries, libraries, the dynamic loader's and libc's
// configuration, name service, time zone, locale, certificates, terminfo),
// never a directory that holds secrets as a whole: /etc is granted file by
// file, so /etc/shadow, /etc/ssh and /etc/sudoers stay out. /tmp, /proc,
// /sys, /run, /var and the home directory are not granted.
var (
	confineSystemDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}
	confineEtc        = []string{
		"/etc/ld.so.cache", "/etc/ld.so.preload", "/etc/ld.so.conf", "/etc/ld.so.conf.d",
		"/etc/nsswitch.conf", "/etc/passwd", "/etc/group", "/etc/host.conf", "/etc/hosts",
		"/etc/resolv.conf", "/etc/gai.conf", "/etc/services", "/etc/protocols",
		"/etc/localtime", "/etc/timezone", "/etc/locale.alias", "/etc/locale.conf", "/etc/default/locale",
		"/etc/alternatives", "/etc/ssl", "/etc/ca-certificates", "/etc/pki",
		"/etc/terminfo", "/etc/inputrc", "/etc/magic", "/etc/mime.types",
		"/etc/gitconfig", "/etc/os-release", "/etc/debian_version",
	}
	// Devices: read-write (with ioctls, for terminals) and read-only.
	// Not /dev/pts as a whole: every pseudo-terminal of the uid is there
	// (the person's, other sessions'), and reading one steals what is typed
	// into it. The command's own terminal is granted by name (see
	// ownTerminals).
	confineDevRW = []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/tty"}
	confineDevRO = []string{"/dev/random", "/dev/urandom"}
	// confineHomeFiles are read-only paths under $HOME that common programs
	// fail without when they exist but are unreadable (git dies on an
	// unreadable ~/.gitconfig).
	confineHomeFiles = []string{".gitconfig", ".config/git"}
)

// ConfineRules is the Landlock ruleset of a command confined to workspace
// on a kernel of Landlock ABI abi: workspace read-write (renames and links
// between its directories included from ABI 2 on; ABI 1 refuses those
// with EXDEV, which mv and cp handle by copying), the system paths above
// read and execute, the devices above and the terminals ttys (the
// command's own, read-write), and home's git configuration read-only; of
// the read-only paths, never the secret locations under them (secrets,
// see readableExcept: /etc/ssl/private under /etc/ssl, git's credential
// store under ~/.config/git). Paths that do not exist are left out.
func ConfineRules(abi int, workspace, home string, ttys, secrets []string) ([]landlock.Rule, error) {
	if !filepath.IsAbs(workspace) {
		return nil, fmt.Errorf("confine: workspace %q is not an absolute path", workspace)
	}
	st, err := os.Stat(workspace)
	if err != nil {
		return nil, fmt.Errorf("confine: workspace: %w", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("confine: workspace %s is not a directory", workspace)
	}
	ws := landlock.RWDirs(workspace)
	if abi >= 2 {
		// Asking for refer on ABI 1 would make go-landlock's best effort
		// enforce nothing at all.
		ws = ws.WithRefer()
	}
	ro := append(slices.Clone(confineSystemDirs), confineEtc...)
	if filepath.IsAbs(home) {
		for _, f := range confineHomeFiles {
			ro = append(ro, filepath.Join(home, f))
		}
	}
	rules := append([]landlock.Rule{ws}, readableExcept(ro, secrets)...)
	return append(rules, deviceRules(ttys)...), nil
}

// deviceRules grant the devices every command may use (confineDevRW with
// terminal ioctls, confineDevRO) and its own terminals ttys.
func deviceRules(ttys []string) []landlock.Rule {
	return []landlock.Rule{
		landlock.RWFiles(append(slices.Clone(confineDevRW), ttys...)...).WithIoctlDev().IgnoreIfMissing(),
		landlock.ROFiles(confineDevRO...).IgnoreIfMissing(),
	}
}

// Confine restricts this process (every thread, and everything it execs
// or forks from now on) to workspace (ConfineRules). It fails when the
// kernel has no Landlock: a caller that was promised confinement must not
// run the command without it.
func Confine(workspace string) error {
	abi, err := LandlockABI()
	if err != nil {
		return fmt.Errorf("confine: %w", err)
	}
	return confineAt(confineABI, abi, workspace)
}

// confineAt enforces ConfineRules for abi with the file rights of cfg (best
// effort: those of them the kernel knows).
func confineAt(cfg landlock.Config, abi int, workspace string) error {
	home := os.Getenv("HOME")
	rules, err := ConfineRules(abi, workspace, home, ownTerminals(), DefaultSecrets(home, ""))
	if err != nil {
		return err
	}
	if err := cfg.BestEffort().RestrictPaths(rules...); err != nil {
		return fmt.Errorf("confine: landlock: %w", err)
	}
	return nil
}

// ownTerminals names the pseudo-terminals this process has as stdin,
// stdout or stderr (a PTY session's): the command may reopen its own
// terminal by name (ttyname), and no other.
func ownTerminals() []string {
	var out []string
	for fd := range 3 {
		l, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", fd))
		if err == nil && strings.HasPrefix(l, "/dev/pts/") && !slices.Contains(out, l) {
			out = append(out, l)
		}
	}
	return out
}

// ConfineExec is the launcher mode (the arguments after ConfineArg:
// WORKSPACE PATH ARGV0 ARGS...): Confine, then exec PATH with this
// process's environment. It returns only on failure, and then nothing of
// the command ran.
func ConfineExec(args []string) error {
	if len(args) < 3 {
		return errors.New("confine: want WORKSPACE PATH ARGV0 [ARGS...]")
	}
	if err := Confine(args[0]); err != nil {
		return err
	}
	if err := unix.Exec(args[1], args[2:], os.Environ()); err != nil {
		return fmt.Errorf("confine: exec %s: %w", args[1], err)
	}
	return nil
}
