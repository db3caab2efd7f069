// Package atomicfile writes a file so that readers see the old content or
// the new, never a part, and the new survives a crash once Write returned:
// a temp file beside it, fsync, rename, fsync of the directory
// (WriteVolatile leaves the fsyncs out, for a file in memory). Standard
// library only, so the static supervisor can use it too.
//
// It calls the system directly rather than through os.File: the supervisor
// writes a session's record on the path of every command it starts and
// ends, and an os.File's open registers the descriptor with the poller
// (four fcntl calls and an epoll_ctl a regular file refuses) and its rename
// stats the target first, which doubled the calls of a write.
package atomicfile

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// Write replaces path with data, mode perm.
func Write(path string, data []byte, perm os.FileMode) error {
	return write(path, data, perm, true)
}

// WriteVolatile replaces path with data, mode perm, atomically but without
// the fsyncs that make it survive a crash of the machine: for a file on a
// filesystem that does not survive one (tmpfs), where they buy nothing.
func WriteVolatile(path string, data []byte, perm os.FileMode) error {
	return write(path, data, perm, false)
}

func write(path string, data []byte, perm os.FileMode, durable bool) error {
	dir := filepath.Dir(path)
	tmp, fd, err := createTemp(dir, "."+filepath.Base(path)+".tmp-")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	err = fill(fd, data, perm, durable)
	if cerr := syscall.Close(fd); err == nil && cerr != nil {
		err = cerr
	}
	if err == nil {
		err = retry(func() error { return syscall.Rename(tmp, path) })
	}
	if err != nil {
		_ = syscall.Unlink(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	if !durable {
		return nil
	}
	// The rename is durable once the directory is.
	dfd, err := open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY, 0)
	if err != nil {
		return fmt.Errorf("write %s: open %s: %w", path, dir, err)
	}
	defer syscall.Close(dfd)
	if err := retry(func() error { return syscall.Fsync(dfd) }); err != nil {
		return fmt.Errorf("write %s: fsync %s: %w", path, dir, err)
	}
	return nil
}

// createTemp creates a new file dir/prefix<random>, mode 0600, for
// writing, and returns its path and descriptor.
func createTemp(dir, prefix string) (string, int, error) {
	for range 100 {
		p := filepath.Join(dir, prefix+strconv.FormatUint(rand.Uint64(), 36))
		fd, err := open(p, syscall.O_WRONLY|syscall.O_CREAT|syscall.O_EXCL, 0o600)
		if !errors.Is(err, syscall.EEXIST) {
			return p, fd, err
		}
	}
	return "", -1, fmt.Errorf("no unused temporary name in %s", dir)
}

// fill sets fd's mode to perm (whatever the umask) and writes data to it,
// durably if asked.
func fill(fd int, data []byte, perm os.FileMode, durable bool) error {
	if err := syscall.Fchmod(fd, uint32(perm.Perm())); err != nil {
		return fmt.Errorf("chmod: %w", err)
	}
	for len(data) > 0 {
		n, err := syscall.Write(fd, data)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		data = data[n:]
	}
	if !durable {
		return nil
	}
	if err := retry(func() error { return syscall.Fsync(fd) }); err != nil {
		return fmt.Errorf("fsync: %w", err)
	}
	return nil
}

// open opens path close-on-exec, retrying when a signal interrupts it.
func open(path string, flags int, mode uint32) (int, error) {
	for {
		fd, err := syscall.Open(path, flags|syscall.O_CLOEXEC, mode)
		if err != syscall.EINTR {
			return fd, err
		}
	}
}

// retry runs call again when a signal interrupts it.
func retry(call func() error) error {
	for {
		if err := call(); err != syscall.EINTR {
			return err
		}
	}
}
