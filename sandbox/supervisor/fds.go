package supervisor

import (
	"os"

	"golang.org/x/sys/unix"
)

// The descriptors of a command's start are made with the system calls
// themselves rather than os.Pipe and os.OpenFile: those register every
// descriptor with the runtime's poller (two fcntl calls and an epoll_ctl
// each, and for a regular file or /dev/null, which epoll refuses, two more
// fcntl calls to undo it), and the command's ends are then switched back
// to blocking mode. The supervisor makes them on the path of every command
// it starts.

// pipe makes a pipe whose end ours (the read end when oursReads) is polled
// by the runtime and whose other end, theirs, is a blocking descriptor for
// a command, which the caller closes after the fork. Both are
// close-on-exec.
func pipe(oursReads bool) (ours *os.File, theirs int, err error) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		return nil, -1, os.NewSyscallError("pipe2", err)
	}
	o, t := p[1], p[0]
	if oursReads {
		o, t = p[0], p[1]
	}
	if err := unix.SetNonblock(o, true); err != nil {
		_, _ = unix.Close(o), unix.Close(t)
		return nil, -1, os.NewSyscallError("fcntl", err)
	}
	// os.NewFile registers a non-blocking descriptor with the poller.
	name := "|1"
	if oursReads {
		name = "|0"
	}
	return os.NewFile(uintptr(o), name), t, nil
}

// openFd opens path close-on-exec, retrying when a signal interrupts it,
// as a bare descriptor (for a command: /dev/null as a stdin it has none
// of).
func openFd(path string, flags int, perm uint32) (int, error) {
	for {
		fd, err := unix.Open(path, flags|unix.O_CLOEXEC, perm)
		if err == nil {
			return fd, nil
		}
		if err != unix.EINTR {
			return -1, &os.PathError{Op: "open", Path: path, Err: err}
		}
	}
}

// openRegular opens the regular file path close-on-exec as an *os.File the
// runtime does not poll (it could not: epoll refuses regular files).
func openRegular(path string, flags int, perm uint32) (*os.File, error) {
	fd, err := openFd(path, flags, perm)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), path), nil
}
