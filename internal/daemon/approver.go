package daemon

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/sandboxctl/sandboxctl/envknob"
)

// ErrNotApprover is the refusal of an approval decision from a caller that
// may not decide approvals: a process sandboxctl started, a sandbox, or a
// caller the daemon cannot verify.
var ErrNotApprover = errors.New("not allowed to decide approvals")

// maxAncestry bounds the walk up the process tree (pid_max is 2^22, and a
// real chain is a few dozen deep).
const maxAncestry = 4096

// approverCheck decides whether the process behind a unix socket
// connection may decide approvals. It refuses, failing closed:
//
//   - a peer without credentials, or of another uid than the daemon's
//     (root excepted);
//   - a peer in another pid namespace than the daemon (a container: every
//     sandbox);
//   - a peer that is the daemon itself or descends from it (a command, the
//     approval hook, anything they started — the daemon is the child
//     subreaper of its tree, see AdoptOrphans, so a double fork does not
//     leave it);
//   - a peer that descends from a process running the daemon's own
//     executable: a node agent on this machine (also a subreaper), another
//     daemon, a `sandboxctld shell`;
//   - a peer any of whose ancestors, or itself, carries SANDBOXCTL_RUN in
//     its environment (a process of a sandboxctl command of any daemon,
//     including one that outlived a previous daemon).
//
// A person's shell passes: it neither descends from the daemon nor carries
// the tag.
type approverCheck struct {
	self int         // the daemon's pid
	uid  int         // the daemon's effective uid
	exe  os.FileInfo // the daemon's executable; nil skips that rule
	// exePath is where the daemon's executable lies ("" skips that
	// rule): an ancestor that runs an older file at that path (a host
	// supervisor started before an upgrade, re-adopted after a crash)
	// is sandboxctl's runtime too.
	exePath string
	proc    string // procfs mount, "/proc"
}

func newApproverCheck() approverCheck {
	exe, _ := os.Stat("/proc/self/exe")
	path, _ := os.Readlink("/proc/self/exe")
	return approverCheck{self: os.Getpid(), uid: os.Geteuid(), exe: exe, exePath: strings.TrimSuffix(path, deletedSuffix), proc: "/proc"}
}

func refuse(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrNotApprover, fmt.Sprintf(format, args...))
}

// check runs the rules on the peer. With a pidfd of the peer it makes
// sure the process it read under /proc/PID is the one that connected: the
// peer is alive before and after the walk, so its pid cannot have been
// reused in between (a pid is free only once its holder is gone). Without
// one (kernels before 6.5) that re-use stays a known limit.
func (c approverCheck) check(p Peer) error {
	if p.PID <= 0 {
		return refuse("the daemon cannot tell which process is asking")
	}
	fd, err := p.pidfd()
	switch {
	case err == nil:
		defer unix.Close(fd)
		if err := alive(fd); err != nil {
			return refuse("the process that connected (pid %d) is gone: %v", p.PID, err)
		}
	case errors.Is(err, errors.ErrUnsupported), p.conn == nil:
		fd = -1
	default:
		return refuse("pidfd of pid %d: %v", p.PID, err)
	}
	if err := c.rules(p); err != nil {
		return err
	}
	if fd >= 0 {
		if err := alive(fd); err != nil {
			return refuse("the process that connected (pid %d) ended during the check: %v", p.PID, err)
		}
	}
	return nil
}

// alive reports whether the process of a pidfd still runs.
func alive(pidfd int) error {
	return unix.PidfdSendSignal(pidfd, 0, nil, 0)
}

func (c approverCheck) rules(p Peer) error {
	if p.UID != c.uid && p.UID != 0 {
		return refuse("uid %d is not the daemon's (%d)", p.UID, c.uid)
	}
	own, err := os.Readlink(c.proc + "/self/ns/pid")
	if err != nil {
		return refuse("reading the daemon's pid namespace: %v", err)
	}
	theirs, err := os.Readlink(fmt.Sprintf("%s/%d/ns/pid", c.proc, p.PID))
	if err != nil {
		return refuse("reading the pid namespace of pid %d: %v", p.PID, err)
	}
	if own != theirs {
		return refuse("pid %d runs in another pid namespace (a container or sandbox)", p.PID)
	}
	needle := []byte("\x00" + string(envknob.RunTag) + "=")
	pid := p.PID
	for range maxAncestry {
		if pid == c.self {
			return refuse("pid %d was started by this daemon (a command, or a process a command started)", p.PID)
		}
		if pid != p.PID && c.runsDaemonExe(pid) {
			return refuse("pid %d descends from pid %d, which runs sandboxctl's runtime (a node agent, a daemon, a host supervisor, a sandboxctl shell)", p.PID, pid)
		}
		parent, err := c.ppid(pid)
		if err != nil {
			return refuse("reading pid %d: %v", pid, err)
		}
		env, err := os.ReadFile(fmt.Sprintf("%s/%d/environ", c.proc, pid))
		switch {
		case err == nil:
			if bytes.Contains(append([]byte{0}, env...), needle) {
				return refuse("pid %d carries %s: it was started by a sandboxctl command", pid, envknob.RunTag)
			}
		case !errors.Is(err, os.ErrPermission):
			return refuse("reading the environment of pid %d: %v", pid, err)
		}
		// A process whose environment we may not read is of another uid
		// or not dumpable (sshd's session process, an agent): the tag is
		// a second line only; descent from the daemon is the first.
		if parent <= 0 {
			return nil
		}
		pid = parent
	}
	return refuse("the process tree of pid %d is deeper than %d", p.PID, maxAncestry)
}

// deletedSuffix is what /proc/PID/exe adds to the path of a file that was
// removed or replaced since the process started.
const deletedSuffix = " (deleted)"

// runsDaemonExe reports whether pid runs the daemon's executable: the same
// file, or a file that was at its path (replaced since, by an upgrade).
// Unreadable (another uid, not dumpable): not ours to judge.
func (c approverCheck) runsDaemonExe(pid int) bool {
	exe := fmt.Sprintf("%s/%d/exe", c.proc, pid)
	if c.exe != nil {
		if fi, err := os.Stat(exe); err == nil && os.SameFile(fi, c.exe) {
			return true
		}
	}
	if c.exePath != "" {
		if l, err := os.Readlink(exe); err == nil && strings.TrimSuffix(l, deletedSuffix) == c.exePath {
			return true
		}
	}
	return false
}

// ppid reads the parent pid from /proc/PID/status (0 for a process whose
// parent is outside its pid namespace, e.g. init).
func (c approverCheck) ppid(pid int) (int, error) {
	data, err := os.ReadFile(fmt.Sprintf("%s/%d/status", c.proc, pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(data)) {
		if val, ok := strings.CutPrefix(line, "PPid:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(val))
			if err != nil {
				return 0, fmt.Errorf("pid %d: PPid %q: %w", pid, strings.TrimSpace(val), err)
			}
			return n, nil
		}
	}
	return 0, fmt.Errorf("pid %d: no PPid in status", pid)
}
