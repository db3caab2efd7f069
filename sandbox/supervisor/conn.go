package supervisor

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// SocketName is the file name of the supervisor's local socket in its state
// directory (/run/sandboxctl/supervisor.sock in a sandbox).
const SocketName = "supervisor.sock"

// StateDirs are the in-container directories the supervisor keeps its state
// and socket in, first writable wins: a tmpfs at /run, else /tmp, else
// /dev/shm.
func StateDirs() []string {
	return []string{"/run/sandboxctl", "/tmp/.sandboxctl", "/dev/shm/.sandboxctl"}
}

// socketWriteTimeout bounds one write to a socket client: a client that
// stops reading for this long loses its connection (and reconnects), so it
// cannot stall the output of every command.
const socketWriteTimeout = 10 * time.Second

// serverConn is one way frames reach the server: the attach stream
// (container stdin/stdout, shared by every attached client) or one
// accepted socket connection. Only the writer goroutine writes to it.
type serverConn struct {
	name string
	r    *bufio.Reader
	w    *bufio.Writer
	out  io.Writer
	sock sockConn // nil for the attach stream

	failed    bool // a write failed; later writes are dropped
	closeOnce sync.Once
}

// sockConn is an accepted socket connection as the server uses it.
type sockConn interface {
	io.Closer
	SetWriteDeadline(t time.Time) error
}

func newServerConn(name string, r io.Reader, w io.Writer, sock sockConn) *serverConn {
	return &serverConn{name: name, r: bufio.NewReaderSize(r, 64<<10), w: bufio.NewWriterSize(w, 128<<10), out: w, sock: sock}
}

func (c *serverConn) write(b []byte, logf func(string, ...any)) {
	if c.failed {
		return
	}
	if c.sock != nil {
		_ = c.sock.SetWriteDeadline(time.Now().Add(socketWriteTimeout))
	}
	if _, err := c.w.Write(b); err != nil {
		c.fail(err, logf)
	}
}

func (c *serverConn) flush(logf func(string, ...any)) {
	if c.failed {
		return
	}
	if err := c.w.Flush(); err != nil {
		c.fail(err, logf)
	}
}

// fail drops a connection whose write failed. The attach stream is logged
// and kept (the Engine may take writes again); a socket is closed, which
// ends its read loop.
func (c *serverConn) fail(err error, logf func(string, ...any)) {
	logf("supervisor: write to %s: %v", c.name, err)
	if c.sock != nil {
		c.failed = true
		c.close()
		return
	}
	c.w.Reset(c.out) // drop what is buffered; the next frames start clean
}

func (c *serverConn) close() {
	if c.sock != nil {
		c.closeOnce.Do(func() { _ = c.sock.Close() })
	}
}

// unixListener is a listening unix socket served through the runtime's
// poller by way of os.File. The supervisor does not import package net:
// with cgo on (the Go default) net links the C resolver, and the
// supervisor must be a static binary under a plain `go build`.
type unixListener struct {
	f      *os.File
	path   string
	closed atomic.Bool
}

// errListenerClosed is returned by Accept after Close.
var errListenerClosed = errors.New("listener closed")

// listenUnix listens on a unix socket at path, replacing a stale socket
// file, readable and writable by the owner only.
func listenUnix(path string) (*unixListener, error) {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("remove stale %s: %w", path, err)
	}
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("socket: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: path}); err != nil {
		_ = unix.Close(fd)
		return nil, fmt.Errorf("bind %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		_ = unix.Close(fd)
		return nil, fmt.Errorf("chmod %s: %w", path, err)
	}
	if err := unix.Listen(fd, unix.SOMAXCONN); err != nil {
		_ = unix.Close(fd)
		return nil, fmt.Errorf("listen %s: %w", path, err)
	}
	return &unixListener{f: os.NewFile(uintptr(fd), path), path: path}, nil
}

