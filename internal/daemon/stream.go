package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/sandboxctl/sandboxctl/sessions/toolapi"
)

// streamChunkBytes is the most output one frame carries. A reader holds at
// most one frame in the daemon: output waits in the session's bounded log,
// not in a per-client buffer.
const streamChunkBytes = 32 * 1024

// execRequest is the body of POST /v1/tools/exec: the exec tool's input,
// "stream" to get NDJSON frames as things happen instead of one result,
// and "strictWorkdir" to refuse a workdir the tool would replace.
type execRequest struct {
	toolapi.ExecParams
	Stream bool `json:"stream,omitempty"`
	// StrictWorkdir, Cols and Rows: see toolapi.ExecParams.
	StrictWorkdir bool `json:"strictWorkdir,omitempty"`
	Cols          int  `json:"cols,omitempty"`
	Rows          int  `json:"rows,omitempty"`
}

// addStreamRoutes registers the session stream on mux (the exec stream is
// part of POST /v1/tools/exec).
func (s *Server) addStreamRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/sessions/{id}/stream", s.handleSessionStream)
}

// ndjson writes one frame a line and flushes it at once.
type ndjson struct {
	w   http.ResponseWriter
	f   http.Flusher
	enc *json.Encoder
}

func startNDJSON(w http.ResponseWriter) (*ndjson, error) {
	f, ok := w.(http.Flusher)
	if !ok {
		return nil, errors.New("streaming unsupported")
	}
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
func follow(ctx context.Context, out *ndjson, f toolapi.Follower, from int64) (next int64, exited bool, err error) {
	for {
		fr, nx, done, err := f.Next(ctx, from, streamChunkBytes)
		if err != nil {
			return from, false, err
		}
		if err := out.write(fr); err != nil {
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
func (s *Server) serveExecStream(w http.ResponseWriter, r *http.Request, p toolapi.ExecParams) {
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
		res     toolapi.Result
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
	if f == nil {
		if execErr != nil {
			writeError(w, s.statusFor(execErr), execErr)
			return
		}
	}
	out, err := startNDJSON(w)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err)
		return
	}
	if f != nil {
		if err := out.write(f.Start()); err != nil {
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
		off, exited, err := follow(followCtx, out, f, 0)
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
			if _, _, err := follow(drained, out, f, off); err != nil && !errors.Is(err, context.Canceled) {
				return
			}
		}
	}
	<-execDone
	if execErr != nil {
		_ = out.write(toolapi.StreamFrame{Type: toolapi.FrameError, Error: execErr.Error()})
		return
	}
	_ = out.write(toolapi.StreamFrame{Type: toolapi.FrameResult, Result: &res})
}

// handleSessionStream follows a backgrounded session from ?from=OFFSET
// (default 0) to its end, in the scope ?agent=ID&sessionKey=KEY like the
// process tool; a pinned client's agent is its pin.
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
	f, err := st.Follow(agent, q.Get("sessionKey"), r.PathValue("id"))
	if err != nil {
		code := s.statusFor(err)
		if errors.Is(err, toolapi.ErrNoSession) {
			code = http.StatusNotFound
		}
		writeError(w, code, err)
		return
	}
	ctx, cancel := s.untilStopping(r.Context())
	defer cancel()
	out, err := startNDJSON(w)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err)
		return
	}
	if err := out.write(f.Start()); err != nil {
		return
	}
	_, _, _ = follow(ctx, out, f, from)
}
