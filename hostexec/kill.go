package hostexec

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/sandboxctl/sandboxctl/envknob"
	"github.com/sandboxctl/sandboxctl/internal/procfs"
)

const (
	// killPoll is how often Kill checks whether the group is gone.
	killPoll = 20 * time.Millisecond
	// sweepRounds bounds the tag sweep: a round that finds nothing ends it,
	// and each round catches what the previous one's victims forked.
	sweepRounds = 10
)

// Kill ends the whole process tree of the command:
//
//  1. SIGTERM to the process group, if anything in it is alive;
//  2. SIGKILL to the group once it is still alive after Options.KillGrace
//     (at once when ctx ends first);
//  3. a sweep that SIGKILLs every process whose environment still carries
//     SANDBOXCTL_RUN=<tag>: this catches descendants that left the group
//     with setsid(1), daemonized, or sit in other groups of a job-control
//     shell.
//
// Kill is idempotent and safe after the command exited; callers should also
// call it after a normal exit to sweep leftovers (`cmd &`, `nohup …`), which
// a finished session must not keep running. Only a descendant that both left
// the group and replaced its environment (e.g. `setsid env -i …`) escapes.
func (p *Process) Kill(ctx context.Context) error {
	p.killMu.Lock()
	defer p.killMu.Unlock()
	pgid := p.pid
	if pgid <= 1 || pgid == syscall.Getpgrp() {
		// Never signal our own group (or every process, for -1).
		return fmt.Errorf("hostexec: kill: refusing to signal process group %d: %w", pgid, os.ErrInvalid)
	}
	if groupAlive(pgid) {
		if err := syscall.Kill(-pgid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("hostexec: kill: SIGTERM group %d: %w", pgid, err)
		}
		p.waitGroupGone(ctx, pgid)
		if groupAlive(pgid) {
			if err := syscall.Kill(-pgid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
				return fmt.Errorf("hostexec: kill: SIGKILL group %d: %w", pgid, err)
			}
		}
	}
	if _, err := sweepTag(p.tag); err != nil {
		return fmt.Errorf("hostexec: kill: %w", err)
	}
	return nil
}

// Signal delivers sig to the command's process group and to every process
// still carrying its run tag (descendants that left the group). It does
// not wait for anything to end.
func (p *Process) Signal(_ context.Context, sig syscall.Signal) error {
	pgid := p.pid
	if pgid <= 1 || pgid == syscall.Getpgrp() {
		return fmt.Errorf("hostexec: signal: refusing to signal process group %d: %w", pgid, os.ErrInvalid)
	}
	if err := syscall.Kill(-pgid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("hostexec: signal %v to group %d: %w", sig, pgid, err)
	}
	pids, err := TaggedPIDs(p.tag)
	if err != nil {
		return fmt.Errorf("hostexec: signal: %w", err)
	}
	for _, pid := range pids {
		if pgid, _ := syscall.Getpgid(pid); pgid == p.pid {
			continue // signalled with the group
		}
		_ = syscall.Kill(pid, sig)
	}
	return nil
}

// waitGroupGone waits until the group is empty and the shell reaped, the
// kill grace ran out, or ctx ended.
func (p *Process) waitGroupGone(ctx context.Context, pgid int) {
	grace := time.NewTimer(p.r.killGrace)
	defer grace.Stop()
	tick := time.NewTicker(killPoll)
	defer tick.Stop()
	for {
		if p.exited() && !groupAlive(pgid) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-grace.C:
			return
		case <-tick.C:
		}
	}
}

// groupAlive reports whether process group pgid has a live member. Zombies
// do not count: an orphan's zombie waits for init to reap it, which some
// inits do only now and then, and it would otherwise stretch every Kill to
// the full grace period.
func groupAlive(pgid int) bool {
	if err := syscall.Kill(-pgid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	pids, err := procfs.PIDs("/proc")
	if err != nil {
		return true // cannot tell: assume alive, the caller escalates
	}
	for _, pid := range pids { // the first live member settles it
		if st, err := procfs.ReadStat("/proc", pid); err == nil && st.PGRP == pgid && !st.Dead() {
			return true
		}
	}
	return false
}

// SweepTag SIGKILLs every process (other than this one) whose environment
// contains SANDBOXCTL_RUN=tag, in rounds until a round finds none, and
// returns how many signals it sent. Processes it may not read or signal are
// skipped.
func SweepTag(tag string) (int, error) {
	n, err := sweepTag(tag)
	if err != nil {
		return n, fmt.Errorf("hostexec: %w", err)
	}
	return n, nil
}

func sweepTag(tag string) (int, error) {
	if !ValidTag(tag) {
		return 0, fmt.Errorf("sweep: invalid run tag %q: %w", tag, os.ErrInvalid)
	}
	entry := string(envknob.RunTag) + "=" + tag
	self := os.Getpid()
	total := 0
	for range sweepRounds {
		pids, err := taggedPIDs(entry, self)
		if err != nil {
			return total, err
		}
		if len(pids) == 0 {
			return total, nil
		}
		// Stop them all first, so that none runs on (a shell's next
		// command) while its siblings and children are being killed.
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGSTOP)
		}
		for _, pid := range pids {
			if syscall.Kill(pid, syscall.SIGKILL) == nil {
				total++
			}
		}
		time.Sleep(5 * time.Millisecond) // let the victims die before re-reading
	}
	return total, nil
}

// TaggedPIDs lists the live processes whose environment carries
// SANDBOXCTL_RUN=tag.
func TaggedPIDs(tag string) ([]int, error) {
	if !ValidTag(tag) {
		return nil, fmt.Errorf("hostexec: tagged pids: invalid run tag %q: %w", tag, os.ErrInvalid)
	}
	pids, err := taggedPIDs(string(envknob.RunTag)+"="+tag, os.Getpid())
	if err != nil {
		return nil, fmt.Errorf("hostexec: tagged pids: %w", err)
	}
	return pids, nil
}

// taggedPIDs lists the processes other than self whose environment holds
// entry ("KEY=VALUE").
func taggedPIDs(entry string, self int) ([]int, error) {
	all, err := procfs.PIDs("/proc")
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, pid := range all {
		if pid != self && procfs.HasEnv("/proc", pid, entry) {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}
