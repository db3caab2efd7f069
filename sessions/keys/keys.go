// Package keys encodes the process tool's send-keys and paste input (docs/tools.md)
// into the bytes a terminal would send: tmux-like key names (enter, up, f5,
// ...), modifiers C- M- S- and ^X, hex bytes and bracketed paste.
package keys

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrUnknownKey is wrapped by every error about a key name that cannot be
// encoded.
var ErrUnknownKey = errors.New("unknown key")

// Bracketed-paste markers (xterm): programs that enabled bracketed paste treat
// what is between them as pasted text, not typed keys.
const (
	PasteStart = "\x1b[200~"
	PasteEnd   = "\x1b[201~"
)

// special describes a named key. seq is its plain encoding. For keys that
// take xterm modifier parameters, csi is the final byte and num the numeric
// parameter: modified form ESC[num;mFINAL (num 1 for arrows and f1-f4).
type special struct {
	seq   string
	num   int
	final byte
}

// names is the key table (reference/openclaw-behaviour.md, PTY), with the
// usual aliases.
var names = map[string]special{
	"enter":  {seq: "\r"},
	"tab":    {seq: "\t"},
	"esc":    {seq: "\x1b"},
	"space":  {seq: " "},
	"bspace": {seq: "\x7f"},
	"up":     {seq: "\x1b[A", num: 1, final: 'A'},
	"down":   {seq: "\x1b[B", num: 1, final: 'B'},
	"right":  {seq: "\x1b[C", num: 1, final: 'C'},
	"left":   {seq: "\x1b[D", num: 1, final: 'D'},
	"home":   {seq: "\x1b[1~", num: 1, final: '~'},
	"end":    {seq: "\x1b[4~", num: 4, final: '~'},
	"pgup":   {seq: "\x1b[5~", num: 5, final: '~'},
	"pgdn":   {seq: "\x1b[6~", num: 6, final: '~'},
	"ic":     {seq: "\x1b[2~", num: 2, final: '~'},
	"dc":     {seq: "\x1b[3~", num: 3, final: '~'},
	"btab":   {seq: "\x1b[Z"},
	"f1":     {seq: "\x1bOP", num: 1, final: 'P'},
	"f2":     {seq: "\x1bOQ", num: 1, final: 'Q'},
	"f3":     {seq: "\x1bOR", num: 1, final: 'R'},
	"f4":     {seq: "\x1bOS", num: 1, final: 'S'},
	"f5":     {seq: "\x1b[15~", num: 15, final: '~'},
	"f6":     {seq: "\x1b[17~", num: 17, final: '~'},
	"f7":     {seq: "\x1b[18~", num: 18, final: '~'},
	"f8":     {seq: "\x1b[19~", num: 19, final: '~'},
	"f9":     {seq: "\x1b[20~", num: 20, final: '~'},
	"f10":    {seq: "\x1b[21~", num: 21, final: '~'},
	"f11":    {seq: "\x1b[23~", num: 23, final: '~'},
	"f12":    {seq: "\x1b[24~", num: 24, final: '~'},
}

var aliases = map[string]string{
	"return": "enter", "cr": "enter", "escape": "esc", "backspace": "bspace",
	"bs": "bspace", "pageup": "pgup", "ppage": "pgup", "pagedown": "pgdn",
	"npage": "pgdn", "insert": "ic", "ins": "ic", "delete": "dc", "del": "dc",
}

// Names returns the accepted key names (without aliases), for error messages.
func Names() []string {
	return []string{"enter", "tab", "esc", "space", "bspace", "up", "down", "left", "right",
		"home", "end", "pgup", "pgdn", "ic", "dc", "btab", "f1..f12"}
}

type mods struct{ ctrl, alt, shift bool }

func (m mods) any() bool { return m.ctrl || m.alt || m.shift }

// param is the xterm modifier parameter 1 + shift + 2*alt + 4*ctrl.
func (m mods) param() int {
	p := 1
	if m.shift {
		p++
	}
	if m.alt {
		p += 2
	}
	if m.ctrl {
		p += 4
	}
	return p
}

// Encode turns key names into bytes. A key is a name from the table (case
// insensitive), a single character (sent as is), ^X (control-X), or either of
// those with any of the prefixes C- (control), M- (meta/alt), S- (shift).
// An empty key or a name that cannot be encoded is an error naming it.
func Encode(keys []string) ([]byte, error) {
	var out []byte
	for _, k := range keys {
		b, err := encodeOne(k)
		if err != nil {
			return nil, err
		}
		out = append(out, b...)
	}
	return out, nil
}

