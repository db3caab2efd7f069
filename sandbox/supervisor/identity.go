package supervisor

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// IdentityArg gives the supervisor its sandbox identity:
// `supervisor --identity COMMAND_UID:SUPERVISOR_UID`. The container starts
// it as root with only SupervisorCaps; before anything else it becomes
// SUPERVISOR_UID (keeping those capabilities), and every command of the
// sandbox runs as COMMAND_UID with none.
const IdentityArg = "--identity"

// Identity is a sandbox's pair of ids (each gid equals its uid): Command
// runs every command of the sandbox (and owns its workspace), Supervisor
// runs pid 1. They differ, so no command may open /proc/1/fd (the control
// stream), read /proc/1/environ or signal the supervisor, on any runtime
// (gVisor's /proc ignores the non-dumpable flag but not the owner).
type Identity struct {
	Command    uint32
	Supervisor uint32
}

// String is the IdentityArg value.
func (id Identity) String() string {
	return strconv.FormatUint(uint64(id.Command), 10) + ":" + strconv.FormatUint(uint64(id.Supervisor), 10)
}

// ParseIdentity parses "COMMAND_UID:SUPERVISOR_UID": two distinct non-zero
// uids.
func ParseIdentity(s string) (Identity, error) {
	c, sup, ok := strings.Cut(s, ":")
	if !ok {
		return Identity{}, fmt.Errorf("identity %q: want COMMAND_UID:SUPERVISOR_UID", s)
	}
	cu, err := strconv.ParseUint(c, 10, 32)
	if err != nil {
		return Identity{}, fmt.Errorf("identity %q: command uid: %w", s, err)
	}
	su, err := strconv.ParseUint(sup, 10, 32)
	if err != nil {
		return Identity{}, fmt.Errorf("identity %q: supervisor uid: %w", s, err)
	}
	id := Identity{Command: uint32(cu), Supervisor: uint32(su)}
	if id.Command == 0 || id.Supervisor == 0 || id.Command == id.Supervisor {
		return Identity{}, fmt.Errorf("identity %q: the two uids must be distinct and not 0", s)
	}
	return id, nil
}

// Credential is what a command is forked with: the command uid and gid,
// no supplementary groups.
func (id Identity) Credential() *syscall.Credential {
	return &syscall.Credential{Uid: id.Command, Gid: id.Command, Groups: []uint32{}}
}

// SupervisorCaps are the capabilities the container grants (CapAdd, on
// top of CapDrop ALL) so that the supervisor, started as root, can become
// its own uid and still fork commands as the command uid (SETUID,
// SETGID), end their trees (KILL) and read their /proc entries for the
// tag sweep and input waits (SYS_PTRACE, and DAC_OVERRIDE: a command's
// /proc/PID/syscall and environ are mode 0400 and its uid's, and the
// permission bits are checked before ptrace access is). DAC_OVERRIDE, not
// DAC_READ_SEARCH, which would let Docker's seccomp profile open
// open_by_handle_at. Commands never hold any: they
// are exec'd as a non-root uid with empty inheritable and ambient sets,
// under no-new-privileges.
// SETPCAP only lets it empty the bounding set first, so a command's
// bounding set is empty too; the supervisor does not keep it.
var SupervisorCaps = []string{"SETUID", "SETGID", "KILL", "SYS_PTRACE", "DAC_OVERRIDE", "SETPCAP"}

var supervisorCapBits = []uintptr{unix.CAP_SETUID, unix.CAP_SETGID, unix.CAP_KILL, unix.CAP_SYS_PTRACE, unix.CAP_DAC_OVERRIDE}

// BecomeSupervisor turns a process started as root into id.Supervisor
// (uid, gid, no groups) that keeps only SupervisorCaps, on every thread. It
// must run before any command of the sandbox does.
func BecomeSupervisor(id Identity) error {
	if syscall.Getuid() != 0 {
		return errors.New("identity: the supervisor must start as root to take its identity")
	}
	// An empty bounding set: nothing forked from here may ever gain a
	// capability (the permitted set keeps the supervisor's own).
	for c := uintptr(0); ; c++ {
		_, _, e := syscall.AllThreadsSyscall(syscall.SYS_PRCTL, unix.PR_CAPBSET_DROP, c, 0)
		if e == syscall.EINVAL {
			break // past the kernel's last capability
		}
		if e != 0 {
			return fmt.Errorf("identity: PR_CAPBSET_DROP %d: %w", c, e)
		}
	}
	if _, _, e := syscall.AllThreadsSyscall(syscall.SYS_PRCTL, unix.PR_SET_KEEPCAPS, 1, 0); e != 0 {
		return fmt.Errorf("identity: PR_SET_KEEPCAPS: %w", e)
	}
	if err := syscall.Setgroups([]int{}); err != nil {
		return fmt.Errorf("identity: setgroups: %w", err)
	}
	s := int(id.Supervisor)
	if err := syscall.Setresgid(s, s, s); err != nil {
		return fmt.Errorf("identity: setresgid %d: %w", s, err)
	}
	if err := syscall.Setresuid(s, s, s); err != nil {
		return fmt.Errorf("identity: setresuid %d: %w", s, err)
	}
	// The uid change cleared the effective set (KEEPCAPS kept the
	// permitted one): raise the kept capabilities again, drop the rest.
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	for _, c := range supervisorCapBits {
		data[c/32].Effective |= 1 << (c % 32)
		data[c/32].Permitted |= 1 << (c % 32)
	}
	if _, _, e := syscall.AllThreadsSyscall(syscall.SYS_CAPSET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0); e != 0 {
		return fmt.Errorf("identity: capset: %w", e)
	}
	if _, _, e := syscall.AllThreadsSyscall(syscall.SYS_PRCTL, unix.PR_SET_KEEPCAPS, 0, 0); e != 0 {
		return fmt.Errorf("identity: PR_SET_KEEPCAPS off: %w", e)
	}
	if syscall.Getuid() != s || syscall.Geteuid() != s {
		return fmt.Errorf("identity: still uid %d after setresuid %d", syscall.Geteuid(), s)
	}
	return nil
}
