package output

import (
	"bytes"
	"sort"
)

// Masker replaces known values (the credential broker's real secret values)
// by their stand-ins (their placeholders) in output: defence in depth, as
// no such value should ever reach a sandbox (docs/secrets.md). The zero or
// nil Masker changes nothing. It is safe for concurrent use (read-only).
type Masker struct {
	pairs []maskPair
}

type maskPair struct{ value, repl []byte }

// NewMasker masks each key of values by its value. Empty keys are ignored.
func NewMasker(values map[string]string) *Masker {
	m := &Masker{}
	for v, r := range values {
		if v != "" {
			m.pairs = append(m.pairs, maskPair{[]byte(v), []byte(r)})
		}
	}
	// Longest first, so a value that contains another is replaced whole.
	sort.Slice(m.pairs, func(i, j int) bool { return len(m.pairs[i].value) > len(m.pairs[j].value) })
	return m
}

// Mask returns b with every value replaced; b itself when none occurs.
func (m *Masker) Mask(b []byte) []byte {
	if m == nil {
		return b
	}
	for _, p := range m.pairs {
		if bytes.Contains(b, p.value) {
			b = bytes.ReplaceAll(b, p.value, p.repl)
		}
	}
	return b
}

// MaskString is Mask for a string.
func (m *Masker) MaskString(s string) string {
	if m == nil || len(m.pairs) == 0 {
		return s
	}
	return string(m.Mask([]byte(s)))
}

// pending is the length of the longest suffix of b that is a proper prefix
// of a value: those bytes wait for the next chunk, so a value split across
// reads is still masked. Output that cannot start a value is not delayed.
func (m *Masker) pending(b []byte) int {
	if m == nil {
		return 0
	}
	best := 0
	for _, p := range m.pairs {
		v := p.value
		from := max(0, len(b)-len(v)+1)
		for i := from; i < len(b); i++ {
			if len(b)-i <= best {
				break
			}
			if b[i] == v[0] && bytes.HasPrefix(v, b[i:]) {
				best = len(b) - i
				break
			}
		}
	}
	return best
}
