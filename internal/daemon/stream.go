package daemon

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/sandboxctl/sandboxctl/api"
	"github.com/sandboxctl/sandboxctl/sessions/toolapi"
)

// streamChunkBytes is the most output one frame carries. A reader holds at
// most one frame in the daemon: output waits in the session's bounded log,
// not in a per-client buffer.
const streamChunkBytes = 32 * 1024

// addStreamRoutes registers the session stream on mux (the exec stream is
// part of POST /v1/tools/exec).
func (s *Server) addStreamRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/sessions/{id}/stream", s.handleSessionStream)
	mux.HandleFunc("POST /v1/sessions/{id}/stdin", s.handleSessionStdin)
}

// maxStdinBody bounds one POST /v1/sessions/{id}/stdin body.
const maxStdinBody = 8 << 20

// handleSessionStdin writes the body, as it is (any bytes), to the stdin
// of a backgrounded session, and closes it with ?eof=1: the process tool's
// write without JSON, whose strings cannot carry bytes that are not UTF-8.
// Scope and answer as the process tool's write.
func (s *Server) handleSessionStdin(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	eof := false
	switch v := q.Get("eof"); v {
	case "", "0", "false":
	case "1", "true":
		eof = true
	default:
		writeError(w, http.StatusBadRequest, &toolapi.InputError{Field: "eof", Msg: fmt.Sprintf("eof %q: want 1 or 0", v)})
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxStdinBody))
	if err != nil {
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Errorf("stdin: a body of at most %d bytes: %w", maxStdinBody, err))
		return
	}
	agent := q.Get("agent")
	if pin, ok := PinFrom(r.Context()); ok {
		agent = pin.AgentID
	}
	res, err := s.opts.Tools.Process(r.Context(), api.ProcessParams{Action: "write", SessionID: r.PathValue("id"),
		Data: string(body), EOF: eof, AgentID: agent, SessionKey: q.Get("sessionKey")})
	if err == nil && res.Err() != nil {
		writeError(w, http.StatusNotFound, res.Err())
		return
	}
	s.writeResult(w, res, err)
}

// rawChunkBytes is the most output one raw frame carries.
const rawChunkBytes = 256 * 1024

// frameWriter writes the frames of a stream: NDJSON, or binary frames for
// a raw stream.
type frameWriter interface {
	writeFrame(f api.StreamFrame) error
}

// ndjson writes one frame a line and flushes it at once.
type ndjson struct {
	w   http.ResponseWriter
	f   http.Flusher
	enc *json.Encoder
}

func startNDJSON(ctx context.Context, w http.ResponseWriter) (*ndjson, error) {
	f, ok := w.(http.Flusher)
	if !ok {
		return nil, errors.New("streaming unsupported")
	}
	exemptFromWriteStall(ctx)
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	f.Flush()
	return &ndjson{w: w, f: f, enc: json.NewEncoder(w)}, nil
}

func (n *ndjson) write(v any) error {
	if err := n.enc.Encode(v); err != nil {
		return err
	}
	n.f.Flush()
	return nil
}

func (n *ndjson) writeFrame(f api.StreamFrame) error { return n.write(f) }

// rawFrames writes a raw stream (api.ContentTypeFrames): each frame
// is a kind byte, a big-endian uint32 payload length and the payload. Kind
// 'o' (stdout) and 'e' (stderr) carry the absolute offset of the output
// (big-endian int64) and then the command's exact bytes; kind 'j' carries
// one JSON StreamFrame (start, dropped, status, exit, result, error).
type rawFrames struct {
	w http.ResponseWriter
	f http.Flusher
}

func startRawFrames(ctx context.Context, w http.ResponseWriter) (*rawFrames, error) {
	f, ok := w.(http.Flusher)
	if !ok {
		return nil, errors.New("streaming unsupported")
	}
	exemptFromWriteStall(ctx)
	w.Header().Set("Content-Type", api.ContentTypeFrames)
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	f.Flush()
	return &rawFrames{w: w, f: f}, nil
}

func (r *rawFrames) writeFrame(f api.StreamFrame) error {
	var (
		hdr  [13]byte
		head []byte
		body []byte
	)
	switch {
	case (f.Type == api.FrameStdout || f.Type == api.FrameStderr) && f.Offset != nil:
		hdr[0] = api.FrameKindStdout
		if f.Type == api.FrameStderr {
			hdr[0] = api.FrameKindStderr
		}
		binary.BigEndian.PutUint32(hdr[1:5], uint32(8+len(f.Bytes)))
		binary.BigEndian.PutUint64(hdr[5:13], uint64(*f.Offset))
		head, body = hdr[:13], f.Bytes
	default:
		js, err := json.Marshal(f)
		if err != nil {
			return err
		}
		hdr[0] = api.FrameKindJSON
		binary.BigEndian.PutUint32(hdr[1:5], uint32(len(js)))
		head, body = hdr[:5], js
	}
	if _, err := r.w.Write(head); err != nil {
		return err
	}
	if _, err := r.w.Write(body); err != nil {
		return err
	}
	r.f.Flush()
	return nil
}

// startFrames starts the answer of a stream: raw frames or NDJSON.
func startFrames(ctx context.Context, w http.ResponseWriter, raw bool) (frameWriter, error) {
	if raw {
		return startRawFrames(ctx, w)
	}
	return startNDJSON(ctx, w)
}

