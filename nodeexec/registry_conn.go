package nodeexec

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime/debug"
	"strings"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"
)

// Handler is the daemon's WebSocket endpoint for nodes (ConnectPath). A
// request without the right bearer token gets 401 before any WebSocket
// exists; a plain-HTTP request from a non-loopback peer gets 403.
func (r *Registry) Handler() http.Handler { return http.HandlerFunc(r.serveHTTP) }

func (r *Registry) serveHTTP(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		http.Error(w, "the gateway is shutting down", http.StatusServiceUnavailable)
		return
	}
	r.handlers.Add(1)
	r.mu.Unlock()
	defer r.handlers.Done()
	if req.TLS == nil && !r.opts.AllowPlainRemote && !isLoopbackAddr(req.RemoteAddr) {
		r.logf("nodeexec: refused plain connection from %s: TLS required", req.RemoteAddr)
		http.Error(w, "TLS required", http.StatusForbidden)
		return
	}
	tok, ok := strings.CutPrefix(req.Header.Get("Authorization"), "Bearer ")
	if !ok || !TokenEqual(tok, r.opts.Token) {
		r.logf("nodeexec: refused node connection from %s: bad or missing token", req.RemoteAddr)
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	conn, err := websocket.Accept(w, req, &websocket.AcceptOptions{CompressionMode: websocket.CompressionDisabled})
	if err != nil {
		r.logf("nodeexec: accept %s: %v", req.RemoteAddr, err)
		return
	}
	conn.SetReadLimit(MaxFrameBytes)
	r.serveConn(conn, req.RemoteAddr)
}

func isLoopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// serveConn runs one authenticated node link until it ends.
func (r *Registry) serveConn(conn *websocket.Conn, remote string) {
	ctx, cancel := context.WithCancelCause(r.ctx)
	defer cancel(nil)
	hctx, hcancel := context.WithTimeout(ctx, r.opts.HelloTimeout)
	var hf frame
	err := wsjson.Read(hctx, conn, &hf)
	hcancel()
	if err == nil && (hf.Type != frameHello || hf.Hello == nil) {
		err = fmt.Errorf("first frame is %q, want hello", hf.Type)
	}
	if err == nil {
		err = hf.Hello.validate()
	}
	if err != nil {
		r.logf("nodeexec: node link from %s: bad hello: %v", remote, err)
		_ = conn.Close(websocket.StatusPolicyViolation, truncate("bad hello: "+err.Error(), 120))
		return
	}
	l := &gwLink{wsLink: wsLink{conn: conn, ctx: ctx, cancel: cancel}, reg: r, rpcs: map[string]chan *frame{}}
	resume, err := r.attach(l, *hf.Hello, remote)
	if err != nil {
		_ = l.send(&frame{Type: frameWelcome, Reason: err.Error()})
		_ = conn.Close(websocket.StatusPolicyViolation, truncate(err.Error(), 120))
		return
	}
	r.logf("nodeexec: node %s (%s) connected from %s", hf.Hello.Name, hf.Hello.NodeID, remote)
	if err := l.send(&frame{Type: frameWelcome, Resume: resume}); err != nil {
		r.detach(l, err)
		return
	}
	go l.pinger(r.opts.PingInterval)
	var cause error
	for {
		var f frame
		if err := wsjson.Read(ctx, conn, &f); err != nil {
			cause = err
			if c := context.Cause(ctx); c != nil {
				cause = c
			}
			break
		}
		if err := r.dispatchRecovered(l, &f); err != nil {
			cause = err
			break
		}
	}
	r.logf("nodeexec: link read ended: %v", cause)
	r.detach(l, linkError{cause})
}

// dispatchRecovered is dispatch; a panic in it is logged with its stack
// and drops the link (its runs fail or resume as after any lost link)
// instead of ending the gateway.
func (r *Registry) dispatchRecovered(l *gwLink, f *frame) (err error) {
	defer func() {
		if v := recover(); v != nil {
			r.logf("nodeexec: panic handling a %q frame (recovered; dropping the link): %v\n%s", f.Type, v, debug.Stack())
			err = fmt.Errorf("internal error handling a %q frame", f.Type)
		}
	}()
	r.dispatch(l, f)
	return nil
}

// linkError gives a link failure a short human-readable text; the wrapped
// error stays reachable with errors.Is/As.
type linkError struct{ err error }

func (e linkError) Unwrap() error { return e.err }

func (e linkError) Error() string {
	var pe pingError
	switch {
	case errors.As(e.err, &pe):
		return fmt.Sprintf("no answer to a ping within %s", pe.every)
	case errors.Is(e.err, io.EOF) || errors.Is(e.err, net.ErrClosed) || errors.Is(e.err, io.ErrUnexpectedEOF):
		return "the connection closed"
	case websocket.CloseStatus(e.err) != -1:
		return fmt.Sprintf("the node closed the link (%s)", websocket.CloseStatus(e.err))
	case errors.Is(e.err, context.Canceled):
		return "the gateway closed the link"
	}
	return e.err.Error()
}

// pingError is a ping that went unanswered.
type pingError struct {
	every time.Duration
	err   error
}

func (e pingError) Error() string {
	return fmt.Sprintf("ping unanswered within %s: %v", e.every, e.err)
}
func (e pingError) Unwrap() error { return e.err }

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

