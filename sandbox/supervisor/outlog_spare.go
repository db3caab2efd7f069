package supervisor

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// SpareLogName is the directory, in the server's, of the spare output log:
// a session directory made ahead of the session that takes it, with both
// segments of its log already reserved. The next session renames it to
// its own, so the reservation (a fallocate of about 1 MiB, which on a
// tmpfs allocates and zeroes every page: half a millisecond of a short
// command's start) is not on the path of the command's start. It is made
// spareRefillDelay after a start that found none ready, as the spare
// launcher is, or recycled from a forgotten session's reserved log (its
// written bytes zeroed), which saves both the reservation and the freeing
// of the pages. It is removed at Shutdown (which waits for one being
// made). No session may take its name.
const SpareLogName = ".spare-log"

// takeSpareLog moves the ready spare log to dir, the directory of a new
// session (which must not exist), and returns it; nil when none is ready
// or it could not move there (it is dropped then, and the caller makes
// the directory and its log itself).
//
// Only the holder of SpareLogName touches that path: the ready spare's
// taker or dropper under s.mu, or the one claim (claimSpareLog) that
// makes or recycles a spare, which there can be only while none is ready.
func (s *Server) takeSpareLog(dir string) *outlog {
	s.mu.Lock()
	l := s.spareLog
	if l == nil {
		s.mu.Unlock()
		return nil
	}
	s.spareLog = nil
	// Under mu, and so is dropping it: a spare is made or recycled into
	// SpareLogName only by a claim, which this one's being ready held off
	// until now.
	err := os.Rename(l.dir, dir)
	if err != nil {
		dropLog(l)
	}
	s.mu.Unlock()
	if err != nil {
		s.logf("supervisor: spare output log: %v", err)
		return nil
	}
	l.dir = dir
	return l
}

// refillLog makes the spare log unless one is ready or being made, or the
// server has no state directory or has shut down. A spare whose space
// could not be reserved (a full filesystem) is not kept: the next session
// tries its own reservation, as without a spare.
func (s *Server) refillLog() {
	if s.claimSpareLog(true) {
		s.settleSpareLog(makeSpareLog(filepath.Join(s.dir, SpareLogName), s.logCap))
	}
}

// claimSpareLog takes the making of the spare log, which settleSpareLog
// ends: false when one is ready or being made, or the server has no state
// directory or has shut down, or (when it is to reserve new space) the
// last one found the filesystem full.
func (s *Server) claimSpareLog(reserve bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dir == "" || s.spareLog != nil || s.spareLogMaking || s.spareClosed || (reserve && s.spareLogNoRoom) {
		return false
	}
	s.spareLogMaking = true
	s.spareLogMade.Add(1)
	return true
}

// settleSpareLog ends the making claimSpareLog took: l, made without err,
// becomes the spare log unless the server shut down meanwhile; otherwise
// what there is of it is dropped.
func (s *Server) settleSpareLog(l *outlog, err error) {
	defer s.spareLogMade.Done()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.spareLogMaking = false
	s.spareLogNoRoom = errors.Is(err, errReserveNoRoom)
	if err == nil && !s.spareClosed {
		s.spareLog = l
		return
	}
	if l != nil {
		dropLog(l) // under mu: the claim held SpareLogName until now
	}
}

// makeSpareLog makes dir and a log in it whose reservation is done (on an
// error, the log returned, if any, is for settleSpareLog to drop).
func makeSpareLog(dir string, capBytes int64) (*outlog, error) {
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, fmt.Errorf("spare output log: %w", err)
	}
	l, err := newOutlog(dir, capBytes)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	return l, l.awaitReserved()
}

// recycleLog makes the log of sess, a session being forgotten whose files
// no longer change (filesRemoved), the spare log when none is ready or
// being made and its space was reserved: the session's other files are
// removed, its directory becomes the spare's, and what was written in the
// segments is zeroed, so nothing of the forgotten output stays. It
// reports whether it did; when not, the caller removes the directory.
func (s *Server) recycleLog(sess *session) bool {
	sess.mu.Lock()
	l := sess.log
	if l != nil {
		l.gone = true // no read of it from now on
	}
	sess.mu.Unlock()
	// A reserved log is on disk (a log in memory reserves nothing) and
	// its reservation is over (awaitReserved).
	if l == nil || !l.reserved || !s.claimSpareLog(false) {
		return false
	}
	spare, err := l.recycle(filepath.Join(s.dir, SpareLogName))
	if err != nil {
		s.logf("supervisor: recycle the output log of %s: %v", sess.id, err)
		_ = os.RemoveAll(filepath.Join(s.dir, SpareLogName))
	}
	s.settleSpareLog(spare, err)
	return err == nil
}

// recycle moves l's directory to dir, keeping only its segment files, and
// returns them as a new log with its space reserved and nothing in it
// (what l wrote is zeroed). l was closed, and its session forgotten.
func (l *outlog) recycle(dir string) (*outlog, error) {
	entries, err := os.ReadDir(l.dir)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if e.Name() != segmentFile(0) && e.Name() != segmentFile(1) {
			if err := os.RemoveAll(filepath.Join(l.dir, e.Name())); err != nil {
				return nil, err
			}
		}
	}
	if err := os.Rename(l.dir, dir); err != nil {
		return nil, err
	}
	spare := &outlog{dir: dir, seg: l.seg, reserved: true}
	for i := range spare.f {
		f, err := openRegular(filepath.Join(dir, segmentFile(i)), unix.O_RDWR, 0)
		if err == nil {
			spare.f[i] = f
			err = zeroPrefix(f, l.high[i])
		}
		if err != nil {
			spare.close()
			return nil, err
		}
	}
	return spare, nil
}

// zeroPrefix overwrites the first n bytes of f with zeros, in place: the
// file keeps its blocks (on a disk, FALLOC_FL_ZERO_RANGE marks them
// unwritten; where that mode fails, a tmpfs for one, the zeros are
// written).
func zeroPrefix(f *os.File, n int64) error {
	if n <= 0 || unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_ZERO_RANGE, 0, n) == nil {
		return nil
	}
	return writeZeros(f, n)
}

// dropLog closes a log no session took and removes its directory.
func dropLog(l *outlog) {
	l.close()
	_ = os.RemoveAll(l.dir)
}

// closeSpareLogLocked drops the ready spare log (Shutdown); s.mu is held.
// One being made is dropped when it is done (spareClosed).
func (s *Server) closeSpareLogLocked() {
	if s.spareLog != nil {
		dropLog(s.spareLog)
		s.spareLog = nil
	}
}
