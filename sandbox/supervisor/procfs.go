package supervisor

import (
	"encoding/binary"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/sandboxctl/sandboxctl/internal/procfs"
)

// openPTY opens a new pseudo-terminal pair of cols x rows. The master is
// non-blocking (so closing it interrupts a pending read).
func openPTY(cols, rows int) (master, slave *os.File, err error) {
	fd, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("open /dev/ptmx: %w", err)
	}
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		_ = unix.Close(fd)
		return nil, nil, fmt.Errorf("unlock pty: %w", err)
	}
	if err := unix.IoctlSetWinsize(fd, unix.TIOCSWINSZ, &unix.Winsize{Row: uint16(rows), Col: uint16(cols)}); err != nil {
		_ = unix.Close(fd)
		return nil, nil, fmt.Errorf("pty size: %w", err)
	}
	// TIOCGPTPEER opens the peer without a path lookup (works whatever
	// /dev/pts is); fall back to the name.
	sfd, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), uintptr(unix.TIOCGPTPEER), uintptr(unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC))
	if errno != 0 {
		n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
		if err != nil {
			_ = unix.Close(fd)
			return nil, nil, fmt.Errorf("pty number: %w", err)
		}
		s, err := unix.Open("/dev/pts/"+strconv.Itoa(n), unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
		if err != nil {
			_ = unix.Close(fd)
			return nil, nil, fmt.Errorf("open pty peer: %w", err)
		}
		sfd = uintptr(s)
	}
	return os.NewFile(uintptr(fd), "ptmx"), os.NewFile(sfd, "pts"), nil
}

// pendingBytes is FIONREAD on f: bytes waiting to be read from the pipe or
// terminal f belongs to.
func pendingBytes(f *os.File) int {
	rc, err := f.SyscallConn()
	if err != nil {
		return 0
	}
	n := 0
	_ = rc.Control(func(fd uintptr) {
		n, _ = unix.IoctlGetInt(int(fd), unix.TIOCINQ)
	})
	return n
}

// listProcs reads the stat of every process but this one and those
// named in skip.
func listProcs(skip ...int) []procfs.Stat {
	all, err := procfs.ListExcept("/proc", append(skip, os.Getpid())...)
	if err != nil {
		return nil
	}
	return all
}

// treeOf returns the live (non-zombie) processes of a session: its process
// group, every descendant of the leader by parent links, and every process
// whose environment carries the tag (setsid escapees and daemons that were
// reparented away).
func treeOf(procs []procfs.Stat, leader, pgid int, tag string) []int {
	children := map[int][]int{}
	alive := map[int]bool{}
	for _, p := range procs {
		if p.Dead() {
			continue
		}
		alive[p.PID] = true
		children[p.PPID] = append(children[p.PPID], p.PID)
	}
	set := map[int]bool{}
	var walk func(int)
	walk = func(pid int) {
		for _, c := range children[pid] {
			if !set[c] {
				set[c] = true
				walk(c)
			}
		}
	}
	if leader > 0 && alive[leader] {
		set[leader] = true
		walk(leader)
	}
	for _, p := range procs {
		if !alive[p.PID] || set[p.PID] {
			continue
		}
		if (pgid > 0 && p.PGRP == pgid) || procfs.HasEnv("/proc", p.PID, tag) {
			set[p.PID] = true
			walk(p.PID)
		}
	}
	out := make([]int, 0, len(set))
	for pid := range set {
		out = append(out, pid)
	}
	return out
}

// syscallNrs are the numbers of the syscalls a process blocks in when it
// waits to read its stdin, for this architecture (-1: none).
type syscallNrs struct{ read, readv, pread, poll, ppoll, sel, pselect int64 }

func waitSyscalls() syscallNrs {
	switch runtime.GOARCH {
	case "amd64":
		return syscallNrs{read: 0, readv: 19, pread: 17, poll: 7, ppoll: 271, sel: 23, pselect: 270}
	case "arm64", "riscv64", "loong64":
		return syscallNrs{read: 63, readv: 65, pread: 67, poll: -1, ppoll: 73, sel: -1, pselect: 72}
	}
	return syscallNrs{read: -2, readv: -2, pread: -2, poll: -2, ppoll: -2, sel: -2, pselect: -2}
}