// attach makes l the node's link, re-binds the runs the node still holds,
// adopts those an earlier incarnation of this gateway started (when
// Adoptions is read), fails the runs it no longer has, and returns where
// each run it keeps resumes (the node ends the runs not listed: no session
// owns them).
func (r *Registry) attach(l *gwLink, h Hello, remote string) ([]Resume, error) {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil, ErrClosed
	}
	if err := r.enrols.admit(h, time.Now()); err != nil {
		r.mu.Unlock()
		r.logf("nodeexec: refused node %q (id %s) from %s: %v", h.Name, h.NodeID, remote, err)
		if r.opts.OnRefused != nil {
			r.opts.OnRefused(Refusal{NodeID: h.NodeID, Name: h.Name, Remote: remote, Err: err})
		}
		return nil, err
	}
	e := r.nodes[h.NodeID]
	if e == nil {
		e = &nodeEntry{changed: make(chan struct{})}
		r.nodes[h.NodeID] = e
	}
	old := e.link
	e.hello, e.link, e.remote = h, l, remote
	e.connectedAt, e.lastSeen, e.lastErr = time.Now(), time.Now(), ""
	l.node = e
	close(e.changed)
	e.changed = make(chan struct{})
	held := map[string]bool{}
	var resume []Resume
	for _, rs := range h.Running {
		held[rs.RunID] = true
		rp := r.runs[rs.RunID]
		switch {
		case rp != nil && rp.nodeID == h.NodeID && rp.relink(l):
			so, se := rp.received()
			resume = append(resume, Resume{RunID: rs.RunID, Stdout: so, Stderr: se})
		case rp == nil && r.adopted != nil && r.earlierRun(h.NodeID, rs):
			r.runs[rs.RunID] = newAdoptedProcess(r, e, rs, l)
			resume = append(resume, Resume{RunID: rs.RunID, Adopt: true})
			r.logf("nodeexec: node %s holds run %s of session %s, started by an earlier incarnation of this gateway; adopting it", h.Name, rs.RunID, rs.SessionID)
		default:
			r.logf("nodeexec: node %s reports run %s that no session owns; the node ends it", h.Name, rs.RunID)
		}
	}
	var lost []*RemoteProcess
	for _, rp := range r.runs {
		if rp.nodeID != h.NodeID || held[rp.runID] {
			continue
		}
		rp.mu.Lock()
		started := rp.started && !rp.finished
		rp.mu.Unlock()
		if started {
			lost = append(lost, rp)
		}
	}
	r.mu.Unlock()
	if old != nil {
		old.close(errors.New("replaced by a new link from the same node"))
	}
	for _, rp := range lost {
		rp.finish(-1, "", &LinkLostError{Node: h.Name, RunID: rp.runID,
			Detail: "the node came back without this run (it restarted, or killed it when its grace ended)"})
	}
	return resume, nil
}

// detach marks the node offline (if l is still its link) and starts the
// grace period of its runs.
func (r *Registry) detach(l *gwLink, cause error) {
	if cause == nil {
		cause = errors.New("link closed")
	}
	l.close(cause)
	r.mu.Lock()
	e := l.node
	var runs []*RemoteProcess
	if e != nil && e.link == l {
		e.link = nil
		e.lastSeen = time.Now()
		e.lastErr = cause.Error()
		close(e.changed)
		e.changed = make(chan struct{})
		for _, rp := range r.runs {
			if rp.nodeID == e.hello.NodeID {
				runs = append(runs, rp)
			}
		}
		r.logf("nodeexec: node %s disconnected: %v", e.hello.Name, cause)
	}
	r.mu.Unlock()
	for _, rp := range runs {
		rp.mu.Lock()
		mine := rp.link == l || rp.link == nil
		rp.mu.Unlock()
		if mine {
			rp.linkDown(cause, r.opts.LinkGrace)
		}
	}
}

// dispatch handles one frame from a node.
func (r *Registry) dispatch(l *gwLink, f *frame) {
	switch f.Type {
	case frameReply:
		l.mu.Lock()
		ch := l.rpcs[f.ReqID]
		delete(l.rpcs, f.ReqID)
		l.mu.Unlock()
		if ch != nil {
			ch <- f
		}
		return
	}
	rp := r.run(f.RunID)
	if rp == nil || rp.nodeID != l.nodeID() {
		if f.Type == frameOutput || f.Type == frameStarted {
			_ = l.send(&frame{Type: frameKill, RunID: f.RunID})
		}
		return
	}
	switch f.Type {
	case frameOutput:
		rp.output(f)
	case frameKept:
		if a := rp.adopt(f); a != nil {
			go func() {
				select {
				case r.adopted <- a:
				case <-r.ctx.Done():
				}
			}()
		}
	case frameExit:
		x := exitInfo{Code: -1, Error: "the node sent an empty exit"}
		if f.Exit != nil {
			x = *f.Exit
		}
		var err error
		if x.Error != "" {
			err = fmt.Errorf("node %s: %s", rp.nodeName, x.Error)
		}
		rp.finish(x.Code, x.Signal, err)
	case frameStarted:
		if f.Started != nil {
			rp.mu.Lock()
			rp.started = true
			rp.pid, rp.pty, rp.cwd = f.Started.PID, f.Started.PTY, f.Started.Cwd
			rp.warnings = append([]string(nil), f.Started.Warnings...)
			rp.stdinOpen = rp.params.KeepStdin || f.Started.PTY
			rp.mu.Unlock()
		}
		if f.Started != nil && f.Started.PTY && rp.stderr != nil {
			rp.stderr.close()
		}
		rp.answerWith(f)
	case frameDenied, framePending, frameError:
		rp.answerWith(f)
	}
}

// gwLink is the gateway's end of one node connection.
