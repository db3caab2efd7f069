package supervisor

import (
	"compress/flate"
	"encoding/binary"
	"encoding/json"
)

// outFrame is an encoded frame for one connection (the one that asked, or
// the one its session is bound to); pooled ones go back to Server.pool.
type outFrame struct {
	b      []byte
	pooled *[]byte
	to     *serverConn
	// closeAfter closes a socket connection once the frame is written (the
	// notice to a superseded client).
	closeAfter bool
}

// send queues a frame for connection to (nil: dropped).
func (s *Server) send(to *serverConn, typ byte, stream uint32, payload []byte) {
	b := AppendFrame(make([]byte, 0, HeaderSize+len(payload)), typ, stream, payload)
	s.enqueue(outFrame{b: b, to: to})
}

// enqueue hands a frame to the writer; a frame for no connection (or after
// Serve ended) is dropped.
func (s *Server) enqueue(f outFrame) {
	if f.to != nil {
		select {
		case s.outq <- f:
			return
		case <-s.stop:
		}
	}
	if f.pooled != nil {
		s.pool.Put(f.pooled)
	}
}

// getFrame returns a pooled frame buffer of poolFrameSize bytes.
func (s *Server) getFrame() *[]byte {
	if v := s.pool.Get(); v != nil {
		return v.(*[]byte)
	}
	b := make([]byte, poolFrameSize)
	return &b
}

// sendOutputFrame sends n bytes of output that were read straight into
// (*fb)[HeaderSize+1:], taking ownership of fb (no copy of the data). It
// returns whether the chunk went compressed.
func (s *Server) sendOutputFrame(to *serverConn, stream uint32, which byte, fb *[]byte, n int, tryZ bool) bool {
	data := (*fb)[HeaderSize+1 : HeaderSize+1+n]
	if tryZ && n >= minCompress && s.deflate.Load() {
		zb := s.getFrame()
		if k, ok := s.compress((*zb)[HeaderSize+5:], data); ok {
			binary.BigEndian.PutUint32((*zb)[HeaderSize+1:], uint32(n))
			s.pool.Put(fb)
			s.queueOutput(to, zb, FrameOutputZ, stream, which, 4+k)
			return true
		}
		s.pool.Put(zb)
	}
	s.queueOutput(to, fb, FrameOutput, stream, which, n)
	return false
}

// queueOutput fills in the header of a pooled output frame and queues it.
func (s *Server) queueOutput(to *serverConn, bp *[]byte, typ byte, stream uint32, which byte, n int) {
	b := (*bp)[:HeaderSize+1+n]
	b[0] = Magic
	b[1] = typ
	binary.BigEndian.PutUint32(b[2:6], stream)
	binary.BigEndian.PutUint32(b[6:10], uint32(1+n))
	b[10] = which
	s.enqueue(outFrame{b: b, pooled: bp, to: to})
}

// sendOutput queues an Output frame (data is copied into a pooled buffer).
// Bulk chunks are sent DEFLATE-compressed (OutputZ) when the client asked
// for it and it pays: the Engine's attach copy, not the supervisor, bounds
// throughput, so fewer bytes on the stream are more output per second.
// It returns whether the chunk went compressed.
func (s *Server) sendOutput(to *serverConn, stream uint32, which byte, data []byte, tryZ bool) bool {
	for len(data) > maxOutputChunk {
		s.sendOutput(to, stream, which, data[:maxOutputChunk], tryZ)
		data = data[maxOutputChunk:]
	}
	var bp *[]byte
	if v := s.pool.Get(); v != nil {
		bp = v.(*[]byte)
	} else {
		nb := make([]byte, poolFrameSize)
		bp = &nb
	}
	typ, n := FrameOutput, len(data)
	if tryZ && len(data) >= minCompress && s.deflate.Load() {
		// OutputZ payload: stream, raw length (u32), DEFLATE data.
		if k, ok := s.compress((*bp)[HeaderSize+5:], data); ok {
			binary.BigEndian.PutUint32((*bp)[HeaderSize+1:], uint32(len(data)))
			typ, n = FrameOutputZ, 4+k
		}
	}
	b := (*bp)[:HeaderSize+1+n]
	b[0] = Magic
	b[1] = typ
	binary.BigEndian.PutUint32(b[2:6], stream)
	binary.BigEndian.PutUint32(b[6:10], uint32(1+n))
	b[10] = which
	if typ == FrameOutput {
		copy(b[11:], data)
	}
	s.enqueue(outFrame{b: b, pooled: bp, to: to})
	return typ == FrameOutputZ
}

// fixedBuf is an io.Writer into a fixed slice that fails when full.
type fixedBuf struct {
	b []byte
	n int
}

func (f *fixedBuf) Write(p []byte) (int, error) {
	if f.n+len(p) > len(f.b)*9/10 {
		return 0, errFull
	}
	f.n += copy(f.b[f.n:], p)
	return len(p), nil
}

// compress deflates data into dst; ok only when the result is under 90% of
// the input.
func (s *Server) compress(dst, data []byte) (int, bool) {
	out := &fixedBuf{b: dst[:min(len(dst), len(data))]}
	var w *flate.Writer
	if v := s.zpool.Get(); v != nil {
		w = v.(*flate.Writer)
		w.Reset(out)
	} else {
		w, _ = flate.NewWriter(out, flate.BestSpeed)
	}
	defer s.zpool.Put(w)
	if _, err := w.Write(data); err != nil {
		return 0, false
	}
	if err := w.Close(); err != nil {
		return 0, false
	}
	return out.n, true
}

func (s *Server) sendJSON(to *serverConn, typ byte, stream uint32, v any) {
	b, _ := json.Marshal(v)
	s.send(to, typ, stream, b)
}

func (s *Server) sendError(to *serverConn, stream uint32, err error) {
	s.send(to, FrameError, stream, []byte(err.Error()))
}

// writer drains the queue, coalescing frames per connection, and flushes
// when idle or when the next frame is for another connection.
func (s *Server) writer() {
	var last *serverConn
	flush := func(c *serverConn) {
		if c != nil {
			c.flush(s.logf)
		}
	}
	for {
		var f outFrame
		select {
		case f = <-s.outq:
		case <-s.stop:
			flush(last)
			return
		}
		if last != f.to {
			flush(last)
			last = f.to
		}
		f.to.write(f.b, s.logf)
		if f.pooled != nil {
			s.pool.Put(f.pooled)
		}
		switch {
		case f.closeAfter:
			f.to.flush(s.logf)
			f.to.close()
			last = nil
		case len(s.outq) == 0:
			flush(last)
		}
	}
}
