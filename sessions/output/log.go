package output

import "unicode/utf8"

// Stream names the output stream a piece of output came from.
type Stream string

// The output streams. A PTY merges both into StreamStdout.
const (
	StreamStdout Stream = "stdout"
	StreamStderr Stream = "stderr"
)

// Log is a Tail that remembers which stream each byte came from, so that a
// reader can follow a session's output by absolute byte offset (Read) and
// get stdout and stderr apart. Readers keep only their offset: the Log's
// memory is the Tail's bound plus one small marker per stream switch still
// held, however many readers follow it and however slowly they read.
// Log is not safe for concurrent use.
type Log struct {
	Tail
	// switches are the absolute offsets where the stream changes, oldest
	// first; switches[0] is at or before Start() once anything was written.
	switches []streamSwitch
}

type streamSwitch struct {
	at     int64
	stream Stream
}

// NewLog returns a Log keeping at most maxChars characters (min 1).
func NewLog(maxChars int) *Log {
	return &Log{Tail: *NewTail(maxChars)}
}

// WriteStream appends s (valid UTF-8 of n runes) from stream st.
func (l *Log) WriteStream(st Stream, s string, n int) {
	if s == "" {
		return
	}
	if k := len(l.switches); k == 0 || l.switches[k-1].stream != st {
		l.switches = append(l.switches, streamSwitch{at: l.End(), stream: st})
	}
	l.Tail.WriteCounted(s, n)
	l.prune()
}

// Gap is Tail.Gap: a reader at an offset before it is told of what
// it lost.
func (l *Log) Gap(n int64) {
	l.Tail.Gap(n)
	l.prune()
}

// prune forgets switches wholly before the first byte held, keeping the one
// that covers it.
func (l *Log) prune() {
	start := l.Start()
	i := 0
	for i+1 < len(l.switches) && l.switches[i+1].at <= start {
		i++
	}
	if i > 0 {
		l.switches = append(l.switches[:0], l.switches[i:]...)
	}
}

// Chunk is one piece of a Log read by offset.
type Chunk struct {
	Stream Stream
	// Offset is the absolute byte offset of Text's first byte; Offset +
	// len(Text) is where the next read starts.
	Offset int64
	Text   string
	// Lost is how many bytes before Offset, at or after the requested
	// offset, were dropped from the Log before this read reached them.
	Lost int64
}

// Next returns the held output at or after from, up to maxBytes (cut at a
// rune boundary, never empty while output is held past from) and from one
// stream only. ok is false when nothing is held at or after from. An offset
// before Start() continues at Start() and reports the gap in Lost; one
// inside a rune continues at the next rune.
func (l *Log) Next(from int64, maxBytes int) (c Chunk, ok bool) {
	start, end := l.Start(), l.End()
	if from < start {
		c.Lost = start - from
		from = start
	}
	live := l.buf[l.start:]
	for from < end && !utf8.RuneStart(live[from-start]) {
		from++
	}
	if from >= end {
		return c, false
	}
	// The stream of from, and where it switches next.
	limit := end
	c.Stream = StreamStdout
	for i, sw := range l.switches {
		if sw.at > from {
			limit = sw.at
			break
		}
		c.Stream = l.switches[i].stream
	}
	if maxBytes < utf8.UTFMax {
		maxBytes = utf8.UTFMax
	}
	if limit-from > int64(maxBytes) {
		limit = from + int64(maxBytes)
		for limit > from && !utf8.RuneStart(live[limit-start]) {
			limit--
		}
	}
	c.Offset = from
	c.Text = string(live[from-start : limit-start])
	return c, true
}
