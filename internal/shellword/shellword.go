// Package shellword writes strings as POSIX shell words, with
// mvdan.cc/sh/v3/syntax.Quote doing the quoting.
//
// syntax.Quote in its POSIX variant refuses every character outside the
// printable set, newline and tab included, because POSIX single quotes have
// no escape sequences; its bash variant would write them as $'...', which
// dash and other POSIX shells read differently. Newline and tab are literal
// inside double quotes in every POSIX shell, so Quote writes exactly those
// two characters that way, between runs quoted by syntax.Quote. Everything
// else syntax.Quote refuses (NUL, other controls, invisible or invalid
// runes) is an error wrapping ErrUnquotable.
package shellword

import (
	"errors"
	"fmt"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// ErrUnquotable is the refusal of a string that no POSIX shell word can
// carry portably: a NUL byte, a control character other than newline and
// tab, or an invalid or non-printable rune.
var ErrUnquotable = errors.New("cannot be written as a POSIX shell word")

// Quote returns s as one POSIX shell word that the shell reads back as
// exactly s, without any expansion.
func Quote(s string) (string, error) {
	if !strings.ContainsAny(s, "\n\t") {
		q, err := syntax.Quote(s, syntax.LangPOSIX)
		if err != nil {
			return "", fmt.Errorf("%.80q %w: %w", s, ErrUnquotable, err)
		}
		return q, nil
	}
	var b strings.Builder
	for s != "" {
		i := strings.IndexAny(s, "\n\t")
		if i < 0 {
			i = len(s)
		}
		if i > 0 {
			q, err := syntax.Quote(s[:i], syntax.LangPOSIX)
			if err != nil {
				return "", fmt.Errorf("%.80q %w: %w", s, ErrUnquotable, err)
			}
			b.WriteString(q)
		}
		if i < len(s) {
			b.WriteString(`"` + s[i:i+1] + `"`)
			i++
		}
		s = s[i:]
	}
	return b.String(), nil
}

// Join quotes each word of argv with Quote and joins them with spaces: one
// POSIX shell line that splits back into exactly argv.
func Join(argv []string) (string, error) {
	words := make([]string, len(argv))
	for i, a := range argv {
		q, err := Quote(a)
		if err != nil {
			return "", fmt.Errorf("argv[%d]: %w", i, err)
		}
		words[i] = q
	}
	return strings.Join(words, " "), nil
}
