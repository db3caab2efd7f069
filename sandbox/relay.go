package sandbox

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"

	"github.com/sandboxctl/sandboxctl/sandbox/supervisor"
)

// MetaRelay marks, in a supervisor session's meta, a run of the relay
// tool (DialPort); such sessions belong to the connection that made them
// and are never adopted as commands.
const MetaRelay = "sandboxctl.relay"

// relayKillGrace is how long an ending relay gets after its stdin closed.
const relayKillGrace = time.Second

// ErrNoRelay classes a sandbox whose supervisor cannot relay a port (no
// supervisor, or one older than the relay tool).
var ErrNoRelay = fmt.Errorf("%w: the sandbox cannot relay a port", cerrdefs.ErrFailedPrecondition)

// ErrPortClosed classes a port nothing listens on in the sandbox.
var ErrPortClosed = fmt.Errorf("%w: nothing listens on the port in the sandbox", cerrdefs.ErrUnavailable)

// checkPort refuses a port number out of range.
func checkPort(port int) error {
	if port < 1 || port > 65535 {
		return fmt.Errorf("%w: port %d is out of range (1-65535)", cerrdefs.ErrInvalidArgument, port)
	}
	return nil
}

// DialPort connects to port on the loopback of scope s's existing
// sandbox: the supervisor runs its relay tool (supervisor.RelayArg) as a
// command of the sandbox, in the sandbox's own network namespace, and the
// connection's bytes travel as that command's stdin and stdout. No port is
// published on the Engine's host and the sandbox needs no network. The
// returned connection is made (the relay said so) before DialPort returns.
func (m *DockerEngine) DialPort(ctx context.Context, s Scope, port int) (net.Conn, error) {
	if err := checkPort(port); err != nil {
		return nil, err
	}
	res, err := m.ensureExisting(ctx, s)
	if err != nil {
		return nil, err
	}
	if m.sup == nil || !res.Supervised {
		return nil, fmt.Errorf("%w: sandbox %s runs without the supervisor", ErrNoRelay, res.Name)
	}
	c, err := m.supervisorClient(ctx, res.ID)
	if err != nil {
		return nil, fmt.Errorf("%w: sandbox %s: supervisor unreachable: %w", ErrNoRelay, res.Name, err)
	}
	if !c.Relay() {
		return nil, fmt.Errorf("%w: sandbox %s runs a supervisor without the relay tool (recreate the sandbox)", ErrNoRelay, res.Name)
	}
	p, err := c.Open(ctx, supervisor.OpenSpec{
		Argv:      []string{SupervisorPath, supervisor.RelayArg, strconv.Itoa(port)},
		Env:       []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + HomeDir},
		Dir:       "/",
		KeepStdin: true,
		Meta:      map[string]string{MetaRelay: strconv.Itoa(port)},
	})
	if err != nil {
		return nil, fmt.Errorf("port %d: start the relay: %w", port, err)
	}
	rc := &relayConn{p: p, c: c, port: port}
	stderr := bufio.NewReader(p.Stderr())
	line, err := stderr.ReadString('\n')
	if strings.TrimSpace(line) != supervisor.RelayConnected {
		// It ended without connecting: its message, then its exit code.
		rest, _ := io.ReadAll(io.LimitReader(stderr, 4096))
		msg := strings.TrimSpace(line + string(rest))
		code, _, werr := p.Wait(ctx)
		rc.end()
		switch {
		case werr != nil:
			return nil, fmt.Errorf("port %d: relay: %w", port, werr)
		case code == supervisor.RelayExitRefused:
			return nil, fmt.Errorf("%w: port %d: %s", ErrPortClosed, port, msg)
		case err != nil && msg == "":
			return nil, fmt.Errorf("port %d: relay: %w", port, err)
		}
		return nil, fmt.Errorf("port %d: relay exited %d: %s", port, code, msg)
	}
	go func() { _, _ = io.Copy(io.Discard, stderr) }()
	return rc, nil
}

// relayConn is a connection to a port in a sandbox over a relay's stdin
// and stdout.
type relayConn struct {
	p    *supervisor.Proc
	c    *supervisor.Client
	port int

	closeOnce sync.Once
}

func (r *relayConn) Read(b []byte) (int, error) { return r.p.Stdout().Read(b) }

func (r *relayConn) Write(b []byte) (int, error) { return r.p.Write(b) }

// CloseWrite half-closes: the relay shuts down the connection's write side.
func (r *relayConn) CloseWrite() error { return r.p.CloseStdin() }

// Close ends the relay and forgets its session.
func (r *relayConn) Close() error {
	r.end()
	return nil
}

func (r *relayConn) end() {
	r.closeOnce.Do(func() {
		_ = r.p.CloseStdin()
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), relayKillGrace+10*time.Second)
			defer cancel()
			select {
			case <-r.p.Done():
			case <-time.After(relayKillGrace):
				_ = r.p.KillGrace(ctx, relayKillGrace)
			}
			_ = r.c.Forget(ctx, r.p.ID())
		}()
	})
}

func (r *relayConn) LocalAddr() net.Addr  { return relayAddr("sandboxctl") }
func (r *relayConn) RemoteAddr() net.Addr { return relayAddr("sandbox:" + strconv.Itoa(r.port)) }

// Deadlines are not supported by the relay: callers bound the connection
// with their context and Close.
func (r *relayConn) SetDeadline(time.Time) error      { return errNoDeadline }
func (r *relayConn) SetReadDeadline(time.Time) error  { return errNoDeadline }
func (r *relayConn) SetWriteDeadline(time.Time) error { return errNoDeadline }

var errNoDeadline = errors.New("relay connection: deadlines are not supported")

type relayAddr string

func (relayAddr) Network() string  { return "sandbox-relay" }
func (a relayAddr) String() string { return string(a) }
