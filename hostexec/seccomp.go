package hostexec

import (
	"fmt"
	"runtime"
	"unsafe"

	seccomp "github.com/elastic/go-seccomp-bpf"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// DeniedSyscalls are the system calls a gateway command's seccomp filter
// refuses with EPERM: they reach past the file system rules (namespaces,
// mounts, other processes' memory, kernel keyrings, eBPF, loading code
// into the kernel, io_uring, which bypasses seccomp for what it submits)
// and an unprivileged command has no business with them. clone3 answers
// ENOSYS instead (its flags are in memory a filter cannot read), so libc
// falls back to clone, whose namespace flags are refused.
var DeniedSyscalls = []string{
	"ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd", "kcmp",
	"mount", "umount2", "pivot_root", "chroot", "fsopen", "fsconfig", "fsmount", "fspick",
	"move_mount", "open_tree", "mount_setattr",
	"unshare", "setns",
	"bpf", "perf_event_open", "userfaultfd",
	"keyctl", "add_key", "request_key",
	"kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
	"io_uring_setup", "io_uring_enter", "io_uring_register",
	"open_by_handle_at", "name_to_handle_at",
	"swapon", "swapoff", "reboot", "syslog", "acct", "quotactl",
	"iopl", "ioperm", "personality", "uselib", "lookup_dcookie", "vhangup",
}

// namespaceFlags are the clone(2) flags that make a new namespace.
const namespaceFlags = unix.CLONE_NEWUSER | unix.CLONE_NEWNS | unix.CLONE_NEWPID | unix.CLONE_NEWNET |
	unix.CLONE_NEWUTS | unix.CLONE_NEWIPC | unix.CLONE_NEWCGROUP | unix.CLONE_NEWTIME

// seccompPolicy is the filter of a gateway command: everything is allowed
// but DeniedSyscalls and clone with a namespace flag (EPERM) and clone3
// (ENOSYS).
func seccompPolicy() seccomp.Policy {
	return seccomp.Policy{
		DefaultAction: seccomp.ActionAllow,
		Syscalls: []seccomp.SyscallGroup{
			{Action: seccomp.ActionErrno, Names: DeniedSyscalls},
			{Action: seccomp.ActionErrno, NamesWithCondtions: []seccomp.NameWithConditions{{
				Name:       "clone",
				Conditions: seccomp.ArgumentConditions{{Argument: cloneFlagsArg, Operation: seccomp.BitsSet, Value: namespaceFlags}},
			}}},
			{Action: seccomp.ActionErrno | seccomp.Action(unix.ENOSYS), Names: []string{"clone3"}},
		},
	}
}

// cloneFlagsArg is the argument of clone(2) that holds the flags: the
// first on every architecture this builds for (s390 has it second).
const cloneFlagsArg = 0

// auditArch is the seccomp architecture of this build's system calls.
func auditArch() (uint32, error) {
	switch runtime.GOARCH {
	case "amd64":
		return unix.AUDIT_ARCH_X86_64, nil
	case "arm64":
		return unix.AUDIT_ARCH_AARCH64, nil
	}
	return 0, fmt.Errorf("seccomp: no filter for %s", runtime.GOARCH)
}

// loadSeccomp sets no_new_privs and installs the gateway filter on every
// thread of this process. Two filters: the policy (go-seccomp-bpf, which
// lets system calls of another architecture through to its default
// action) and an architecture guard that refuses those with ENOSYS (an
// x86-64 process can make i386 system calls through int 0x80, where
// unshare has another number).
func loadSeccomp() error {
	native, err := auditArch()
	if err != nil {
		return err
	}
	guard, err := bpf.Assemble([]bpf.Instruction{
		bpf.LoadAbsolute{Off: 4, Size: 4}, // seccomp_data.arch
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: native, SkipTrue: 1},
		bpf.RetConstant{Val: unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)},
		bpf.RetConstant{Val: unix.SECCOMP_RET_ALLOW},
	})
	if err != nil {
		return fmt.Errorf("seccomp: %w", err)
	}
	if err := seccomp.LoadFilter(seccomp.Filter{NoNewPrivs: true, Flag: seccomp.FilterFlagTSync, Policy: seccompPolicy()}); err != nil {
		return fmt.Errorf("seccomp: %w", err)
	}
	filter := make([]unix.SockFilter, len(guard))
	for i, in := range guard {
		filter[i] = unix.SockFilter{Code: in.Op, Jt: in.Jt, Jf: in.Jf, K: in.K}
	}
	prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	if _, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&prog))); errno != 0 {
		return fmt.Errorf("seccomp: architecture guard: %w", errno)
	}
	return nil
}
