package daemon

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// reapEvery is how often the reaper looks for adopted orphans even when no
// SIGCHLD arrived (signals coalesce).
const reapEvery = 5 * time.Second

// AdoptOrphans makes this process the child subreaper of everything it
// starts (PR_SET_CHILD_SUBREAPER): a descendant whose parent exits — a
// double fork, `setsid -f`, a background job of a shell that ended — is
// re-parented to the daemon instead of init, so it can never leave the
// daemon's process tree, and the approver check (see approverCheck) knows
// it for what it is. The daemon reaps such orphans when they exit, until
// ctx ends.
//
// The reaper never waits for a child this process started through os/exec:
// Go holds a pidfd for each of those until its Wait is done, and the reaper
// skips every pid it holds a pidfd for. Without pidfd support it cannot
// tell them apart, so AdoptOrphans then fails and changes nothing.
func AdoptOrphans(ctx context.Context, logf func(format string, args ...any)) error {
	if err := pidfdWaitWorks(); err != nil {
		return fmt.Errorf("daemon: orphans of commands cannot be kept in the daemon's tree: %w", err)
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("daemon: become child subreaper: %w", err)
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGCHLD)
	go func() {
		defer signal.Stop(sig)
		t := time.NewTicker(reapEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-sig:
			case <-t.C:
			}
			if n, err := reapOrphans(); err != nil {
				logf("reaping orphaned processes: %v", err)
			} else if n > 0 {
				logf("reaped %d orphaned process(es) of commands", n)
			}
		}
	}()
	return nil
}

// pidfdWaitWorks checks what os/exec relies on to hold a pidfd per child:
// pidfd_open and waitid(P_PIDFD).
func pidfdWaitWorks() error {
	fd, err := unix.PidfdOpen(os.Getpid(), 0)
	if err != nil {
		return fmt.Errorf("pidfd_open: %w", err)
	}
	defer unix.Close(fd)
	var info unix.Siginfo
	for {
		err = unix.Waitid(unix.P_PIDFD, fd, &info, unix.WEXITED|unix.WNOHANG, nil)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if !errors.Is(err, unix.ECHILD) {
		return fmt.Errorf("waitid(P_PIDFD): %v", err)
	}
	return nil
}

// reapOrphans waits for every exited child that is not one of os/exec's
// (adopted orphans) and returns how many it reaped.
func reapOrphans() (int, error) {
	zombies, err := zombieChildren(os.Getpid())
	if err != nil || len(zombies) == 0 {
		return 0, err
	}
	// Read the held pidfds after listing the zombies: a child os/exec
	// starts later cannot be among them, and one it reaps in between is
	// no longer our child, so wait4 below finds nothing.
	owned, err := pidfdPIDs()
	if err != nil {
		return 0, err
	}
	n := 0
	for _, pid := range zombies {
		if owned[pid] {
			continue
		}
		var ws unix.WaitStatus
		if got, err := unix.Wait4(pid, &ws, unix.WNOHANG, nil); err == nil && got == pid {
			n++
		}
	}
	return n, nil
}

// zombieChildren lists the children of self that have exited.
func zombieChildren(self int) ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("read /proc: %w", err)
	}
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// "pid (comm) state ppid ...": comm may hold spaces and ')'.
		i := bytes.LastIndexByte(data, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(data[i+1:]))
		if len(f) < 2 || f[0] != "Z" {
			continue
		}
		if ppid, err := strconv.Atoi(f[1]); err == nil && ppid == self {
			out = append(out, pid)
		}
	}
	return out, nil
}

// pidfdPIDs returns the pids of the pidfds this process holds.
func pidfdPIDs() (map[int]bool, error) {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return nil, fmt.Errorf("read /proc/self/fd: %w", err)
	}
	out := map[int]bool{}
	for _, e := range entries {
		if l, err := os.Readlink("/proc/self/fd/" + e.Name()); err != nil || l != "anon_inode:[pidfd]" {
			continue
		}
		data, err := os.ReadFile("/proc/self/fdinfo/" + e.Name())
		if err != nil {
			continue
		}
		for line := range strings.Lines(string(data)) {
			if v, ok := strings.CutPrefix(line, "Pid:"); ok {
				if pid, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && pid > 0 {
					out[pid] = true
				}
			}
		}
	}
	return out, nil
}
