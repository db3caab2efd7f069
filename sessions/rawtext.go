package sessions

import (
	"io"
	"time"

	"github.com/sandboxctl/sandboxctl/sessions/output"
)

// The text of a raw session (ExecParams.Raw, no PTY). Its reader wants the
// exact bytes; the sanitised text the tools show (poll, log, the session
// list, the exit event) keeps only the latest output anyway (its caps are
// MaxOutputChars and PendingMaxOutputChars). Decoding every byte of a
// gigabyte for text that is dropped at once cost most of the daemon's time
// on this path, so a raw session decodes lazily: the bytes read wait in a
// backlog, at most textFlushDelay, and only the last textBytes of them are
// decoded; what is skipped counts as dropped (Tail.Gap), one character a
// byte. The end of a stream decodes what is left before the session ends,
// so the final text is whole when the output was small and its latest part
// otherwise.
const (
	// textFlushDelay bounds how long read output waits before its text is
	// made.
	textFlushDelay = 50 * time.Millisecond
	// rawReadChunk is the most one read of a raw session's stream takes.
	rawReadChunk = 256 << 10
)

// textBacklog is one stream's output read and not yet decoded into text,
// guarded by the session's mu.
type textBacklog struct {
	dec *output.Decoder
	// pending is the end of what was read and not decoded; skipped is how
	// many bytes before it will never be (a gap), read how many bytes
	// both cover (counted into readRaw once their text is made).
	pending   []byte
	skipped   int64
	read      int64
	scheduled bool
}

// readRawOutput is read for a raw session without a PTY: the bytes go to
// the raw output (which may hold the command back) and to the text
// backlog.
func (m *Manager) readRawOutput(s *session, r io.Reader, stream output.Stream) {
	// What is read is copied out (appendRaw, backlogText) before the next
	// read, so the buffer goes back to the pool when the stream ends.
	b, _ := m.rawBufs.Get().(*[rawReadChunk]byte)
	if b == nil {
		b = new([rawReadChunk]byte)
	}
	defer m.rawBufs.Put(b)
	buf := b[:]
	for {
		n, err := r.Read(buf)
		if n > 0 {
			m.appendRaw(s, stream, buf[:n])
			m.backlogText(s, stream, buf[:n])
		}
		if err != nil {
			m.logReadEnd(s, err)
			s.mu.Lock()
			m.flushTextLocked(s, stream, true)
			s.mu.Unlock()
			return
		}
	}
}

// textBytes is how many bytes of a raw session's latest output are decoded
// into text: as many as the largest text cap holds characters.
func (m *Manager) textBytes() int {
	return max(m.lim.MaxOutputChars, m.lim.PendingMaxOutputChars, 1)
}

// backlogText adds p (copied) to stream's text backlog and makes sure it
// is decoded within textFlushDelay.
func (m *Manager) backlogText(s *session, stream output.Stream, p []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.raw.backlog(stream)
	b.pending = append(b.pending, p...)
	b.read += int64(len(p))
	if keep := m.textBytes(); len(b.pending) > 2*keep {
		cut := len(b.pending) - keep
		b.skipped += int64(cut)
		b.pending = append(b.pending[:0], b.pending[cut:]...)
	}
	if !b.scheduled {
		b.scheduled = true
		time.AfterFunc(textFlushDelay, func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			m.flushTextLocked(s, stream, false)
		})
	}
}

// flushTextLocked decodes stream's backlog into the session's text; end
// also flushes the decoder (the stream ended).
func (m *Manager) flushTextLocked(s *session, stream output.Stream, end bool) {
	b := s.raw.backlog(stream)
	b.scheduled = false
	if keep := m.textBytes(); len(b.pending) > keep {
		cut := len(b.pending) - keep
		b.skipped += int64(cut)
		b.pending = append(b.pending[:0], b.pending[cut:]...)
	}
	if b.skipped > 0 {
		release := m.inflateLocked(s)
		s.agg.Gap(b.skipped)
		pend := s.pendOut
		if stream == output.StreamStderr {
			pend = s.pendErr
		}
		pend.Gap(b.skipped)
		release()
		// The decoding starts again after the gap.
		b.dec, b.skipped = nil, 0
	}
	if b.dec == nil {
		b.dec = output.NewDecoder(false)
	}
	text, _ := b.dec.Feed(b.pending)
	if end {
		text += b.dec.Flush()
	}
	b.pending = b.pending[:0]
	if end {
		b.pending = nil
	}
	read := b.read
	b.read = 0
	m.appendOutputLocked(s, stream, text, read)
}

// backlog is stream's text backlog.
func (r *rawState) backlog(stream output.Stream) *textBacklog {
	if stream == output.StreamStderr {
		return &r.text[1]
	}
	return &r.text[0]
}
