package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"

	"golang.org/x/sys/unix"
)

// Peer is the process at the other end of a unix socket connection as the
// kernel recorded it when the connection was made (SO_PEERCRED): a pid and
// uid the client cannot choose.
type Peer struct {
	PID int
	UID int

	conn *net.UnixConn // for a pidfd of the peer (see pidfd)
}

type peerKey struct{}

// withPeer is the http.Server ConnContext of the unix listener: it reads
// the connection's peer credentials once and keeps them in the context of
// every request on the connection. A connection whose credentials cannot
// be read gets none, and every check that needs them refuses it.
func withPeer(ctx context.Context, c net.Conn) context.Context {
	uc, ok := unwrapConn(c).(*net.UnixConn)
	if !ok {
		return ctx
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return ctx
	}
	var (
		cred *unix.Ucred
		cerr error
	)
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil || cerr != nil || cred == nil {
		return ctx
	}
	return context.WithValue(ctx, peerKey{}, Peer{PID: int(cred.Pid), UID: int(cred.Uid), conn: uc})
}

// pidfd returns a pidfd of the process that made the connection
// (SO_PEERPIDFD, Linux 6.5+): unlike the pid, it cannot come to name
// another process. The caller closes it. errors.Is(err,
// errors.ErrUnsupported) on kernels without it.
func (p Peer) pidfd() (int, error) {
	if p.conn == nil {
		return -1, errors.New("no connection")
	}
	raw, err := p.conn.SyscallConn()
	if err != nil {
		return -1, err
	}
	fd, gerr := -1, error(nil)
	if err := raw.Control(func(s uintptr) {
		fd, gerr = unix.GetsockoptInt(int(s), unix.SOL_SOCKET, unix.SO_PEERPIDFD)
	}); err != nil {
		return -1, err
	}
	if errors.Is(gerr, unix.ENOPROTOOPT) {
		return -1, fmt.Errorf("SO_PEERPIDFD: %w", errors.ErrUnsupported)
	}
	if gerr != nil {
		return -1, fmt.Errorf("SO_PEERPIDFD: %w", gerr)
	}
	return fd, nil
}

// PeerFrom returns the peer of a request that came in on the unix socket.
func PeerFrom(ctx context.Context) (Peer, bool) {
	p, ok := ctx.Value(peerKey{}).(Peer)
	return p, ok
}
