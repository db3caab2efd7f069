// Package output turns the raw byte streams of a running command into the text
// the exec and process tools return: it decodes chunks without ever splitting a
// UTF-8 sequence, sanitizes them (docs/tools.md), answers and strips terminal
// cursor-position queries (DSR) in PTY output, and keeps capped buffers whose
// memory stays bounded however much a command prints.
package output

import (
	"bytes"
	"unicode"
	"unicode/utf8"
)

// DSRReply is what a terminal answers to a cursor-position query (ESC[6n or
// ESC[?6n): "the cursor is at row 1, column 1". Programs that wait for the
// answer (some shells, TUIs) would otherwise hang on a PTY that nobody reads.
const DSRReply = "\x1b[1;1R"

var (
	dsrPlain   = []byte("\x1b[6n")
	dsrPrivate = []byte("\x1b[?6n")
)

// Decoder converts consecutive chunks of one stream into sanitized text. It is
// stateful: bytes that may be the start of a multi-byte UTF-8 sequence or of a
// DSR query are held back until the next chunk shows how they continue, so a
// sequence split across reads is decoded (or recognised) exactly once.
// A Decoder is not safe for concurrent use; use one per stream.
type Decoder struct {
	pty   bool
	carry []byte
}

// NewDecoder returns a decoder. For a PTY stream (pty=true) ESC is kept, so
// ANSI colour sequences survive, and DSR queries are removed and counted.
func NewDecoder(pty bool) *Decoder {
	return &Decoder{pty: pty}
}

// Feed decodes one chunk. It returns the sanitized text that is complete so
// far and the number of DSR queries removed from it; the caller answers each
// with DSRReply.
func (d *Decoder) Feed(p []byte) (text string, dsr int) {
	buf := p
	if len(d.carry) > 0 {
		buf = make([]byte, 0, len(d.carry)+len(p))
		buf = append(buf, d.carry...)
		buf = append(buf, p...)
		d.carry = d.carry[:0]
	}
	if d.pty {
		buf, dsr = stripDSR(buf)
	}
	keep := len(buf) - d.incompleteSuffix(buf)
	if keep < len(buf) {
		d.carry = append(d.carry[:0], buf[keep:]...)
	}
	return Sanitize(buf[:keep], d.pty), dsr
}

// Flush returns whatever was held back, sanitized; call it at end of stream.
func (d *Decoder) Flush() string {
	if len(d.carry) == 0 {
		return ""
	}
	s := Sanitize(d.carry, d.pty)
	d.carry = d.carry[:0]
	return s
}

// incompleteSuffix is the length of the tail of b that must wait for more
// input: a proper prefix of a DSR query (PTY only) or a truncated UTF-8
// sequence. The two never overlap (DSR prefixes are ASCII).
func (d *Decoder) incompleteSuffix(b []byte) int {
	if d.pty {
		for k := len(dsrPrivate) - 1; k >= 1; k-- {
			if len(b) < k {
				continue
			}
			tail := b[len(b)-k:]
			if bytes.HasPrefix(dsrPlain, tail) && k < len(dsrPlain) || bytes.HasPrefix(dsrPrivate, tail) {
				return k
			}
		}
	}
	// A UTF-8 sequence is at most 4 bytes, so only the last 3 can be an
	// unfinished one.
	for i := len(b) - 1; i >= 0 && i >= len(b)-3; i-- {
		c := b[i]
		if c < 0x80 {
			return 0
		}
		if c >= 0xC0 {
			if need := seqLen(c); need > len(b)-i {
				return len(b) - i
			}
			return 0
		}
	}
	return 0
}

// seqLen is the length a UTF-8 sequence starting with lead byte c claims.
func seqLen(c byte) int {
	switch {
	case c >= 0xF0:
		return 4
	case c >= 0xE0:
		return 3
	default:
		return 2
	}
}

// stripDSR removes every complete DSR query from b.
func stripDSR(b []byte) ([]byte, int) {
	if bytes.IndexByte(b, 0x1b) < 0 {
		return b, 0
	}
	var out []byte
	n, last := 0, 0
	for i := 0; i < len(b); {
		j := bytes.IndexByte(b[i:], 0x1b)
		if j < 0 {
			break
		}
		i += j
		var l int
		switch {
		case bytes.HasPrefix(b[i:], dsrPlain):
			l = len(dsrPlain)
		case bytes.HasPrefix(b[i:], dsrPrivate):
			l = len(dsrPrivate)
		default:
			i++
			continue
		}
		if out == nil {
			out = make([]byte, 0, len(b))
		}
		out = append(out, b[last:i]...)
		i += l
		last = i
		n++
	}
	if n == 0 {
		return b, 0
	}
	return append(out, b[last:]...), n
}

// plainTable marks the bytes that pass the sanitizer unchanged: printable
// ASCII, \t, \n and \r. Read-only.
var plainTable = func() (t [256]bool) {
	for c := 0x20; c < 0x7f; c++ {
		t[c] = true
	}
	t['\t'], t['\n'], t['\r'] = true, true, true
	return t
}()

// plainRun returns the length of the prefix of b made of plain bytes.
func plainRun(b []byte) int {
	i := 0
	for i < len(b) && plainTable[b[i]] {
		i++
	}
	return i
}

// maybeFormat is a cheap pre-filter for unicode.Cf: no format character lies
// outside these ranges (U+00AD, U+0600..U+2FFF, U+FEFF and above), so the
// common scripts (Latin-1, Greek, Cyrillic, CJK, ...) skip the table lookup.
func maybeFormat(r rune) bool {
	return r == 0xAD || r >= 0x600 && r < 0x3000 || r >= 0xFEFF
}

// Sanitize makes b safe to hand to an agent:
//   - C0 controls are dropped except \t \n \r (and ESC when pty is true, so
//     ANSI colour sequences survive); DEL and C1 controls are dropped too;
//   - Unicode format characters (category Cf: zero-width spaces and joiners,
//     bidi overrides, BOM, ...) are dropped — they hide text from a reader;
//   - UTF-16 surrogates encoded as UTF-8 (lone surrogates, "CESU") are
//     dropped;
//   - any other invalid byte becomes U+FFFD, so binary output stays visible
//     as garbage instead of vanishing silently.
func Sanitize(b []byte, pty bool) string {
	i := plainRun(b)
	if i == len(b) {
		return string(b)
	}
	out := make([]byte, 0, len(b))
	out = append(out, b[:i]...)
	for i < len(b) {
		if n := plainRun(b[i:]); n > 0 {
			out = append(out, b[i:i+n]...)
			i += n
			continue
		}
		c := b[i]
		if c < utf8.RuneSelf {
			if pty && c == 0x1b {
				out = append(out, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size == 1 {
			if c == 0xED && i+2 < len(b) && b[i+1] >= 0xA0 && b[i+1] <= 0xBF && b[i+2]&0xC0 == 0x80 {
				i += 3 // encoded surrogate half
				continue
			}
			out = append(out, "\uFFFD"...)
			i++
			continue
		}
		if !(r >= 0x80 && r <= 0x9f) && !(maybeFormat(r) && unicode.Is(unicode.Cf, r)) {
			out = append(out, b[i:i+size]...)
		}
		i += size
	}
	return string(out)
}
