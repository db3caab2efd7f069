package daemon

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// The callers an access-log line names (besides a socket peer's pid and
// uid): which credential a TCP request presented.
const (
	callerToolToken     = "tool-token"
	callerApproverToken = "approver-token"
	callerAgentPrefix   = "agent:" // an agent token, then its agent
	callerConsole       = "console"
	callerPreview       = "preview" // a preview's own token (Previews)
	callerNone          = "none"    // no credential accepted (yet)
)

// accessEntry is what the handlers learn about a request's caller; the
// access log writes it when the request ends.
type accessEntry struct {
	caller string
}

type accessKey struct{}

// noteCaller records, for the access log, who r's credential names.
func noteCaller(r *http.Request, caller string) {
	if e, ok := r.Context().Value(accessKey{}).(*accessEntry); ok {
		e.caller = caller
	}
}

// accessLog writes one line per request to the daemon's logger once it is
// answered: listener, method, path, status, bytes, duration and the
// caller (a socket peer's pid and uid; over TCP, the credential).
func (s *Server) accessLog(listener string, next http.Handler) http.Handler {
	log := s.opts.Logger
	if log == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		e := &accessEntry{caller: callerNone}
		if listener == "unix" {
			e.caller = "socket"
		}
		rec := &accessWriter{ResponseWriter: w}
		next.ServeHTTP(rec, r.WithContext(context.WithValue(r.Context(), accessKey{}, e)))
		status := rec.status
		if status == 0 {
			status = http.StatusOK
		}
		if rec.hijacked {
			status = http.StatusSwitchingProtocols
		}
		attrs := []slog.Attr{
			slog.String("listener", listener),
			slog.String("method", r.Method),
			slog.String("path", r.URL.Path),
			slog.Int("status", status),
			slog.Int64("bytes", rec.bytes),
			slog.Float64("duration_ms", float64(time.Since(start).Microseconds())/1000),
			slog.String("caller", e.caller),
		}
		if p, ok := PeerFrom(r.Context()); ok {
			attrs = append(attrs, slog.Int("peer_pid", p.PID), slog.Int("peer_uid", p.UID))
		} else if r.RemoteAddr != "" {
			attrs = append(attrs, slog.String("remote", r.RemoteAddr))
		}
		if pin, ok := PinFrom(r.Context()); ok {
			attrs = append(attrs, slog.String("agent", pin.AgentID))
		}
		log.LogAttrs(context.WithoutCancel(r.Context()), slog.LevelInfo, "request", attrs...)
	})
}

// accessWriter records the status and size of an answer. It keeps
// flushing and hijacking reachable (streams, WebSockets): directly, and
// through Unwrap for http.ResponseController.
type accessWriter struct {
	http.ResponseWriter
	status   int
	bytes    int64
	hijacked bool
}

func (w *accessWriter) WriteHeader(code int) {
	if w.status == 0 && (code >= 200 || code == http.StatusSwitchingProtocols) {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *accessWriter) Write(b []byte) (int, error) {
	n, err := w.ResponseWriter.Write(b)
	w.bytes += int64(n)
	return n, err
}

// ReadFrom keeps io.Copy's sendfile path of the underlying writer.
func (w *accessWriter) ReadFrom(r io.Reader) (int64, error) {
	n, err := io.Copy(w.ResponseWriter, r)
	w.bytes += n
	return n, err
}

func (w *accessWriter) Flush() { _ = http.NewResponseController(w.ResponseWriter).Flush() }

func (w *accessWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	w.hijacked = true
	return http.NewResponseController(w.ResponseWriter).Hijack()
}

func (w *accessWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// agentCaller is the access log's caller of an agent token.
func agentCaller(agent string) string {
	return callerAgentPrefix + agent
}
