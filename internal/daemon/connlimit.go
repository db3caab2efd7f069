package daemon

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of the connection bounds (Options.MaxConns, Options.WriteStall).
const (
	DefaultMaxConns   = 512
	DefaultWriteStall = 30 * time.Second
)

// boundedListener bounds what clients can make the daemon hold: at most
// max connections are open at once (Accept waits for one to close, the
// others wait in the kernel's backlog), and every write on a connection
// must finish within stall, so a client that never reads its answers is
// dropped instead of pinning a handler and its buffers. Without it 2,000
// connections that never read raised the daemon's memory by ~200 MiB.
type boundedListener struct {
	net.Listener
	slots chan struct{}
	stall time.Duration
	done  chan struct{}
	once  sync.Once
}

func newBoundedListener(ln net.Listener, maxConns int, stall time.Duration) *boundedListener {
	if maxConns <= 0 {
		maxConns = DefaultMaxConns
	}
	if stall <= 0 {
		stall = DefaultWriteStall
	}
	return &boundedListener{Listener: ln, slots: make(chan struct{}, maxConns), stall: stall, done: make(chan struct{})}
}

func (l *boundedListener) Accept() (net.Conn, error) {
	select {
	case l.slots <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	bc := &boundedConn{Conn: c, release: func() { <-l.slots }}
	bc.stall.Store(int64(l.stall))
	return bc, nil
}

func (l *boundedListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// boundedConn is a connection of a boundedListener: each Write has the
// listener's stall as its deadline (until exemptFromWriteStall), and Close
// frees its slot.
type boundedConn struct {
	net.Conn
	stall   atomic.Int64 // a time.Duration; 0: no deadline
	once    sync.Once
	release func()
}

func (c *boundedConn) Write(p []byte) (int, error) {
	if d := time.Duration(c.stall.Load()); d > 0 {
		if err := c.Conn.SetWriteDeadline(time.Now().Add(d)); err != nil {
			return 0, err
		}
	}
	return c.Conn.Write(p)
}

type boundedConnKey struct{}

// withBoundedConn is (part of) an http.Server's ConnContext: it keeps the
// request's boundedConn in its context for exemptFromWriteStall.
func withBoundedConn(ctx context.Context, c net.Conn) context.Context {
	for {
		if bc, ok := c.(*boundedConn); ok {
			return context.WithValue(ctx, boundedConnKey{}, bc)
		}
		w, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			return ctx
		}
		c = w.NetConn()
	}
}

// exemptFromWriteStall lifts the write deadline of the request's connection
// for the rest of its life. A stream (session output, events) is flow
// controlled: the daemon holds no more than a frame for a reader that
// pauses, and a paused reader must hold the command back, not be dropped
// (a pipe into a pager, a slow consumer of `sandboxctl exec`).
func exemptFromWriteStall(ctx context.Context) {
	if bc, ok := ctx.Value(boundedConnKey{}).(*boundedConn); ok {
		bc.stall.Store(0)
		_ = bc.Conn.SetWriteDeadline(time.Time{})
	}
}

func (c *boundedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// NetConn is the accepted connection itself (for its peer credentials).
func (c *boundedConn) NetConn() net.Conn { return c.Conn }

// unwrapConn returns the accepted connection under c's wrappers.
func unwrapConn(c net.Conn) net.Conn {
	for {
		w, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			return c
		}
		c = w.NetConn()
	}
}
