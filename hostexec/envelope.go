package hostexec

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/landlock-lsm/go-landlock/landlock"
	"golang.org/x/sys/unix"
)

// EnvelopeArg, as the first argument of the launcher executable
// (Options.Launcher: sandboxctld), makes it the launcher of one gateway
// command inside its envelope (issue 25):
//
//	LAUNCHER --envelope [--uid N --gid N] [--write DIR]... [--secret PATH]... [--confine DIR] -- PATH ARGV0 ARGS...
//
// It hands the command's pipes and terminal to the identity, restricts
// itself with Landlock (every file-system right and IPC scope of the
// running kernel, at least ABI 3), drops to the identity (uid, gid, no
// supplementary groups), installs the seccomp filter (DeniedSyscalls, with
// no_new_privs) and execs PATH. Everything the command runs inherits all
// of it. It returns only on failure, and then nothing of the command ran.
const EnvelopeArg = "--envelope"

// envelopeMinABI is the oldest Landlock ABI the envelope runs on: ABI 3
// added truncate, without which a command could truncate any file its uid
// may write outside the paths it may write.
const envelopeMinABI = 3

// ErrEnvelopeUnavailable is returned when this kernel cannot enforce the
// envelope (no Landlock, or one older than ABI 3): the command does not run.
var ErrEnvelopeUnavailable = errors.New("the gateway envelope cannot be enforced on this kernel")

// Envelope is what every gateway command runs inside (Options.Envelope).
type Envelope struct {
	// Identity is the uid and gid commands run as. It is required when the
	// daemon is root and refused otherwise (only root can switch): a
	// non-root daemon's commands keep its uid, inside the rest of the
	// envelope.
	Identity *Identity
	// Writable are the directories commands may write (the gateway's
	// workspace, exec.cwd, and what the configuration declares). Nothing
	// else is writable but /dev/null and the command's own terminal. A
	// command the guard confined to a workspace (StartSpec.Confine) writes
	// only there.
	Writable []string
	// Secrets are paths no command may read (DefaultSecrets): reading is
	// otherwise allowed everywhere but /dev, where only the devices of
	// deviceRules are.
	Secrets []string
}

// validate checks the envelope's paths and its identity against this
// process's uid.
func (e *Envelope) validate() error {
	for _, p := range slices.Concat(e.Writable, e.Secrets) {
		if !filepath.IsAbs(p) {
			return fmt.Errorf("hostexec: envelope: %q is not an absolute path: %w", p, os.ErrInvalid)
		}
	}
	// Landlock cannot take back what a grant covers: a secret under a
	// writable directory would be readable through it.
	for _, w := range e.Writable {
		for _, sec := range e.Secrets {
			if within(realPath(sec), realPath(w)) {
				return fmt.Errorf("hostexec: envelope: the secret location %s lies in the writable directory %s, which would expose it; write somewhere narrower: %w", sec, w, os.ErrInvalid)
			}
		}
	}
	root := os.Geteuid() == 0
	switch {
	case root && e.Identity == nil:
		return fmt.Errorf("hostexec: envelope: the daemon runs as root, so gateway commands need an identity of their own: %w", os.ErrInvalid)
	case !root && e.Identity != nil:
		return fmt.Errorf("hostexec: envelope: only a root daemon can run gateway commands as uid %d: %w", e.Identity.UID, os.ErrInvalid)
	case e.Identity != nil && (e.Identity.UID <= 0 || e.Identity.GID <= 0):
		return fmt.Errorf("hostexec: envelope: identity %d:%d is root: %w", e.Identity.UID, e.Identity.GID, os.ErrInvalid)
	}
	return nil
}

// launcherArgs are the arguments after EnvelopeArg up to "--".
func (e *Envelope) launcherArgs(confine string) []string {
	var a []string
	if e.Identity != nil {
		a = append(a, "--uid", strconv.Itoa(e.Identity.UID), "--gid", strconv.Itoa(e.Identity.GID))
	}
	for _, w := range e.Writable {
		a = append(a, "--write", w)
	}
	for _, s := range e.Secrets {
		a = append(a, "--secret", s)
	}
	if confine != "" {
		a = append(a, "--confine", confine)
	}
	return a
}

