package output

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func write(l *Log, st Stream, s string) { l.WriteStream(st, s, utf8.RuneCountInString(s)) }

// readAll follows l from offset from with reads of max bytes.
func readAll(l *Log, from int64, max int) (string, int64) {
	var b strings.Builder
	var lost int64
	for {
		c, ok := l.Next(from, max)
		lost += c.Lost
		if !ok {
			return b.String(), lost
		}
		b.WriteString(string(c.Stream[3]) + ":" + c.Text + "|")
		from = c.Offset + int64(len(c.Text))
	}
}

func TestLogNextByStream(t *testing.T) {
	l := NewLog(100)
	write(l, StreamStdout, "ab")
	write(l, StreamStdout, "cd")
	write(l, StreamStderr, "EF")
	write(l, StreamStdout, "g")
	if got, _ := readAll(l, 0, 100); got != "o:abcd|e:EF|o:g|" {
		t.Errorf("from 0: %q", got)
	}
	if got, _ := readAll(l, 3, 100); got != "o:d|e:EF|o:g|" {
		t.Errorf("from 3: %q", got)
	}
	if got, _ := readAll(l, 0, 1); got != "o:abcd|e:EF|o:g|" && got == "" {
		t.Errorf("small reads: %q", got)
	}
	if _, ok := l.Next(7, 10); ok {
		t.Error("read past the end returned output")
	}
}

func TestLogDroppedFrontIsReported(t *testing.T) {
	l := NewLog(4)
	write(l, StreamStdout, "abc")
	write(l, StreamStderr, "DEF")
	// "ab" was dropped; "cDEF" is held.
	if l.Start() != 2 || l.End() != 6 {
		t.Fatalf("Start %d End %d, want 2 and 6", l.Start(), l.End())
	}
	got, lost := readAll(l, 0, 100)
	if got != "o:c|e:DEF|" || lost != 2 {
		t.Errorf("from 0: %q lost %d", got, lost)
	}
	write(l, StreamStderr, strings.Repeat("x", 10))
	if len(l.switches) != 1 {
		t.Errorf("switches %v, want only the one covering the held output", l.switches)
	}
}

func TestLogRuneBoundaries(t *testing.T) {
	l := NewLog(100)
	write(l, StreamStdout, "héé")
	// From inside "é" continues at the next rune; a small read is cut at a
	// rune boundary, never inside one.
	c, ok := l.Next(2, 100)
	if !ok || c.Offset != 3 || c.Text != "é" {
		t.Errorf("from 2: %+v", c)
	}
	c, _ = l.Next(0, 4)
	if c.Text != "hé" || c.Offset != 0 {
		t.Errorf("max 4 from 0: %+v", c)
	}
}

func TestLogStateRoundTrip(t *testing.T) {
	l := NewLog(10)
	l.WriteStream(StreamStdout, "héllo wörld ", 12)
	l.WriteStream(StreamStderr, "😀err", 4)
	back := LogFromState(l.State())
	if back.WithNote() != l.WithNote() || back.Start() != l.Start() || back.End() != l.End() || back.Len() != l.Len() {
		t.Fatalf("round trip: %q [%d,%d) vs %q [%d,%d)", back.WithNote(), back.Start(), back.End(), l.WithNote(), l.Start(), l.End())
	}
	for from := l.Start(); from < l.End(); {
		a, okA := l.Next(from, 4)
		b, okB := back.Next(from, 4)
		if a != b || okA != okB {
			t.Fatalf("Next(%d): %+v vs %+v", from, a, b)
		}
		from = a.Offset + int64(len(a.Text))
	}
	back.WriteStream(StreamStdout, "more", 4)
	l.WriteStream(StreamStdout, "more", 4)
	if back.WithNote() != l.WithNote() {
		t.Fatalf("after a write: %q vs %q", back.WithNote(), l.WithNote())
	}
}

// TestLogGap: a gap drops what is held, counts the held characters and
// the gap's bytes as dropped, and a reader at an offset before it is told
// what it lost and goes on after it.
func TestLogGap(t *testing.T) {
	l := NewLog(100)
	l.WriteStream(StreamStdout, "héllo", 5)
	before := l.End()
	l.Gap(1000)
	if l.Len() != 0 || l.Dropped() != 5+1000 || l.End() != before+1000 {
		t.Fatalf("after the gap: %d chars held, %d dropped, end %d (want 0, 1005, %d)", l.Len(), l.Dropped(), l.End(), before+1000)
	}
	l.WriteStream(StreamStderr, "after", 5)
	c, ok := l.Next(0, 64)
	if !ok || c.Lost != before+1000 || c.Offset != before+1000 || c.Text != "after" || c.Stream != StreamStderr {
		t.Fatalf("read from 0: %+v %v", c, ok)
	}
}
