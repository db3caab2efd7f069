// Package display decides which code points a person cannot see, and shows
// them escaped: text a person approves (a command, its argv, cwd, env, the
// agent) must read as what runs, so nothing in it may print as nothing,
// print blank, or reorder what follows. The CLI escapes with Escape; the
// web console gets the same set as a JavaScript character class
// (JSCharClass), so both follow one rule.
//
// The rule is by Unicode property, not a list of known tricks:
//
//   - controls (Cc), formats (Cf: zero-width and bidirectional marks,
//     soft hyphen...), private use (Co), surrogates (Cs) and unassigned
//     code points (Cn): they have no glyph of their own, or one the reader
//     cannot know;
//   - line and paragraph separators (Zl, Zp), and every space separator
//     (Zs) but U+0020: they print as blanks that are not the space they
//     look like;
//   - Default_Ignorable_Code_Point (Other_Default_Ignorable_Code_Point and
//     the variation selectors beyond Cf): fonts render them as nothing;
//     this brings the Hangul fillers U+115F, U+1160, U+3164 and U+FFA0,
//     letters (Lo) that print blank;
//   - blank symbols: U+2800 BRAILLE PATTERN BLANK, the one symbol (So) whose
//     glyph is empty by definition (the braille cell with no dots);
//   - a combining mark (Mn, Me) with nothing visible to combine with (at
//     the start, or after a space or an escaped code point): alone it
//     prints as nothing or over a neighbour.
package display

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// BrailleBlank is U+2800, the braille cell with no dots.
const BrailleBlank = '\u2800'

// Hidden reports whether r prints as nothing or as a blank that is not
// U+0020 (see the package doc for the rule). Combining marks are judged in
// context by Escape, not here.
func Hidden(r rune) bool {
	switch {
	case r == ' ':
		return false
	case r == BrailleBlank:
		return true
	case unicode.In(r, unicode.Cc, unicode.Cf, unicode.Co, unicode.Cs, unicode.Zs, unicode.Zl, unicode.Zp):
		return true
	case unicode.In(r, unicode.Other_Default_Ignorable_Code_Point, unicode.Variation_Selector):
		return true
	}
	return !assigned(r)
}

// assigned reports whether r has a general category other than Cn (Go's
// unicode.C holds the unassigned code points too, so not C).
func assigned(r rune) bool {
	return unicode.In(r, unicode.L, unicode.M, unicode.N, unicode.P, unicode.S, unicode.Z, unicode.Cc, unicode.Cf, unicode.Co, unicode.Cs)
}

func combining(r rune) bool { return unicode.In(r, unicode.Mn, unicode.Me) }

// Escape returns s with every hidden code point, and every combining mark
// that has no visible base, written as \u{XXXX}; a backslash that starts
// such a form in s is written \u{005c}, so an escape in the output always
// stands for a code point of s. Invalid UTF-8 bytes are written \x{XX}.
// keep lists code points shown as is although hidden (the console keeps
// "\n\t" for its layout; the CLI keeps none).
func Escape(s, keep string) string {
	if clean(s, keep) {
		return s
	}
	var b strings.Builder
	based := false // the previous code point printed visibly
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x{%02x}`, s[i])
			based = false
		case strings.ContainsRune(keep, r):
			b.WriteRune(r)
			based = false
		case Hidden(r) || (combining(r) && !based) || (r == '\\' && strings.HasPrefix(s[i+1:], "u{")):
			fmt.Fprintf(&b, `\u{%04x}`, r)
			based = false
		default:
			b.WriteRune(r)
			based = r != ' '
		}
		i += n
	}
	return b.String()
}

// clean reports whether Escape(s, keep) is s.
func clean(s, keep string) bool {
	based := false
	for i, r := range s {
		switch {
		case r == utf8.RuneError:
			return false
		case strings.ContainsRune(keep, r):
			based = false
		case Hidden(r) || (combining(r) && !based) || (r == '\\' && strings.HasPrefix(s[i+1:], "u{")):
			return false
		default:
			based = r != ' '
		}
	}
	return true
}

// JSCharClass is the set of Hidden code points, less those in keep, as the
// body of a JavaScript character class for a regular expression with the
// u flag ("[" + JSCharClass(...) + "]"): the console escapes exactly what
// Escape does.
func JSCharClass(keep string) string {
	var b strings.Builder
	lo := rune(-1)
	flush := func(hi rune) {
		if lo < 0 {
			return
		}
		if lo == hi {
			fmt.Fprintf(&b, `\u{%x}`, lo)
		} else {
			fmt.Fprintf(&b, `\u{%x}-\u{%x}`, lo, hi)
		}
		lo = -1
	}
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if Hidden(r) && !strings.ContainsRune(keep, r) {
			if lo < 0 {
				lo = r
			}
			continue
		}
		flush(r - 1)
	}
	flush(unicode.MaxRune)
	return b.String()
}

// JSCombiningClass is the character class of combining marks (Mn, Me),
// which the console escapes when nothing visible precedes them.
func JSCombiningClass() string { return `\p{Mn}\p{Me}` }