// blockedReadingFd0 reports whether pid sleeps waiting to read its fd 0,
// from the kernel's view: /proc/PID/syscall names the syscall and its
// arguments; a read of fd 0 counts, and so does a poll/select whose set
// holds fd 0 for reading (the sets are read from /proc/PID/mem, which the
// parent may read). Without /proc/PID/syscall, /proc/PID/wchan (a task
// sleeping in a pipe or tty read) is the fallback.
func blockedReadingFd0(pid int) bool {
	p := "/proc/" + strconv.Itoa(pid)
	if b, err := os.ReadFile(p + "/syscall"); err == nil {
		f := strings.Fields(string(b))
		if len(f) < 7 {
			return false // "running" or "-1 ...": not blocked in a syscall
		}
		nr, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return false
		}
		var args [6]uint64
		for i := range args {
			args[i], _ = strconv.ParseUint(strings.TrimPrefix(f[i+1], "0x"), 16, 64)
		}
		sc := waitSyscalls()
		switch nr {
		case sc.read, sc.readv, sc.pread:
			return args[0] == 0
		case sc.poll, sc.ppoll:
			n := args[1]
			if n == 0 || n > 256 {
				return false
			}
			buf := readMem(pid, args[0], int(8*n))
			for i := 0; i+8 <= len(buf); i += 8 {
				fd := int32(binary.NativeEndian.Uint32(buf[i:]))
				events := binary.NativeEndian.Uint16(buf[i+4:])
				if fd == 0 && events&(unix.POLLIN|0x40) != 0 { // POLLIN or POLLRDNORM
					return true
				}
			}
			return false
		case sc.sel, sc.pselect:
			if args[0] < 1 || args[1] == 0 {
				return false
			}
			b := readMem(pid, args[1], 1)
			return len(b) == 1 && b[0]&1 != 0
		}
		return false
	}
	b, err := os.ReadFile(p + "/wchan")
	if err != nil {
		return false
	}
	switch strings.TrimSpace(string(b)) {
	case "pipe_read", "anon_pipe_read", "pipe_wait", "n_tty_read", "wait_woken":
		return true
	}
	return false
}

// inputWaitUnavailable says why blockedReadingFd0 cannot work here ("" =
// it can): neither /proc/PID/syscall nor /proc/PID/wchan exists, as under
// gVisor, whose /proc has neither.
func inputWaitUnavailable() string {
	for _, f := range []string{"/proc/self/syscall", "/proc/self/wchan"} {
		if _, err := os.Stat(f); err == nil {
			return ""
		}
	}
	return "input-wait detection is off in this sandbox: its kernel (gVisor?) has neither /proc/PID/syscall nor /proc/PID/wchan, so a command blocked reading its stdin is not reported as waiting for input"
}

// readMem reads n bytes at addr of pid's memory ("" on any failure).
func readMem(pid int, addr uint64, n int) []byte {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/mem")
	if err != nil {
		return nil
	}
	defer f.Close()
	buf := make([]byte, n)
	k, err := f.ReadAt(buf, int64(addr))
	if err != nil && k < n {
		return nil
	}
	return buf
}

// fd0Identity is readlink /proc/PID/fd/0 ("pipe:[123]", "/dev/pts/0").
func fd0Identity(pid int) string {
	s, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/fd/0")
	if err != nil {
		return ""
	}
	return s
}

// fileIdentity is what /proc/PID/fd/N of a process holding f shows.
// It avoids f.Fd(), which would switch the descriptor to blocking mode.
func fileIdentity(f *os.File) string {
	rc, err := f.SyscallConn()
	if err != nil {
		return ""
	}
	var s string
	_ = rc.Control(func(fd uintptr) { s = fdIdentity(int(fd)) })
	return s
}

// fdIdentity is fileIdentity of a bare descriptor.
func fdIdentity(fd int) string {
	s, _ := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
	return s
}

// signalName is the conventional name of sig ("SIGKILL").
func signalName(sig unix.Signal) string {
	if n := unix.SignalName(sig); n != "" {
		return n
	}
	return "SIG" + strconv.Itoa(int(sig))
}

// setPipeSize grows the pipe f belongs to (best effort; the default is 64 KiB).
func setPipeSize(f *os.File, n int) {
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Control(func(fd uintptr) {
		_, _ = unix.FcntlInt(fd, unix.F_SETPIPE_SZ, n)
	})
}