// chunkBytes is the most output one frame of the stream carries.
func chunkBytes(raw bool) int {
	if raw {
		return rawChunkBytes
	}
	return streamChunkBytes
}

// untilStopping is ctx, also cancelled when the daemon shuts down.
func (s *Server) untilStopping(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-ctx.Done():
		case <-s.stopping:
			cancel()
		}
	}()
	return ctx, cancel
}

// follow writes f's frames from offset from until the exit frame (done),
// ctx's end or a failed write. It returns the next offset and whether the
// exit frame was written.
func follow(ctx context.Context, out frameWriter, f toolapi.Follower, from int64, raw bool) (next int64, exited bool, err error) {
	for {
		fr, nx, done, err := f.Next(ctx, from, chunkBytes(raw))
		if err != nil {
			return from, false, err
		}
		if err := out.writeFrame(fr); err != nil {
			return from, false, err
		}
		from = nx
		if done {
			return from, true, nil
		}
	}
}

// serveExecStream answers a streamed exec: frames of the session while the
// exec tool waits its yield window, then the tool's result, exactly what the
// call without "stream" answers. Bad input and refusals that start nothing
// get the same answers as without "stream" (an error status, or a result
// frame alone).
func (s *Server) serveExecStream(w http.ResponseWriter, r *http.Request, p api.ExecParams) {
	raw := p.Raw
	st := s.opts.Streams
	if st == nil {
		writeError(w, http.StatusNotImplemented, errors.New("streamed exec is not available in this daemon"))
		return
	}
	ctx, cancel := s.untilStopping(r.Context())
	defer cancel()
	started := make(chan toolapi.Follower, 1)
	execDone := make(chan struct{})
	var (
		res     api.Result
		execErr error
	)
	go func() {
		defer close(execDone)
		defer recoverInto(&execErr, "the streamed exec", s.opts.Logf)
		res, execErr = st.ExecStream(ctx, p, func(f toolapi.Follower) { started <- f })
	}()
	var f toolapi.Follower
	select {
	case f = <-started:
	case <-execDone:
		select {
		case f = <-started:
		default:
		}
	}
	if f != nil {
		defer f.Close()
	}
	if f == nil {
		if execErr != nil {
			s.writeResult(w, api.Result{}, execErr) // as without "stream": the field too
			return
		}
	}
	out, err := startFrames(r.Context(), w, raw)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err)
		return
	}
	if f != nil {
		if err := out.writeFrame(f.Start()); err != nil {
			return
		}
		// Follow while the tool waits; when it answers, write what output
		// is there already, then the answer.
		followCtx, stopFollow := context.WithCancel(ctx)
		go func() {
			select {
			case <-execDone:
			case <-followCtx.Done():
			}
			stopFollow()
		}()
		off, exited, err := follow(followCtx, out, f, 0, raw)
		stopFollow()
		if err != nil && followCtx.Err() == nil {
			return // the client went away
		}
		select {
		case <-execDone:
		case <-ctx.Done():
			return
		}
		if !exited {
			drained, dcancel := context.WithCancel(ctx)
			dcancel()
			if _, _, err := follow(drained, out, f, off, raw); err != nil && !errors.Is(err, context.Canceled) {
				return
			}
		}
	}
	<-execDone
	if execErr != nil {
		_ = out.writeFrame(api.StreamFrame{Type: api.FrameError, Error: execErr.Error()})
		return
	}
	_ = out.writeFrame(api.StreamFrame{Type: api.FrameResult, Result: &res})
}

// handleSessionStream follows a backgrounded session from ?from=OFFSET
// (default 0) to its end, in the scope ?agent=ID&sessionKey=KEY like the
// process tool; a pinned client's agent is its pin. ?raw=1 follows a
// session started with "raw": binary frames of its exact bytes, and the
// command waits for this reader rather than lose output.
func (s *Server) handleSessionStream(w http.ResponseWriter, r *http.Request) {
	st := s.opts.Streams
	if st == nil {
		writeError(w, http.StatusNotImplemented, errors.New("session streams are not available in this daemon"))
		return
	}
	q := r.URL.Query()
	var from int64
	if v := q.Get("from"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			writeError(w, http.StatusBadRequest, fmt.Errorf("from %q: want a byte offset, a whole number from 0", v))
			return
		}
		from = n
	}
	agent := q.Get("agent")
	if pin, ok := PinFrom(r.Context()); ok {
		agent = pin.AgentID
	}
	raw := false
	switch v := q.Get("raw"); v {
	case "", "0", "false":
	case "1", "true":
		raw = true
	default:
		writeError(w, http.StatusBadRequest, fmt.Errorf("raw %q: want 1 or 0", v))
		return
	}
	follower := st.Follow
	if raw {
		follower = st.FollowRaw
	}
	f, err := follower(agent, q.Get("sessionKey"), r.PathValue("id"))
	if err != nil {
		code := s.statusFor(err)
		if errors.Is(err, api.ErrNoSession) {
			code = http.StatusNotFound
		}
		writeError(w, code, err)
		return
	}
	defer f.Close()
	ctx, cancel := s.untilStopping(r.Context())
	defer cancel()
	out, err := startFrames(r.Context(), w, raw)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err)
		return
	}
	if err := out.writeFrame(f.Start()); err != nil {
		return
	}
	_, _, _ = follow(ctx, out, f, from, raw)
}
