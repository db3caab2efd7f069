package output

import (
	"fmt"
	"unicode/utf8"
)

// Tail keeps the most recent Max characters (runes) written to it and counts
// what it dropped from the front. Its memory is bounded by about twice Max
// runes however much is written: dropping advances a start offset and the
// buffer is compacted once the dead prefix is larger than the live part.
// Tail is not safe for concurrent use.
type Tail struct {
	max     int
	buf     []byte
	start   int
	chars   int
	dropped int64
	// base is the absolute byte offset of buf[start]: every byte ever
	// written before it was dropped or drained.
	base int64
}

// NewTail returns a buffer keeping at most maxChars characters (min 1).
func NewTail(maxChars int) *Tail {
	if maxChars < 1 {
		maxChars = 1
	}
	return &Tail{max: maxChars}
}

// Write appends s, which must be valid UTF-8 (the Decoder's output is).
func (t *Tail) Write(s string) {
	t.WriteCounted(s, utf8.RuneCountInString(s))
}

// WriteCounted is Write for a caller that already knows s has n runes (so
// that one count serves several buffers).
func (t *Tail) WriteCounted(s string, n int) {
	if s == "" {
		return
	}
	if n >= t.max {
		t.dropped += int64(t.chars + n - t.max)
		skip := skipRunes(s, n-t.max)
		t.base += int64(len(t.buf)-t.start) + int64(skip)
		t.buf = append(t.buf[:0], s[skip:]...)
		t.start, t.chars = 0, t.max
		return
	}
	t.buf = append(t.buf, s...)
	t.chars += n
	if excess := t.chars - t.max; excess > 0 {
		adv := skipRunes(t.buf[t.start:], excess)
		t.start += adv
		t.base += int64(adv)
		t.chars = t.max
		t.dropped += int64(excess)
		if t.start > 4096 && t.start > len(t.buf)-t.start {
			live := copy(t.buf, t.buf[t.start:])
			t.buf = t.buf[:live]
			t.start = 0
		}
	}
}

// skipRunes returns the byte offset just past the first k runes of s,
// which is valid UTF-8 (what the Decoder writes): a rune is its lead byte
// and the continuation bytes after it. ASCII is skipped eight bytes at a
// time; nothing is decoded or allocated.
func skipRunes[S string | []byte](s S, k int) int {
	i := 0
	for i < len(s) && k > 0 {
		if k >= 8 && i+8 <= len(s) && (s[i]|s[i+1]|s[i+2]|s[i+3]|s[i+4]|s[i+5]|s[i+6]|s[i+7])&0x80 == 0 {
			i += 8
			k -= 8
			continue
		}
		i++
		for i < len(s) && s[i]&0xC0 == 0x80 {
			i++
		}
		k--
	}
	return i
}

// Gap records n bytes of output that were never decoded into text (a
// raw session makes text only of its latest output): what is held is
// dropped, and the n bytes count as dropped characters, one a byte, and
// move the offset past them.
func (t *Tail) Gap(n int64) {
	if n <= 0 {
		return
	}
	t.dropped += int64(t.chars) + n
	t.base += int64(len(t.buf)-t.start) + n
	t.buf, t.start, t.chars = t.buf[:0], 0, 0
}

// AddDropped counts n characters as dropped before anything held (e.g.
// output a host discarded before handing the rest over).
func (t *Tail) AddDropped(n int64) {
	if n > 0 {
		t.dropped += n
	}
}

// Skip starts an empty Tail at byte offset n: the n bytes before it were
// dropped before it got them (a recovered session's output the host no
// longer kept), so what is written next has its true offset. The dropped
// count grows by n (characters and bytes are one for ASCII). It panics if
// anything was written.
func (t *Tail) Skip(n int64) {
	if t.End() != 0 {
		panic("output: Skip after Write")
	}
	if n > 0 {
		t.base += n
		t.dropped += n
	}
}

// String returns the characters currently held (without the dropped note).
func (t *Tail) String() string { return string(t.buf[t.start:]) }

// Len is the number of characters currently held.
func (t *Tail) Len() int { return t.chars }

// Dropped is the number of characters dropped from the front so far.
func (t *Tail) Dropped() int64 { return t.dropped }

// Note is the marker put in front of the content when something was dropped,
// e.g. "[... 1234 chars dropped ...]\n"; "" when nothing was.
func (t *Tail) Note() string { return DroppedNote(t.dropped) }

// WithNote is Note() + String().
func (t *Tail) WithNote() string { return t.Note() + t.String() }

// Last returns the last n characters held.
func (t *Tail) Last(n int) string {
	live := t.buf[t.start:]
	if n >= t.chars {
		return string(live)
	}
	return string(live[skipRunes(live, t.chars-n):])
}

// Drain returns WithNote() and empties the buffer, resetting the dropped count.
func (t *Tail) Drain() string {
	s := t.WithNote()
	t.base += int64(len(t.buf) - t.start)
	t.buf = t.buf[:0]
	if cap(t.buf) > 4*t.max+64*1024 {
		t.buf = nil // a burst grew it; do not keep the peak allocation around
	}
	t.start, t.chars, t.dropped = 0, 0, 0
	return s
}

// Start is the absolute byte offset of the first byte held: the number of
// bytes written before it that were dropped or drained.
func (t *Tail) Start() int64 { return t.base }

// End is the absolute byte offset just past the last byte held: the number
// of bytes ever written.
func (t *Tail) End() int64 { return t.base + int64(len(t.buf)-t.start) }

// CapBytes is the capacity of the underlying storage, for memory accounting.
func (t *Tail) CapBytes() int { return cap(t.buf) }

// DroppedNote formats the marker for n dropped characters ("" for n <= 0).
func DroppedNote(n int64) string {
	if n <= 0 {
		return ""
	}
	return fmt.Sprintf("[... %d chars dropped ...]\n", n)
}
