package apiclient

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"syscall"
)

// errNoDaemon marks a dial that found no daemon listening: no socket file,
// or a stale one nobody accepts on.
var errNoDaemon = errors.New("no daemon is listening")

// Connect returns a client for the daemon of opts.StateDir that starts one
// (StartDetached) when a request finds none listening, and then sends the
// request again; a request that reached a daemon is never repeated. It
// opens a connection per request and keeps none, with no goroutines of its
// own: what a CLI process that makes a call or two wants (no health check
// first, no pool).
func Connect(opts StartOptions) *Client {
	return &Client{
		hc:        &http.Client{Transport: oneShotTransport{path: SocketPath(opts.StateDir)}},
		base:      "http://sandboxctl",
		autoStart: &opts,
	}
}

// oneShotTransport is an http.RoundTripper over a fresh unix socket
// connection per request, closed with the response body. Requests are
// written and responses parsed by net/http (Request.Write,
// http.ReadResponse).
type oneShotTransport struct{ path string }

func (t oneShotTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	closeBody := func() {
		if req.Body != nil {
			_ = req.Body.Close()
		}
	}
	var d net.Dialer
	conn, err := d.DialContext(req.Context(), "unix", t.path)
	if err != nil {
		closeBody()
		if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED) {
			return nil, errors.Join(errNoDaemon, err)
		}
		return nil, err
	}
	// Cancelling the request breaks the connection, which ends a blocked
	// write or read.
	stop := context.AfterFunc(req.Context(), func() { _ = conn.Close() })
	fail := func(err error) (*http.Response, error) {
		stop()
		_ = conn.Close()
		if ctxErr := req.Context().Err(); ctxErr != nil {
			return nil, ctxErr
		}
		return nil, err
	}
	if err := req.Write(conn); err != nil {
		closeBody()
		return fail(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil {
		return fail(err)
	}
	resp.Body = &connBody{ReadCloser: resp.Body, conn: conn, stop: stop}
	return resp, nil
}

// connBody closes the connection with the response body.
type connBody struct {
	io.ReadCloser
	conn net.Conn
	stop func() bool
	once sync.Once
}

func (b *connBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(func() {
		b.stop()
		_ = b.conn.Close()
	})
	return err
}
