package supervisor

import (
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandboxctl/sandboxctl/internal/procfs"
)

func (sess *session) signal(sig unix.Signal) error {
	if sess.isExited() {
		return errors.New("signal: the command has exited")
	}
	if sig == 0 {
		sig = unix.SIGTERM
	}
	if sess.pgid <= 1 || sess.pid <= 1 {
		return errors.New("signal: the command has no process")
	}
	if err := unix.Kill(-sess.pgid, sig); err != nil {
		if err := unix.Kill(sess.pid, sig); err != nil {
			return fmt.Errorf("signal: %w", err)
		}
	}
	return nil
}

// endLeftovers ends what the command left behind (background children,
// setsid escapees, daemons): its tree, then, in the container's pid 1,
// the orphans no running session claims. One listing of /proc serves both
// when the tree is already empty, as it usually is.
func (sess *session) endLeftovers() {
	// The spare launcher is part of no session and no orphan: its stat
	// and environment need no reading.
	sess.srv.mu.Lock()
	spare := sess.srv.sparePID
	sess.srv.mu.Unlock()
	procs := listProcs(spare)
	if sess.killTreeFrom(procs, LeftoverGrace) {
		procs = listProcs(spare)
	}
	sess.srv.endOrphans(procs)
}

// endOrphans kills the children of this process that are no session's
// leader and carry no running session's tag: processes whose command
// ended and that shed their tag and process group to outlive it. Only pid
// 1 does it, where every orphan of the sandbox is its child. procs is a
// listing of /proc taken before the call: a process in it was forked
// before the snapshot of sessions below, so a session starting meanwhile
// is in that snapshot.
func (s *Server) endOrphans(procs []procfs.Stat) {
	self := os.Getpid()
	if self != 1 {
		return
	}
	s.mu.Lock()
	var tags []string
	leaders := map[int]bool{}
	for pid, sess := range s.byPID {
		leaders[pid] = true
		tags = append(tags, sess.tag)
	}
	if s.sparePID > 0 {
		leaders[s.sparePID] = true // the spare launcher, the next command's
	}
	for _, sess := range s.sessions {
		if !sess.isExited() {
			tags = append(tags, sess.tag)
		}
	}
	s.mu.Unlock()
	for _, p := range procs {
		// pid <= 1 would be kill(0) (this process's own group) or this
		// process: never.
		if p.PID <= 1 || p.PPID != self || leaders[p.PID] || p.State == 'Z' {
			continue
		}
		claimed := false
		for _, tag := range tags {
			if procfs.HasEnv("/proc", p.PID, tag) {
				claimed = true
				break
			}
		}
		if !claimed {
			_ = unix.Kill(p.PID, unix.SIGKILL)
		}
	}
}

// killTree ends every process of the session: its group, the leader's
// descendants and every process carrying its tag. SIGTERM first; what is
// left after grace gets SIGKILL, repeated to catch processes forked
// meanwhile. It returns once nothing of the tree is alive (or gives up
// after a few rounds of SIGKILL).
func (sess *session) killTree(grace time.Duration) {
	sess.killTreeFrom(listProcs(), grace)
}

// killTreeFrom is killTree with the first listing of /proc given; it
// reports whether the tree had any process.
func (sess *session) killTreeFrom(first []procfs.Stat, grace time.Duration) bool {
	sess.mu.Lock()
	leader := 0
	if sess.leaderWS == nil {
		leader = sess.pid
	}
	pgid := sess.pgid
	sess.mu.Unlock()
	procs := func() []int { return treeOf(listProcs(), leader, pgid, sess.tag) }
	send := func(pids []int, sig unix.Signal) {
		if pgid > 1 {
			_ = unix.Kill(-pgid, sig)
		}
		for _, p := range pids {
			if p > 1 { // never kill(0) (this group) nor this process
				_ = unix.Kill(p, sig)
			}
		}
	}
	pids := treeOf(first, leader, pgid, sess.tag)
	if len(pids) == 0 {
		return false
	}
	// Freeze the tree before SIGTERM: otherwise a shell whose child dies
	// first (`sleep 3; touch PROOF`) runs its next command in the moment
	// before its own signal lands. Stopped, every process gets SIGTERM and
	// then SIGCONT, and acts on the SIGTERM before any more of its code.
	send(pids, unix.SIGSTOP)
	pids = procs() // and what was forked before the stop landed
	send(pids, unix.SIGSTOP)
	send(pids, unix.SIGTERM)
	send(pids, unix.SIGCONT)
	deadline := time.Now().Add(grace)
	for time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		if pids = procs(); len(pids) == 0 {
			return true
		}
	}
	for range 10 {
		send(pids, unix.SIGKILL)
		time.Sleep(20 * time.Millisecond)
		if pids = procs(); len(pids) == 0 {
			return true
		}
	}
	sess.srv.logf("supervisor: %s: processes survive SIGKILL: %v", sess.id, pids)
	return true
}
