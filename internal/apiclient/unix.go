package apiclient

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/textproto"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sandboxctl/sandboxctl/api"
)

// ErrNoDaemon marks a request that found no daemon listening (no socket
// file, or a stale one nobody accepts on); it was not delivered.
var ErrNoDaemon = errors.New("no daemon is listening")

// Connect returns a client for the daemon of opts.StateDir that starts one
// (StartDetached) when a request finds none listening, and then sends the
// request again; a request that reached a daemon is never repeated. No
// health check comes first: what a CLI process that makes a call or two
// wants.
func Connect(opts StartOptions) *Client {
	c := NewUnixClient(api.SocketPath(opts.StateDir))
	c.autoStart = &opts
	return c
}

// Unix is the Transport of the daemon's unix socket: a fresh connection per
// request, which the answer's body closes, and HTTP/1.0 on it, whose answer
// the daemon (net/http's server) delimits by closing the connection, never
// by chunks. Only the request line and headers are written here; the
// answer's header is read with net/textproto. It leaves net/http (and the
// TLS stack it links, ~3 ms of start-up per process) out of the light
// sandboxctl.
type Unix struct {
	Path string
}

// streamChunk is the size of one write of a streamed request body.
const streamChunk = 256 << 10

// writerOnly hides its Writer's ReadFrom, so that io.CopyBuffer uses the
// buffer it is given.
type writerOnly struct{ io.Writer }

// RoundTrip implements Transport.
func (u Unix) RoundTrip(ctx context.Context, req Request) (int, io.ReadCloser, error) {
	if err := checkRequestLine(req); err != nil {
		return 0, nil, err
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", u.Path)
	if err != nil {
		if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED) {
			return 0, nil, errors.Join(ErrNoDaemon, err)
		}
		return 0, nil, err
	}
	// Cancelling ctx breaks the connection, which ends a blocked write or
	// read (of a long answer, or of the event stream).
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	fail := func(err error) (int, io.ReadCloser, error) {
		stop()
		_ = conn.Close()
		return 0, nil, err
	}
	var sendErr error
	bw := bufio.NewWriter(conn)
	fmt.Fprintf(bw, "%s %s HTTP/1.0\r\nHost: sandboxctl\r\n", req.Method, req.Path)
	for k, v := range req.Header {
		fmt.Fprintf(bw, "%s: %s\r\n", k, v)
	}
	if req.Body != nil {
		fmt.Fprintf(bw, "Content-Length: %d\r\n", len(req.Body))
	} else if req.Stream != nil {
		fmt.Fprintf(bw, "Content-Length: %d\r\n", req.StreamLen)
	}
	bw.WriteString("\r\n")
	bw.Write(req.Body)
	if err := bw.Flush(); err != nil {
		return fail(fmt.Errorf("send request: %w", err))
	}
	if req.Stream != nil {
		// Straight to the socket in large writes: through bw, a file
		// upload went in 4 KiB writes and cost a syscall on each side
		// for every one of them.
		buf := make([]byte, streamChunk)
		n, err := io.CopyBuffer(writerOnly{conn}, io.LimitReader(req.Stream, req.StreamLen), buf)
		if err != nil || n != req.StreamLen {
			sendErr = fmt.Errorf("send request body (%d of %d bytes): %w", n, req.StreamLen, err)
			// The daemon may have answered before it read the body (a
			// 404 for a scope without a sandbox, a 413) and closed: that
			// answer, already in the socket's buffer, is the one to give.
			_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		}
	}
	tp := textproto.NewReader(bufio.NewReader(conn))
	status, err := readStatus(tp)
	if err != nil {
		if sendErr != nil {
			return fail(sendErr)
		}
		return fail(err)
	}
	if sendErr != nil && status/100 == 2 {
		return fail(sendErr) // a success for a body that did not go whole is not one
	}
	hdr, err := tp.ReadMIMEHeader()
	if err != nil {
		return fail(fmt.Errorf("read answer header: %w", err))
	}
	var body io.Reader = tp.R
	if cl := hdr.Get("Content-Length"); cl != "" {
		n, err := strconv.ParseInt(cl, 10, 64)
		if err != nil || n < 0 {
			return fail(fmt.Errorf("bad Content-Length %q in the answer", cl))
		}
		body = &exactReader{r: io.LimitReader(tp.R, n), left: n}
	}
	return status, &connBody{Reader: body, conn: conn, stop: stop}, nil
}

// checkRequestLine refuses a method, path or header that would not stay
// on its own line or field (no spaces in the request line, no control
// characters anywhere): callers build paths from user input such as ids.
func checkRequestLine(req Request) error {
	bad := func(s string, spaceOK bool) bool {
		for i := 0; i < len(s); i++ {
			if c := s[i]; c < 0x20 || c == 0x7f || (c == ' ' && !spaceOK) {
				return true
			}
		}
		return false
	}
	if req.Method == "" || bad(req.Method, false) || !strings.HasPrefix(req.Path, "/") || bad(req.Path, false) {
		return fmt.Errorf("invalid request %q %q", req.Method, req.Path)
	}
	for k, v := range req.Header {
		if k == "" || bad(k, false) || strings.Contains(k, ":") || bad(v, true) {
			return fmt.Errorf("invalid request header %q", k)
		}
	}
	return nil
}

// readStatus reads "HTTP/1.x NNN reason" and returns NNN.
func readStatus(tp *textproto.Reader) (int, error) {
	line, err := tp.ReadLine()
	if err != nil {
		return 0, fmt.Errorf("read answer: %w", err)
	}
	proto, rest, _ := strings.Cut(line, " ")
	code, _, _ := strings.Cut(rest, " ")
	n, err := strconv.Atoi(code)
	if !strings.HasPrefix(proto, "HTTP/1.") || err != nil || n < 100 || n > 999 {
		return 0, fmt.Errorf("not an HTTP answer: %q", line)
	}
	return n, nil
}

// exactReader reads a body of a known length and reports a connection that
// ends before it as io.ErrUnexpectedEOF, not as the body's end.
type exactReader struct {
	r    io.Reader
	left int64
}

func (e *exactReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	e.left -= int64(n)
	if err == io.EOF && e.left > 0 {
		err = io.ErrUnexpectedEOF
	}
	return n, err
}

// connBody is an answer's body; closing it closes the connection.
type connBody struct {
	io.Reader
	conn net.Conn
	stop func() bool
	once sync.Once
}

func (b *connBody) Close() error {
	b.once.Do(func() {
		b.stop()
		_ = b.conn.Close()
	})
	return nil
}
