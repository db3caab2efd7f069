package supervisor

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// startSocketServer is startServer with the local socket enabled.
func startSocketServer(t *testing.T, acceptPeer func(*unix.Ucred) error) (*engine, *Server) {
	t.Helper()
	// A short directory: unix socket paths are limited to 107 bytes.
	dir, err := os.MkdirTemp("", "sup")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	e, srv := startServerOpts(t, ServerOptions{Dirs: []string{dir}, Socket: SocketName, AcceptPeer: acceptPeer})
	if srv.SocketPath() != filepath.Join(dir, SocketName) {
		t.Fatalf("socket path %q, want %q", srv.SocketPath(), filepath.Join(dir, SocketName))
	}
	return e, srv
}

type testLocalConn struct{ net.Conn }

func (testLocalConn) Local() bool { return true }

func socketDialer(path string) Dialer {
	return func(ctx context.Context) (Conn, error) {
		var d net.Dialer
		c, err := d.DialContext(ctx, "unix", path)
		if err != nil {
			return nil, err
		}
		return testLocalConn{c}, nil
	}
}

func newSocketClient(t *testing.T, srv *Server) *Client {
	t.Helper()
	c, err := NewClient(ctxT(t), ClientOptions{Dial: socketDialer(srv.SocketPath()), Logf: t.Logf})
	if err != nil {
		t.Fatalf("NewClient over the socket: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func TestSocketCarriesCommands(t *testing.T) {
	_, srv := startSocketServer(t, nil)
	fi, err := os.Stat(srv.SocketPath())
	if err != nil || fi.Mode().Perm() != 0o600 || fi.Mode()&os.ModeSocket == 0 {
		t.Fatalf("socket file: %v %v", fi.Mode(), err)
	}
	c := newSocketClient(t, srv)
	if !c.Local() {
		t.Fatal("client over the socket does not report Local")
	}
	p := shell(t, c, `echo out; echo err >&2; exit 4`, nil)
	if out, errs, code, _ := collect(t, p); out != "out\n" || errs != "err\n" || code != 4 {
		t.Fatalf("got %q %q %d", out, errs, code)
	}
	// Bulk output goes raw (no DEFLATE) and arrives whole.
	big := shell(t, c, `dd if=/dev/zero bs=1000000 count=20 status=none`, nil)
	go func() { _, _ = io.Copy(io.Discard, big.Stderr()) }()
	n, _ := io.Copy(io.Discard, big.Stdout())
	if n != 20_000_000 {
		t.Fatalf("bulk output: %d bytes", n)
	}
	if srv.deflate.Load() {
		t.Fatal("a local client asked for compressed output")
	}
}

// The newest Hello wins across transports: a socket client supersedes an
// attach client and the other way round, and each sees its own commands'
// output only.
func TestSocketAndAttachTakeOver(t *testing.T) {
	e, srv := startSocketServer(t, nil)
	viaAttach := newTestClient(t, e)
	running := shell(t, viaAttach, `echo first; sleep 0.5; echo second`, nil)
	buf := make([]byte, 6)
	if _, err := io.ReadFull(running.Stdout(), buf); err != nil || string(buf) != "first\n" {
		t.Fatalf("first line: %q %v", buf, err)
	}

	viaSocket := newSocketClient(t, srv)
	waitFor(t, func() bool { return errors.Is(viaAttach.Err(), ErrSuperseded) }, "attach client superseded by the socket client")
	list, err := viaSocket.List(ctxT(t))
	if err != nil || len(list) != 1 || list[0].ID != running.ID() {
		t.Fatalf("list over the socket: %+v %v", list, err)
	}
	p, err := viaSocket.Attach(ctxT(t), list[0], list[0].Stdout, list[0].Stderr)
	if err != nil {
		t.Fatal(err)
	}
	if rest, _, code, _ := collect(t, p); rest != "second\n" || code != 0 {
		t.Fatalf("re-adopted over the socket: %q %d", rest, code)
	}

	// An attach client takes over again; the socket is told and closed.
	again := newTestClient(t, e)
	waitFor(t, func() bool { return errors.Is(viaSocket.Err(), ErrSuperseded) }, "socket client superseded")
	if out, _, _, _ := collect(t, shell(t, again, `echo back`, nil)); out != "back\n" {
		t.Fatalf("attach after takeover: %q", out)
	}
}

// A socket client that goes away leaves its commands running; the next
// client re-attaches them.
func TestSocketClientLossDetachesStreams(t *testing.T) {
	_, srv := startSocketServer(t, nil)
	c1 := newSocketClient(t, srv)
	p := shell(t, c1, `echo a; sleep 0.4; echo b`, nil)
	buf := make([]byte, 2)
	if _, err := io.ReadFull(p.Stdout(), buf); err != nil {
		t.Fatal(err)
	}
	_ = c1.Close()
	c2 := newSocketClient(t, srv)
	list, err := c2.List(ctxT(t))
	if err != nil || len(list) != 1 {
		t.Fatalf("list: %+v %v", list, err)
	}
	q, err := c2.Attach(ctxT(t), list[0], 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	if rest, _, code, _ := collect(t, q); rest != "b\n" || code != 0 {
		t.Fatalf("after the first client left: %q %d", rest, code)
	}
}

func TestSocketRefusedPeer(t *testing.T) {
	_, srv := startSocketServer(t, OutsidePIDNamespace)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := NewClient(ctx, ClientOptions{Dial: socketDialer(srv.SocketPath()), HelloTimeout: 2 * time.Second})
	if err == nil {
		t.Fatal("a peer in the server's own pid namespace was accepted")
	}
}

func TestOutsidePIDNamespace(t *testing.T) {
	for _, tc := range []struct {
		pid     int32
		wantErr string
	}{
		{0, ""},
		{1, "inside the sandbox"},
		{4242, "inside the sandbox"},
	} {
		err := OutsidePIDNamespace(&unix.Ucred{Pid: tc.pid})
		if (err == nil) != (tc.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("pid %d: %v, want %q", tc.pid, err, tc.wantErr)
		}
	}
}

func TestPeerCredSeesOwnPID(t *testing.T) {
	_, srv := startSocketServer(t, func(cred *unix.Ucred) error {
		if int(cred.Pid) != os.Getpid() || int(cred.Uid) != os.Getuid() {
			return errors.New("wrong credentials")
		}
		return nil
	})
	c := newSocketClient(t, srv)
	if err := c.Ping(ctxT(t)); err != nil {
		t.Fatal(err)
	}
}

// rawHello connects to the socket and completes a Hello as client nonce.
func rawHello(t *testing.T, srv *Server, nonce string) (net.Conn, *bufio.Reader) {
	t.Helper()
	conn, err := net.Dial("unix", srv.SocketPath())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	hello, _ := json.Marshal(Hello{Version: ProtocolVersion, Client: nonce})
	if _, err := conn.Write(AppendFrame(nil, FrameHello, 0, hello)); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	f, err := ReadFrame(br)
	if err != nil || f.Type != FrameHelloAck {
		t.Fatalf("hello ack: %+v %v", f, err)
	}
	return conn, br
}

// A client that has been superseded cannot start anything: its frames are
// ignored, and it is told who took over and then closed.
func TestSupersededConnectionCannotOpen(t *testing.T) {
	_, srv := startSocketServer(t, nil)
	old, oldR := rawHello(t, srv, "old")
	newer := newSocketClient(t, srv)
	// The old connection sees the newer client's ack, then its end.
	f, err := ReadFrame(oldR)
	var ack HelloAck
	if err != nil || f.Type != FrameHelloAck || json.Unmarshal(f.Payload, &ack) != nil || ack.Client == "old" {
		t.Fatalf("superseded connection got %+v %v", f, err)
	}
	spec, _ := json.Marshal(OpenSpec{ID: "late-open", Argv: []string{"sh", "-c", "echo ran"}, Env: hostEnv()})
	_, _ = old.Write(AppendFrame(nil, FrameOpen, 7, spec))
	if _, err := ReadFrame(oldR); err == nil {
		t.Fatal("the superseded connection was not closed")
	}
	time.Sleep(100 * time.Millisecond)
	list, err := newer.List(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range list {
		if s.ID == "late-open" {
			t.Fatalf("a superseded client started a command: %+v", s)
		}
	}
}

// A socket that takes the connection but never answers the Hello is
// reported, so the caller can prefer another transport.
func TestHandshakeFailedIsReported(t *testing.T) {
	_, srv := startSocketServer(t, func(*unix.Ucred) error { return errors.New("refused for the test") })
	var reported atomic.Int32
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := NewClient(ctx, ClientOptions{
		Dial:            socketDialer(srv.SocketPath()),
		HandshakeFailed: func(conn Conn, err error) { reported.Add(1) },
	})
	if err == nil || reported.Load() != 1 {
		t.Fatalf("handshake with a refusing server: err %v, reported %d", err, reported.Load())
	}
}