// Accept waits for the next client. The connection is non-blocking, so its
// reads, writes and deadlines go through the runtime's poller.
func (l *unixListener) Accept() (*os.File, error) {
	rc, err := l.f.SyscallConn()
	if err != nil {
		return nil, l.closedOr(err)
	}
	var nfd int
	var aerr error
	err = rc.Read(func(fd uintptr) bool {
		nfd, _, aerr = unix.Accept4(int(fd), unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
		return aerr != unix.EAGAIN
	})
	if err != nil {
		return nil, l.closedOr(err)
	}
	if aerr != nil {
		return nil, l.closedOr(fmt.Errorf("accept: %w", aerr))
	}
	return os.NewFile(uintptr(nfd), l.path+" client"), nil
}

func (l *unixListener) closedOr(err error) error {
	if l.closed.Load() {
		return errListenerClosed
	}
	return err
}

// Close stops accepting; a blocked Accept returns errListenerClosed.
func (l *unixListener) Close() error {
	l.closed.Store(true)
	return l.f.Close()
}

// acceptLoop serves socket clients until the listener is closed.
func (s *Server) acceptLoop(l *unixListener) {
	n := 0
	for {
		nc, err := l.Accept()
		if err != nil {
			if errors.Is(err, errListenerClosed) {
				return
			}
			s.logf("supervisor: accept: %v", err)
			select {
			case <-s.stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			continue
		}
		if err := s.checkPeer(nc); err != nil {
			s.logf("supervisor: socket client refused: %v", err)
			_ = nc.Close()
			continue
		}
		n++
		c := newServerConn(fmt.Sprintf("socket client %d", n), nc, nc, nc)
		s.sockMu.Lock()
		if s.socks == nil {
			s.socks = map[*serverConn]bool{}
		}
		s.socks[c] = true
		s.sockMu.Unlock()
		go s.serveConn(c)
	}
}

// closeSockets stops accepting and closes every socket connection (Serve
// has ended: nothing would answer them).
func (s *Server) closeSockets() {
	_ = s.listener.Close()
	s.sockMu.Lock()
	defer s.sockMu.Unlock()
	for c := range s.socks {
		c.close()
	}
}

// checkPeer applies AcceptPeer to the credentials of a socket client.
func (s *Server) checkPeer(nc syscall.Conn) error {
	if s.acceptPeer == nil {
		return nil
	}
	cred, err := PeerCred(nc)
	if err != nil {
		return err
	}
	return s.acceptPeer(cred)
}

// PeerCred returns the credentials of the other end of a unix socket
// connection as the kernel reports them (SO_PEERCRED): its pid as seen from
// this process's pid namespace, 0 when the peer is outside it. nc is a
// connected unix socket: a *net.UnixConn or an *os.File.
func PeerCred(nc syscall.Conn) (*unix.Ucred, error) {
	raw, err := nc.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("peer credentials: %w", err)
	}
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return nil, fmt.Errorf("peer credentials: %w", err)
	}
	if credErr != nil {
		return nil, fmt.Errorf("peer credentials: %w", credErr)
	}
	return cred, nil
}

// serveConn reads one socket client's frames until it hangs up. A bad frame
// ends the connection (a socket has one client: nothing to resynchronise
// with).
func (s *Server) serveConn(c *serverConn) {
	defer func() {
		c.close()
		s.connLost(c)
		s.sockMu.Lock()
		delete(s.socks, c)
		s.sockMu.Unlock()
	}()
	for {
		f, err := s.readFrame(c.r)
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, os.ErrClosed) {
				s.logf("supervisor: %s: %v", c.name, err)
			}
			return
		}
		s.handle(f, c)
	}
}

// OutsidePIDNamespace is an AcceptPeer for the in-container supervisor: it
// takes only clients whose pid the kernel cannot show in the container's
// pid namespace (reported as 0), that is sandboxctl on the host, never a
// process of the sandbox itself.
func OutsidePIDNamespace(cred *unix.Ucred) error {
	if cred.Pid != 0 {
		return fmt.Errorf("peer pid %d runs inside the sandbox", cred.Pid)
	}
	return nil
}
