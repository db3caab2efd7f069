package output

import (
	"bytes"
	"io"
	"sort"
	"sync"
	"time"
)

// Masker replaces known values (the credential broker's real secret values)
// by their stand-ins (their placeholders) in output: defence in depth, as
// no such value should ever reach a sandbox (docs/secrets.md). A nil
// Masker changes nothing. It is read-only, so safe for concurrent use.
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
	// Longest first: at one position the longest value wins.
	sort.Slice(m.pairs, func(i, j int) bool { return len(m.pairs[i].value) > len(m.pairs[j].value) })
	return m
}

// Mask returns b with every value replaced.
func (m *Masker) Mask(b []byte) []byte {
	out, held := m.cut(b)
	return append(out, held...)
}

// cut replaces every value in b and splits the result: out is final, held
// the longest end of b that is a proper prefix of a value (it may complete
// one with the next bytes).
func (m *Masker) cut(b []byte) (out, held []byte) {
	if m == nil || len(m.pairs) == 0 {
		return b, nil
	}
	for {
		at, p := -1, (*maskPair)(nil)
		for i := range m.pairs {
			if j := bytes.Index(b, m.pairs[i].value); j >= 0 && (at < 0 || j < at) {
				at, p = j, &m.pairs[i]
			}
		}
		if p == nil {
			break
		}
		out = append(out, b[:at]...)
		out = append(out, p.repl...)
		b = b[at+len(p.value):]
	}
	k := m.prefixEnd(b)
	return append(out, b[:len(b)-k]...), b[len(b)-k:]
}

// prefixEnd is the length of the longest end of b that is a proper prefix
// of a value.
func (m *Masker) prefixEnd(b []byte) int {
	best := 0
	for _, p := range m.pairs {
		v := p.value
		for i := max(0, len(b)-len(v)+1); i < len(b) && len(b)-i > best; i++ {
			if b[i] == v[0] && bytes.HasPrefix(v, b[i:]) {
				best = len(b) - i
				break
			}
		}
	}
	return best
}

// Reader returns r with every value replaced, a value split across reads
// included: bytes that may start one wait for the next read, at most hold
// (a value written in parts further apart than hold is not masked). A nil
// Masker returns r itself. The Reader reads r from a goroutine of its own,
// which ends when r returns an error; read it to the end (or use
// ReadCloser).
func (m *Masker) Reader(r io.Reader, hold time.Duration) io.Reader {
	if m == nil || len(m.pairs) == 0 {
		return r
	}
	return m.newReader(r, hold)
}

// ReadCloser is Reader for a stream that may be abandoned before its end:
// Close closes rc and ends the reading goroutine.
func (m *Masker) ReadCloser(rc io.ReadCloser, hold time.Duration) io.ReadCloser {
	if m == nil || len(m.pairs) == 0 {
		return rc
	}
	return m.newReader(rc, hold)
}

func (m *Masker) newReader(r io.Reader, hold time.Duration) *maskReader {
	mr := &maskReader{m: m, hold: hold, src: r, chunks: make(chan []byte, 1), done: make(chan struct{})}
	go mr.pump()
	return mr
}

type maskReader struct {
	m      *Masker
	hold   time.Duration
	src    io.Reader
	chunks chan []byte
	err    error // set before chunks is closed
	done   chan struct{}
	once   sync.Once
	held   []byte
	out    []byte
	ended  bool
}

func (mr *maskReader) pump() {
	for {
		buf := make([]byte, 32<<10)
		n, err := mr.src.Read(buf)
		if n > 0 {
			select {
			case mr.chunks <- buf[:n]:
			case <-mr.done:
				return
			}
		}
		if err != nil {
			mr.err = err
			close(mr.chunks)
			return
		}
	}
}

// Close ends the reading goroutine and closes the source if it can be.
func (mr *maskReader) Close() error {
	mr.once.Do(func() { close(mr.done) })
	if c, ok := mr.src.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

func (mr *maskReader) Read(p []byte) (int, error) {
	for len(mr.out) == 0 {
		if mr.ended {
			if len(mr.held) == 0 {
				return 0, mr.err
			}
			mr.out, mr.held = mr.held, nil
			break
		}
		var c []byte
		var ok bool
		if len(mr.held) > 0 {
			t := time.NewTimer(mr.hold)
			select {
			case c, ok = <-mr.chunks:
				t.Stop()
			case <-t.C:
				mr.out, mr.held = mr.held, nil
				continue
			}
		} else {
			c, ok = <-mr.chunks
		}
		if !ok {
			mr.ended = true
			continue
		}
		out, held := mr.m.cut(append(mr.held, c...))
		mr.out, mr.held = out, bytes.Clone(held)
	}
	n := copy(p, mr.out)
	mr.out = mr.out[n:]
	return n, nil
}
