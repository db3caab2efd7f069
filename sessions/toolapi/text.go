package toolapi

import (
	"errors"
	"fmt"
	"unicode/utf8"
)

// ErrInvalidText classifies a request body whose text is not valid UTF-8:
// raw bytes that are not UTF-8, or a \u escape of a lone UTF-16 surrogate.
// A JSON decoder silently turns both into U+FFFD, so the command that would
// run is not the one that was sent; such a request is refused instead.
var ErrInvalidText = errors.New("invalid UTF-8 text")

// CheckText reports the first invalid UTF-8 sequence or lone surrogate
// escape in a JSON document, before it is decoded.
func CheckText(raw []byte) error {
	if !utf8.Valid(raw) {
		off := 0
		for off < len(raw) {
			r, n := utf8.DecodeRune(raw[off:])
			if r == utf8.RuneError && n <= 1 {
				break
			}
			off += n
		}
		return fmt.Errorf("%w: byte %d of the request body is not valid UTF-8 (send text as UTF-8; binary data has no place in a command)", ErrInvalidText, off)
	}
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' || i+1 >= len(raw) {
			continue
		}
		if raw[i+1] != 'u' {
			i++ // a two-byte escape such as \\ or \"
			continue
		}
		r, ok := hex4(raw, i+2)
		if !ok {
			i++
			continue
		}
		switch {
		case r >= 0xD800 && r < 0xDC00:
			if i+11 < len(raw) && raw[i+6] == '\\' && raw[i+7] == 'u' {
				if lo, ok := hex4(raw, i+8); ok && lo >= 0xDC00 && lo < 0xE000 {
					i += 11 // a surrogate pair: one valid character
					continue
				}
			}
			return fmt.Errorf("%w: \\u%04x at byte %d of the request body is a lone UTF-16 surrogate", ErrInvalidText, r, i)
		case r >= 0xDC00 && r < 0xE000:
			return fmt.Errorf("%w: \\u%04x at byte %d of the request body is a lone UTF-16 surrogate", ErrInvalidText, r, i)
		}
		i += 5
	}
	return nil
}

func hex4(b []byte, at int) (rune, bool) {
	if at+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[at : at+4] {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c-'a') + 10
		case c >= 'A' && c <= 'F':
			r |= rune(c-'A') + 10
		default:
			return 0, false
		}
	}
	return r, true
}
