package sessions

import (
	"errors"
	"fmt"
	"time"

	"github.com/sandboxctl/sandboxctl/api"

	"github.com/sandboxctl/sandboxctl/sessions/output"
	"github.com/sandboxctl/sandboxctl/sessions/toolapi"
)

// Raw output (ExecParams.Raw): the session also keeps its output as the
// exact bytes the command wrote, for a caller that follows the whole
// output (the CLI's waiting exec, a raw stream). Its reader holds the
// command back: once rawWindow bytes wait unread, the session stops
// reading the command's pipes, so the command blocks in its write as
// under docker exec, instead of output being dropped.
const (
	// rawWindow is how many unread bytes a raw session holds before it
	// stops reading from the command.
	rawWindow = 4 << 20
	// rawOrphanGrace is how long a raw session waits for a reader while
	// none is attached (before the first, or after the last went away)
	// before it stops holding the command back and keeps only the last
	// rawWindow bytes: a caller that vanished must not freeze its command
	// for ever.
	rawOrphanGrace = 60 * time.Second
)

// ErrNoRawOutput classes a raw stream of a session started without raw
// output.
var ErrNoRawOutput = fmt.Errorf("%w: the session was not started with raw output", toolapi.ErrInvalidInput)

// rawState is a raw session's byte output and back-pressure, guarded by
// the session's mu.
type rawState struct {
	log     output.Raw
	readers int   // raw followers attached
	acked   int64 // the furthest offset a raw follower asked for
	// released ends the back-pressure: the session was killed, its
	// reader went away for rawOrphanGrace, or the Manager closes.
	released bool
	waiting  int           // output readers blocked for room
	room     chan struct{} // closed when room may have been made
	orphan   *time.Timer
	// text is the text backlog of stdout and stderr (rawtext.go).
	text [2]textBacklog
}

func newRawState(s *session) *rawState {
	r := &rawState{}
	r.orphan = time.AfterFunc(rawOrphanGrace, func() { s.releaseRaw() })
	return r
}

// wakeRoomLocked wakes output readers waiting for room.
func (r *rawState) wakeRoomLocked() {
	if r.room != nil {
		close(r.room)
		r.room = nil
	}
}

// releaseRaw ends s's back-pressure (a kill, an orphaned session, Close).
func (s *session) releaseRaw() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.raw == nil || s.raw.released {
		return
	}
	s.raw.released = true
	s.raw.orphan.Stop()
	s.raw.wakeRoomLocked()
}

// appendRaw adds p from stream to the raw output, first waiting while
// rawWindow bytes are unread and a reader holds the command back.
func (m *Manager) appendRaw(s *session, stream output.Stream, p []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.raw
	for !r.released && r.log.Len() >= rawWindow {
		if r.room == nil {
			r.room = make(chan struct{})
		}
		room := r.room
		r.waiting++
		s.mu.Unlock()
		select {
		case <-room:
		case <-m.ctx.Done():
		}
		s.mu.Lock()
		r.waiting--
		if m.ctx.Err() != nil {
			r.released = true
		}
	}
	r.log.Write(stream, p)
	if r.released {
		// Nobody holds the command back any more: keep the last window.
		r.log.DropTo(rawWindow)
	}
	s.wakeLocked()
}

// FollowRaw is Follow for the session's exact bytes: its frames carry
// Bytes, and while it is attached a slow reading holds the command back
// instead of losing output. Close it when done. A session started without
// ExecParams.Raw is an error wrapping ErrNoRawOutput.
func (m *Manager) FollowRaw(agentID, sessionKey, id string) (toolapi.Follower, error) {
	f, err := m.Follow(agentID, sessionKey, id)
	if err != nil {
		return nil, err
	}
	ff := f.(*Follower)
	if err := ff.attachRaw(); err != nil {
		return nil, err
	}
	return ff, nil
}

// attachRaw makes f a raw follower of its session.
func (f *Follower) attachRaw() error {
	s := f.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.raw == nil {
		return fmt.Errorf("session %s: %w", s.id, ErrNoRawOutput)
	}
	f.raw = true
	s.raw.readers++
	s.raw.orphan.Stop()
	return nil
}

// Close detaches a raw follower: once no raw follower is attached for
// rawOrphanGrace, the session stops holding its command back.
func (f *Follower) Close() {
	s := f.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if !f.raw || f.closed {
		return
	}
	f.closed = true
	s.raw.readers--
	if s.raw.readers == 0 && !s.raw.released && !s.finished {
		s.raw.orphan.Reset(rawOrphanGrace)
	}
}

// nextRawLocked is Next for a raw follower: ok is false when there is
// nothing to tell yet. Asking for offset from releases what is before it.
func (f *Follower) nextRawLocked(from int64, maxBytes int) (frame api.StreamFrame, next int64, done, ok bool) {
	s := f.s
	r := s.raw
	if from > r.acked {
		r.acked = from
		r.log.Release(from)
		r.wakeRoomLocked()
	}
	c, held := r.log.Next(from, maxBytes)
	switch {
	case c.Lost > 0:
		return api.StreamFrame{Type: api.FrameDropped, Offset: ptr(from), Lost: c.Lost}, from + c.Lost, false, true
	case held:
		typ := api.FrameStdout
		if c.Stream == output.StreamStderr {
			typ = api.FrameStderr
		}
		return api.StreamFrame{Type: typ, Offset: ptr(c.Offset), Bytes: c.Data}, c.Offset + int64(len(c.Data)), false, true
	case s.finished:
		return exitFrameLocked(s), from, true, true
	}
	return api.StreamFrame{}, from, false, false
}

// IsNoRawOutput reports whether err says a session has no raw output.
func IsNoRawOutput(err error) bool { return errors.Is(err, ErrNoRawOutput) }

// waitReaders waits for the output readers of s: at most readerGrace for
// an ordinary session, whose output may be held open by a background child;
// for a raw session as long as its output still moves (a reader waits for
// room, or bytes were read since the last look), since what the host still
// holds must reach the raw reader whole.
func (m *Manager) waitReaders(s *session, readersDone <-chan struct{}) bool {
	t := time.NewTimer(readerGrace)
	defer t.Stop()
	last := int64(-1)
	for {
		select {
		case <-readersDone:
			return true
		case <-t.C:
			s.mu.Lock()
			moving := s.raw != nil && !s.raw.released && (s.raw.waiting > 0 || s.readRaw != last)
			last = s.readRaw
			s.mu.Unlock()
			if !moving {
				return false
			}
			t.Reset(readerGrace)
		}
	}
}

// newStartedFollower is the Follower handed to ExecStream's started: a raw
// one for a session with raw output.
func newStartedFollower(m *Manager, s *session) *Follower {
	f := &Follower{m: m, s: s}
	if s.raw != nil {
		_ = f.attachRaw() // cannot fail: s has raw output
	}
	return f
}
