package egress

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// peekedConn is a client connection whose first bytes were read by the
// gateway to decide on it; Read returns them again before the rest. The
// bytes are in pre (a replayed prefix) or br (a reader over Conn), never
// both.
type peekedConn struct {
	net.Conn
	pre *bytes.Reader
	br  *bufio.Reader
}

func (c *peekedConn) Read(p []byte) (int, error) {
	switch {
	case c.pre != nil && c.pre.Len() > 0:
		return c.pre.Read(p)
	case c.br != nil:
		return c.br.Read(p)
	}
	return c.Conn.Read(p)
}

// CloseWrite half-closes the underlying TCP connection.
func (c *peekedConn) CloseWrite() error { return closeWrite(c.Conn) }

func newPeeked(c net.Conn, r *bufio.Reader) *peekedConn {
	return &peekedConn{Conn: c, br: r}
}

// replay returns c with prefix to be read again first.
func replay(c net.Conn, prefix []byte) *peekedConn {
	return &peekedConn{Conn: c, pre: bytes.NewReader(prefix)}
}

// unwrap returns the connection under c's peeked layers and the bytes
// those layers still hold, in the order Read would return them; what
// follows comes from raw. Copying from raw lets the kernel splice.
func unwrap(c net.Conn) (raw net.Conn, pending []byte) {
	p, ok := c.(*peekedConn)
	if !ok {
		return c, nil
	}
	switch {
	case p.pre != nil:
		pending = make([]byte, p.pre.Len())
		_, _ = p.pre.Read(pending)
	case p.br != nil:
		pending, _ = p.br.Peek(p.br.Buffered())
		pending = bytes.Clone(pending)
	}
	raw, inner := unwrap(p.Conn)
	return raw, append(pending, inner...)
}

// recordingConn records what is read through it and refuses every write:
// crypto/tls reads the ClientHello through it and can answer nothing.
type recordingConn struct {
	net.Conn
	buf bytes.Buffer
}

func (c *recordingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.buf.Write(p[:n])
	return n, err
}

func (c *recordingConn) Write([]byte) (int, error) { return 0, errHelloOnly }

var errHelloOnly = errors.New("egress: reading the ClientHello only")

// peekClientHello reads the TLS ClientHello from c with crypto/tls (no
// hand-written parser) and returns its server name and the bytes read,
// which must be replayed to whoever serves the connection. ok is false when
// c does not start with a ClientHello.
func peekClientHello(ctx context.Context, c net.Conn) (sni string, read []byte, ok bool) {
	rec := &recordingConn{Conn: c}
	seen := false
	srv := tls.Server(rec, &tls.Config{
		GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
			sni, seen = h.ServerName, true
			return nil, errHelloOnly
		},
	})
	_ = srv.HandshakeContext(ctx)
	return sni, rec.buf.Bytes(), seen
}

// countingConn counts the bytes read from and written to a client.
type countingConn struct {
	net.Conn
	read, written atomic.Int64
}

func (c *countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.read.Add(int64(n))
	return n, err
}

func (c *countingConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.written.Add(int64(n))
	return n, err
}

func (c *countingConn) CloseWrite() error { return closeWrite(c.Conn) }

func closeWrite(c net.Conn) error {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Close()
}

var copyBufs = sync.Pool{New: func() any { b := make([]byte, 256<<10); return &b }}

// copyConn copies src to dst: io.Copy, which splices between two TCP
// connections, else through a pooled buffer.
func copyConn(dst, src net.Conn) (int64, error) {
	if _, ok := dst.(*net.TCPConn); ok {
		if _, ok := src.(*net.TCPConn); ok {
			return io.Copy(dst, src)
		}
	}
	buf := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(buf)
	return io.CopyBuffer(dst, src, *buf)
}

// splice copies both ways between a client and an upstream until both
// directions end, then closes both; it returns the bytes each way. The
// bytes the gateway peeked go first; the rest is copied between the raw
// TCP connections (the kernel's splice, no copy through user space).
func splice(client, upstream net.Conn) (out, in int64) {
	client, pending := unwrap(client)
	done := make(chan struct{})
	go func() {
		defer close(done)
		n, err := upstream.Write(pending)
		out = int64(n)
		if err == nil {
			m, _ := copyConn(upstream, client)
			out += m
		}
		_ = closeWrite(upstream)
	}()
	in, _ = copyConn(client, upstream)
	_ = closeWrite(client)
	// The upstream ended: the client gets a while to finish its side.
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = client.Close()
		<-done
	}
	_ = client.Close()
	_ = upstream.Close()
	return out, in
}

// oneConnListener hands accepted connections to an http.Server.
type chanListener struct {
	addr   net.Addr
	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
}

func newChanListener(addr net.Addr) *chanListener {
	return &chanListener{addr: addr, conns: make(chan net.Conn), closed: make(chan struct{})}
}

func (l *chanListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *chanListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

func (l *chanListener) Addr() net.Addr { return l.addr }

// put hands c to the server; false when the listener is closed.
func (l *chanListener) put(c net.Conn) bool {
	select {
	case l.conns <- c:
		return true
	case <-l.closed:
		return false
	}
}