// envelopePolicy is what the launcher enforces, parsed from its arguments.
type envelopePolicy struct {
	identity *Identity
	writable []string
	secrets  []string
	confine  string
}

// pathList is a repeatable flag of absolute paths.
type pathList []string

func (p *pathList) String() string { return strings.Join(*p, ",") }

func (p *pathList) Set(v string) error {
	if !filepath.IsAbs(v) {
		return fmt.Errorf("%q is not an absolute path", v)
	}
	*p = append(*p, filepath.Clean(v))
	return nil
}

// parseEnvelopeArgs parses the launcher's arguments after EnvelopeArg into
// the policy and the command (PATH ARGV0 ARGS...).
func parseEnvelopeArgs(args []string) (envelopePolicy, []string, error) {
	fs := flag.NewFlagSet(EnvelopeArg, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	uid := fs.Int("uid", -1, "")
	gid := fs.Int("gid", -1, "")
	var pol envelopePolicy
	fs.Var((*pathList)(&pol.writable), "write", "")
	fs.Var((*pathList)(&pol.secrets), "secret", "")
	fs.StringVar(&pol.confine, "confine", "", "")
	if err := fs.Parse(args); err != nil {
		return pol, nil, fmt.Errorf("envelope: %w", err)
	}
	if fs.NArg() < 2 {
		return pol, nil, errors.New("envelope: want [OPTIONS] -- PATH ARGV0 [ARGS...]")
	}
	if (*uid < 0) != (*gid < 0) {
		return pol, nil, errors.New("envelope: --uid and --gid go together")
	}
	if *uid >= 0 {
		if *uid == 0 || *gid == 0 {
			return pol, nil, errors.New("envelope: the identity must not be root")
		}
		pol.identity = &Identity{UID: *uid, GID: *gid}
	}
	if pol.confine != "" && !filepath.IsAbs(pol.confine) {
		return pol, nil, fmt.Errorf("envelope: confine directory %q is not absolute", pol.confine)
	}
	return pol, fs.Args(), nil
}

// EnvelopeExec is the launcher mode (the arguments after EnvelopeArg): it
// enters the envelope and execs the command with this process's
// environment. It returns only on failure, and then nothing of the
// command ran.
func EnvelopeExec(args []string) error {
	pol, argv, err := parseEnvelopeArgs(args)
	if err != nil {
		return err
	}
	if err := enterEnvelope(pol); err != nil {
		return err
	}
	if err := unix.Exec(argv[0], argv[1:], os.Environ()); err != nil {
		return fmt.Errorf("envelope: exec %s: %w", argv[0], err)
	}
	return nil
}

// landlockVersions are go-landlock's configurations by ABI (index 0 = ABI 1).
var landlockVersions = []landlock.Config{
	landlock.V1, landlock.V2, landlock.V3, landlock.V4, landlock.V5, landlock.V6,
	landlock.V7, landlock.V8, landlock.V9, landlock.V10, landlock.V11,
}

// envelopeConfig handles every file-system right and IPC scope of
// Landlock ABI abi (or of the newest ABI go-landlock knows), not network
// access: commands keep the network. It refuses an ABI older than
// envelopeMinABI. The configuration is enforced strictly (no best effort):
// if the kernel refuses any of it, the command does not run.
func envelopeConfig(abi int) (landlock.Config, error) {
	if abi < envelopeMinABI {
		return landlock.Config{}, fmt.Errorf("%w: Landlock ABI %d, need %d (truncate)", ErrEnvelopeUnavailable, abi, envelopeMinABI)
	}
	v := landlockVersions[min(abi, len(landlockVersions))-1]
	args := []any{v.HandledAccessFS}
	if v.Scoped != 0 {
		args = append(args, v.Scoped)
	}
	c, err := landlock.NewConfig(args...)
	if err != nil {
		return landlock.Config{}, fmt.Errorf("envelope: landlock: %w", err)
	}
	return *c, nil
}

// envelopeRules is the Landlock ruleset of pol: for a command the guard
// confined to a workspace, ConfineRules (that workspace only); otherwise
// reading everywhere but the secrets and /dev (readableExcept), writing
// the writable directories, and the devices and terminals of deviceRules.
func envelopeRules(abi int, pol envelopePolicy, home string, ttys []string) ([]landlock.Rule, error) {
	if pol.confine != "" {
		return ConfineRules(abi, pol.confine, home, ttys, pol.secrets)
	}
	rules := readableExcept([]string{"/"}, append(slices.Clone(pol.secrets), "/dev"))
	rules = append(rules, deviceRules(ttys)...)
	if len(pol.writable) > 0 {
		rules = append(rules, landlock.RWDirs(pol.writable...).WithRefer().IgnoreIfMissing())
	}
	return rules, nil
}

// enterEnvelope applies pol to this process: Landlock (while still
// privileged, so that every rule's path can be opened), then the identity,
// then seccomp. A root process without an identity is refused: a gateway
// command never runs as root.
func enterEnvelope(pol envelopePolicy) error {
	if pol.identity == nil && os.Geteuid() == 0 {
		return errors.New("envelope: refusing to run a gateway command as root without an identity")
	}
	abi, err := LandlockABI()
	if err != nil {
		return fmt.Errorf("envelope: %w: %w", ErrEnvelopeUnavailable, err)
	}
	cfg, err := envelopeConfig(abi)
	if err != nil {
		return err
	}
	ttys := ownTerminals()
	rules, err := envelopeRules(abi, pol, os.Getenv("HOME"), ttys)
	if err != nil {
		return fmt.Errorf("envelope: %w", err)
	}
	if pol.identity != nil {
		if err := handOverStdio(*pol.identity); err != nil {
			return err
		}
	}
	if err := cfg.Restrict(rules...); err != nil {
		return fmt.Errorf("envelope: landlock: %w", err)
	}
	if pol.identity != nil {
		if err := dropTo(*pol.identity); err != nil {
			return err
		}
	}
	return loadSeccomp()
}

// handOverStdio gives the identity the command's own pipes and terminal
// (fds 0-2): the daemon (or the host supervisor) made them as root, mode
// 0600 and 0620, and a command reopens them by name (/dev/stdout, `tty`).
// Nothing else is changed: /dev/null and files stay as they are.
func handOverStdio(id Identity) error {
	for fd := range 3 {
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			continue // not open
		}
		own := st.Mode&unix.S_IFMT == unix.S_IFIFO
		if st.Mode&unix.S_IFMT == unix.S_IFCHR {
			l, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", fd))
			own = err == nil && strings.HasPrefix(l, "/dev/pts/")
		}
		if !own {
			continue
		}
		if err := unix.Fchown(fd, id.UID, id.GID); err != nil {
			return fmt.Errorf("envelope: hand fd %d to uid %d: %w", fd, id.UID, err)
		}
	}
	return nil
}

// dropTo switches every thread to id (real, effective and saved uid and
// gid; no supplementary groups) and checks that root cannot be had back.
func dropTo(id Identity) error {
	if err := syscall.Setgroups(nil); err != nil {
		return fmt.Errorf("envelope: setgroups: %w", err)
	}
	if err := syscall.Setresgid(id.GID, id.GID, id.GID); err != nil {
		return fmt.Errorf("envelope: setresgid %d: %w", id.GID, err)
	}
	if err := syscall.Setresuid(id.UID, id.UID, id.UID); err != nil {
		return fmt.Errorf("envelope: setresuid %d: %w", id.UID, err)
	}
	if err := syscall.Setresuid(0, 0, 0); err == nil {
		return errors.New("envelope: uid 0 could be regained after the switch")
	}
	ru, eu, su := unix.Getresuid()
	rg, eg, sg := unix.Getresgid()
	if ru != id.UID || eu != id.UID || su != id.UID || rg != id.GID || eg != id.GID || sg != id.GID {
		return fmt.Errorf("envelope: running as %d/%d/%d:%d/%d/%d, not %d:%d", ru, eu, su, rg, eg, sg, id.UID, id.GID)
	}
	return nil
}
