package daemon

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime/debug"
)

// recoverPanics answers a request whose handler panicked with 500 and logs
// the panic with its stack, instead of net/http's dropped connection; no
// request ends the daemon or leaves its client without an answer. When the
// handler had already started its answer (a stream), the connection is
// aborted: a 500 can no longer be sent, and a truncated body must not look
// complete. http.ErrAbortHandler passes through (net/http aborts quietly).
func (s *Server) recoverPanics(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rw := &startedWriter{ResponseWriter: w}
		defer func() {
			v := recover()
			if v == nil {
				return
			}
			if err, ok := v.(error); ok && errors.Is(err, http.ErrAbortHandler) {
				panic(v)
			}
			s.opts.Logf("panic serving %s %s (recovered): %v\n%s", r.Method, r.URL.Path, v, debug.Stack())
			if rw.started || rw.hijacked {
				panic(http.ErrAbortHandler)
			}
			writeError(w, http.StatusInternalServerError, fmt.Errorf("internal error serving %s %s; the daemon logged it", r.Method, r.URL.Path))
		}()
		next.ServeHTTP(rw, r)
	})
}

// startedWriter records whether the answer has begun. It keeps flushing
// and hijacking reachable (streams, WebSockets): directly, and through
// Unwrap for http.ResponseController.
type startedWriter struct {
	http.ResponseWriter
	started, hijacked bool
}

func (w *startedWriter) WriteHeader(code int) {
	if code >= 200 || code == http.StatusSwitchingProtocols {
		w.started = true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *startedWriter) Write(b []byte) (int, error) {
	w.started = true
	return w.ResponseWriter.Write(b)
}

// ReadFrom keeps io.Copy's sendfile path of the underlying writer.
func (w *startedWriter) ReadFrom(r io.Reader) (int64, error) {
	w.started = true
	return io.Copy(w.ResponseWriter, r)
}

func (w *startedWriter) Flush() {
	w.started = true
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

func (w *startedWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	w.hijacked = true
	return http.NewResponseController(w.ResponseWriter).Hijack()
}

func (w *startedWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// recoverInto, deferred first thing on a goroutine a handler starts for
// its work (where recoverPanics cannot reach), turns a panic there into
// that work's error, logged with its stack.
func recoverInto(errp *error, what string, logf func(string, ...any)) {
	if v := recover(); v != nil {
		if logf != nil {
			logf("panic in %s (recovered): %v\n%s", what, v, debug.Stack())
		}
		*errp = fmt.Errorf("internal error in %s; the daemon logged it", what)
	}
}
