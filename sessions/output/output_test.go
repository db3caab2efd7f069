package output

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestSanitize(t *testing.T) {
	tests := []struct {
		name string
		in   string
		pty  bool
		want string
	}{
		{"plain", "hello\tworld\r\n", false, "hello\tworld\r\n"},
		{"c0 dropped", "a\x00b\x07c\x08d\x1b[31me\x7f", false, "abcd[31me"},
		{"pty keeps ESC", "\x1b[31mred\x1b[0m\x07", true, "\x1b[31mred\x1b[0m"},
		{"format chars", "a\u200bb\u200dc\u202ed\ufeffe\u2060f\u00adg", false, "abcdefg"},
		{"c1 dropped", "a\u0085b\u009bc", false, "abc"},
		{"unicode kept", "héllo 世界 🎉", false, "héllo 世界 🎉"},
		{"lone surrogate dropped", "a\xed\xa0\x80b\xed\xbf\xbfc", false, "abc"},
		{"invalid byte replaced", "a\xffb\xc3(c", false, "a\ufffdb\ufffd(c"},
		{"real U+FFFD kept", "a\ufffdb", false, "a\ufffdb"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Sanitize([]byte(tt.in), tt.pty); got != tt.want {
				t.Fatalf("Sanitize(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

// feedAll feeds in in chunks of the given sizes (cycled) and returns the
// decoded text and the DSR count.
func feedAll(d *Decoder, in []byte, size int) (string, int) {
	var b strings.Builder
	n := 0
	for len(in) > 0 {
		k := min(size, len(in))
		s, c := d.Feed(in[:k])
		b.WriteString(s)
		n += c
		in = in[k:]
	}
	b.WriteString(d.Flush())
	return b.String(), n
}

func TestDecoderNeverSplitsUTF8(t *testing.T) {
	in := []byte("héllo 世界 🎉 ünïcödé — ok\n")
	for size := 1; size <= len(in); size++ {
		got, _ := feedAll(NewDecoder(false), in, size)
		if got != string(in) {
			t.Fatalf("chunk size %d: %q", size, got)
		}
		if !utf8.ValidString(got) {
			t.Fatalf("chunk size %d: invalid UTF-8", size)
		}
	}
}

func TestDecoderDSR(t *testing.T) {
	in := []byte("a\x1b[6nb\x1b[?6nc\x1b[31md\x1b[e\x1b[?x\x1b")
	want := "abc\x1b[31md\x1b[e\x1b[?x\x1b"
	for size := 1; size <= len(in); size++ {
		got, n := feedAll(NewDecoder(true), in, size)
		if got != want || n != 2 {
			t.Fatalf("chunk size %d: %q (%d DSR), want %q (2)", size, got, n, want)
		}
	}
	// Not a PTY: no DSR handling, ESC dropped.
	got, n := feedAll(NewDecoder(false), in, 3)
	if n != 0 || got != "a[6nb[?6nc[31md[e[?x" {
		t.Fatalf("non-pty: %q %d", got, n)
	}
}

func TestDecoderDSRSplitEveryPosition(t *testing.T) {
	for _, q := range []string{"\x1b[6n", "\x1b[?6n"} {
		in := "before" + q + "after"
		for cut := 0; cut <= len(in); cut++ {
			d := NewDecoder(true)
			a, n1 := d.Feed([]byte(in[:cut]))
			b, n2 := d.Feed([]byte(in[cut:]))
			got := a + b + d.Flush()
			if got != "beforeafter" || n1+n2 != 1 {
				t.Fatalf("%q cut at %d: %q, %d DSR", q, cut, got, n1+n2)
			}
		}
	}
}

func TestTail(t *testing.T) {
	tb := NewTail(10)
	tb.Write("hello")
	if tb.String() != "hello" || tb.Dropped() != 0 || tb.Note() != "" {
		t.Fatalf("%q %d", tb.String(), tb.Dropped())
	}
	tb.Write(" wonderful")
	if tb.String() != "wonderful" && tb.String() != " wonderful" {
		t.Fatalf("%q", tb.String())
	}
	if tb.String() != " wonderful" || tb.Dropped() != 5 || tb.Len() != 10 {
		t.Fatalf("%q dropped %d", tb.String(), tb.Dropped())
	}
	if tb.WithNote() != "[... 5 chars dropped ...]\n wonderful" {
		t.Fatalf("%q", tb.WithNote())
	}
	tb.Write("世界世界世界世界世界世界") // 12 runes > max
	if tb.String() != "世界世界世界世界世界" || tb.Dropped() != 17 {
		t.Fatalf("%q dropped %d", tb.String(), tb.Dropped())
	}
	if tb.Last(3) != "界世界" || tb.Last(100) != tb.String() {
		t.Fatalf("Last: %q", tb.Last(3))
	}
	if tb.Drain() != "[... 17 chars dropped ...]\n世界世界世界世界世界" || tb.Len() != 0 || tb.Drain() != "" {
		t.Fatal("Drain")
	}
}

func TestTailMemoryBounded(t *testing.T) {
	const max = 200000
	tb := NewTail(max)
	chunk := strings.Repeat("0123456789abcdef", 2048) // 32 KiB
	total := 0
	for total < 50<<20 {
		tb.Write(chunk)
		total += len(chunk)
		if c := tb.CapBytes(); c > 4*max+2*len(chunk) {
			t.Fatalf("capacity %d bytes after %d written", c, total)
		}
	}
	if tb.Len() != max || tb.Dropped() != int64(total-max) {
		t.Fatalf("len %d dropped %d", tb.Len(), tb.Dropped())
	}
	if !strings.HasSuffix(chunk, tb.Last(16)) {
		t.Fatal("tail content wrong")
	}
}

func BenchmarkDecodeAndTail(b *testing.B) {
	chunk := []byte(strings.Repeat("log line with some text 0123456789\n", 1000))
	d := NewDecoder(false)
	tb := NewTail(200000)
	b.SetBytes(int64(len(chunk)))
	for b.Loop() {
		s, _ := d.Feed(chunk)
		tb.Write(s)
	}
}
