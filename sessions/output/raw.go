package output

// Raw holds a command's output bytes exactly as the command wrote them (no
// decoding, no sanitising), by stream, addressed by absolute byte offset
// like Log. It keeps the bytes from a release point to the end: a reader
// that follows the whole output releases what it has read (Release), and
// the writer decides, by Len, whether to wait for it (back-pressure) or to
// drop from the front (DropTo). Raw is not safe for concurrent use.
type Raw struct {
	buf  []byte
	base int64 // absolute offset of buf[0]
	// switches are the absolute offsets where the stream changes, oldest
	// first, pruned like Log's.
	switches []streamSwitch
}

// Write appends p, from stream st; p is copied.
func (r *Raw) Write(st Stream, p []byte) {
	if len(p) == 0 {
		return
	}
	if k := len(r.switches); k == 0 || r.switches[k-1].stream != st {
		r.switches = append(r.switches, streamSwitch{at: r.End(), stream: st})
	}
	r.buf = append(r.buf, p...)
}

// Start is the absolute offset of the first byte held.
func (r *Raw) Start() int64 { return r.base }

// End is the absolute offset just past the last byte held: the number of
// bytes ever written.
func (r *Raw) End() int64 { return r.base + int64(len(r.buf)) }

// Len is the number of bytes held.
func (r *Raw) Len() int { return len(r.buf) }

// Release forgets the bytes before offset upTo (clamped to what is held).
func (r *Raw) Release(upTo int64) {
	if upTo <= r.base {
		return
	}
	n := int(min(upTo, r.End()) - r.base)
	r.base += int64(n)
	if n == len(r.buf) {
		r.buf = r.buf[:0]
	} else if n > len(r.buf)/2 || n > 1<<20 {
		r.buf = append(r.buf[:0], r.buf[n:]...)
	} else {
		r.buf = r.buf[n:]
	}
	i := 0
	for i+1 < len(r.switches) && r.switches[i+1].at <= r.base {
		i++
	}
	if i > 0 {
		r.switches = append(r.switches[:0], r.switches[i:]...)
	}
}

// DropTo keeps at most max bytes, dropping from the front; it returns how
// many it dropped.
func (r *Raw) DropTo(max int) int64 {
	if len(r.buf) <= max {
		return 0
	}
	n := int64(len(r.buf) - max)
	r.Release(r.base + n)
	return n
}

// RawChunk is one piece of a Raw read by offset.
type RawChunk struct {
	Stream Stream
	// Offset is the absolute offset of Data's first byte.
	Offset int64
	// Data is a copy of the bytes, safe to use after the Raw changes.
	Data []byte
	// Lost is how many bytes from the requested offset were released or
	// dropped before this read reached them.
	Lost int64
}

// Next returns the bytes held at or after from, up to maxBytes and from
// one stream only; ok is false when nothing is held at or after from. An
// offset before Start() continues at Start() and reports the gap in Lost.
func (r *Raw) Next(from int64, maxBytes int) (c RawChunk, ok bool) {
	start, end := r.Start(), r.End()
	if from < start {
		c.Lost = start - from
		from = start
	}
	if from >= end {
		return c, c.Lost > 0
	}
	limit := end
	c.Stream = StreamStdout
	for _, sw := range r.switches {
		if sw.at > from {
			limit = sw.at
			break
		}
		c.Stream = sw.stream
	}
	if maxBytes < 1 {
		maxBytes = 1
	}
	limit = min(limit, from+int64(maxBytes))
	c.Offset = from
	c.Data = append([]byte(nil), r.buf[from-start:limit-start]...)
	return c, true
}