func encodeOne(key string) ([]byte, error) {
	if key == "" {
		return nil, fmt.Errorf("empty key name: %w", ErrUnknownKey)
	}
	var m mods
	rest := key
	for len(rest) > 2 && rest[1] == '-' {
		switch rest[0] {
		case 'C', 'c':
			m.ctrl = true
		case 'M', 'm':
			m.alt = true
		case 'S', 's':
			m.shift = true
		default:
			return nil, fmt.Errorf("key %q: unknown modifier %q (use C-, M- or S-): %w", key, rest[:2], ErrUnknownKey)
		}
		rest = rest[2:]
	}
	if len(rest) == 2 && rest[0] == '^' {
		m.ctrl = true
		rest = rest[1:]
	}
	if r := []rune(rest); len(r) == 1 {
		return encodeChar(key, r[0], m)
	}
	name := strings.ToLower(rest)
	if a, ok := aliases[name]; ok {
		name = a
	}
	sp, ok := names[name]
	if !ok {
		return nil, fmt.Errorf("%w %q (known keys: %s; modifiers C- M- S-, ^X, or a single character)",
			ErrUnknownKey, key, strings.Join(Names(), " "))
	}
	if !m.any() {
		return []byte(sp.seq), nil
	}
	if sp.final != 0 {
		return []byte("\x1b[" + strconv.Itoa(sp.num) + ";" + strconv.Itoa(m.param()) + string(sp.final)), nil
	}
	// enter tab esc space bspace btab: only the combinations terminals send.
	var b []byte
	switch {
	case name == "tab" && m.shift && !m.ctrl:
		b = []byte(names["btab"].seq)
	case name == "space" && m.ctrl && !m.shift:
		b = []byte{0}
	case !m.ctrl && !m.shift:
		b = []byte(sp.seq)
	default:
		return nil, fmt.Errorf("key %q: modifiers C-/S- cannot be combined with %s: %w", key, name, ErrUnknownKey)
	}
	if m.alt {
		b = append([]byte{0x1b}, b...)
	}
	return b, nil
}

func encodeChar(key string, r rune, m mods) ([]byte, error) {
	if m.shift && r >= 'a' && r <= 'z' {
		r -= 'a' - 'A'
	}
	b := []byte(string(r))
	if m.ctrl {
		c, ok := ctrlByte(r)
		if !ok {
			return nil, fmt.Errorf("key %q: no control code for %q: %w", key, string(r), ErrUnknownKey)
		}
		b = []byte{c}
	}
	if m.alt {
		b = append([]byte{0x1b}, b...)
	}
	return b, nil
}

// ctrlByte is the byte a terminal sends for Ctrl+r.
func ctrlByte(r rune) (byte, bool) {
	switch {
	case r >= 'a' && r <= 'z':
		return byte(r-'a') + 1, true
	case r >= '@' && r <= '_': // @ A-Z [ \ ] ^ _
		return byte(r - '@'), true
	case r == ' ':
		return 0, true
	case r == '?':
		return 0x7f, true
	}
	return 0, false
}

// Hex decodes hex byte strings: each entry is one byte written as one or two
// hex digits, optionally prefixed by 0x or \x ("1b", "0x0d", "\x7f").
func Hex(entries []string) ([]byte, error) {
	out := make([]byte, 0, len(entries))
	for _, e := range entries {
		h := strings.TrimSpace(e)
		for _, p := range []string{"0x", "0X", `\x`} {
			h = strings.TrimPrefix(h, p)
		}
		if len(h) < 1 || len(h) > 2 {
			return nil, fmt.Errorf("hex byte %q: want one or two hex digits, e.g. 1b or 0x0d", e)
		}
		v, err := strconv.ParseUint(h, 16, 8)
		if err != nil {
			return nil, fmt.Errorf("hex byte %q: %w", e, err)
		}
		out = append(out, byte(v))
	}
	return out, nil
}

// Paste wraps text in bracketed-paste markers when bracketed is true.
func Paste(text string, bracketed bool) []byte {
	if !bracketed {
		return []byte(text)
	}
	return []byte(PasteStart + text + PasteEnd)
}
