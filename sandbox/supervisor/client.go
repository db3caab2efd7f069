package supervisor

import (
	"bufio"
	"bytes"
	"compress/flate"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// Conn is one connection to a server: Read yields the server's frames (for
// a container, the demultiplexed stdout of its attach stream), Write
// carries the client's frames.
type Conn interface {
	io.Reader
	io.Writer
	Close() error
}

// LocalConn is implemented by a Conn that reaches the server without a copy
// in between (its unix socket): bulk output then goes uncompressed, since
// compressing costs more than it saves.
type LocalConn interface {
	Conn
	Local() bool
}

func isLocal(conn Conn) bool {
	l, ok := conn.(LocalConn)
	return ok && l.Local()
}

// Dialer opens a new Conn. It returns an error wrapping ErrGone when the
// server can never come back (the container was removed or stopped), which
// stops reconnecting.
type Dialer func(ctx context.Context) (Conn, error)

// Errors reported by the client.
var (
	// ErrGone means the server is gone for good (the container stopped or
	// was removed).
	ErrGone = errors.New("supervisor gone")
	// ErrSuperseded means a newer client connected to the same server.
	ErrSuperseded = errors.New("supervisor connection taken over by a newer client")
	// ErrClosed means the client was closed.
	ErrClosed = errors.New("supervisor client closed")
	// ErrRefused means the server answered a request with an error: for
	// Open, nothing was started.
	ErrRefused = errors.New("supervisor refused")
	// ErrNotSent means a request could not be written to the connection:
	// the server never acted on it.
	ErrNotSent = errors.New("request not sent to the supervisor")
	// ErrUnanswered means an Open or Attach went out on a connection that
	// broke before the server answered: the server may or may not have
	// acted on it. The caller must ask (List) before it runs the command
	// any other way.
	ErrUnanswered = errors.New("supervisor connection broke before it answered")
	// ErrNoAnswer means the server did not answer in time (it is stopped,
	// e.g. SIGSTOPped, or overloaded). For an Open the command did not
	// start: a server that reads it late refuses it, or the client ends it
	// (see Open).
	ErrNoAnswer = errors.New("the supervisor does not answer")
)

// DefaultAnswerTimeout bounds the wait for the server's answer to a
// request or an Open whose context has no earlier deadline.
const DefaultAnswerTimeout = 30 * time.Second

// answerDeadline is ctx bounded by DefaultAnswerTimeout.
func answerDeadline(ctx context.Context) (context.Context, context.CancelFunc) {
	if d, ok := ctx.Deadline(); ok && time.Until(d) <= DefaultAnswerTimeout {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, DefaultAnswerTimeout)
}

// noAnswer is the error of a wait for the server that ended at its
// deadline (waited is how long), or err as it is.
func noAnswer(err error, waited time.Duration) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w within %v (stopped or overloaded)", ErrNoAnswer, waited.Round(time.Millisecond))
	}
	return err
}

// ClientOptions configure a Client.
type ClientOptions struct {
	Dial Dialer
	// Window is the output credit per command (default DefaultWindow).
	Window int64
	// HelloTimeout bounds the handshake of each connection (default 5 s).
	HelloTimeout time.Duration
	// Logf receives the server's own diagnostics and reconnect notes.
	Logf func(format string, args ...any)
	// HandshakeFailed, when set, learns of a dialed connection whose
	// Hello got no valid answer (e.g. to prefer another transport for a
	// while).
	HandshakeFailed func(conn Conn, err error)
}

// Client is the host end: one connection, many commands. It reconnects
// after a broken connection and re-attaches every command it follows,
// resuming their output where it stopped.
type Client struct {
	dial    Dialer
	hsFail  func(Conn, error)
	window  int64
	helloTO time.Duration
	logf    func(format string, args ...any)
	nonce   string

	wmu sync.Mutex // serialises frame writes
	// lastUse is when a frame was last sent or received (unix ns).
	lastUse atomic.Int64

	mu          sync.Mutex
	conn        Conn
	connected   chan struct{} // closed while connected
	closed      bool
	closeErr    error
	next        uint32
	procs       map[uint32]*Proc
	reqs        map[uint32]chan Frame
	serverPID   int
	serverDir   string
	limits      []string
	noInputWait bool
	// stdinAcks: the server returns stdin credit (HelloAck.StdinAcks).
	stdinAcks bool
	// relay: the server's binary has the relay tool (HelloAck.Relay).
	relay bool
	done  chan struct{}
	zr    io.ReadCloser // DEFLATE reader, used by the read loop only
}

// NewClient connects (handshake included) and returns a Client.
func NewClient(ctx context.Context, opts ClientOptions) (*Client, error) {
	if opts.Dial == nil {
		return nil, errors.New("supervisor client: no dialer")
	}
	c := &Client{
		dial: opts.Dial, hsFail: opts.HandshakeFailed, window: opts.Window, helloTO: opts.HelloTimeout, logf: opts.Logf,
		nonce: newID(), connected: make(chan struct{}), procs: map[uint32]*Proc{}, reqs: map[uint32]chan Frame{},
		done: make(chan struct{}),
	}
	if c.window <= 0 {
		c.window = DefaultWindow
	}
	if c.helloTO <= 0 {
		c.helloTO = 5 * time.Second
	}
	if c.logf == nil {
		c.logf = func(string, ...any) {}
	}
	conn, br, err := c.handshake(ctx)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.conn = conn
	close(c.connected)
	c.mu.Unlock()
	c.Touch()
	go c.run(conn, br)
	return c, nil
}

// handshake dials and exchanges Hello/HelloAck.
func (c *Client) handshake(ctx context.Context) (Conn, io.Reader, error) {
	conn, err := c.dial(ctx)
	if err != nil {
		return nil, nil, err
	}
	hello, _ := json.Marshal(Hello{Version: ProtocolVersion, Client: c.nonce, Deflate: !isLocal(conn)})
	timer := time.AfterFunc(c.helloTO, func() { _ = conn.Close() })
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	defer stop()
	if _, err := conn.Write(AppendFrame(nil, FrameHello, 0, hello)); err != nil {
		// A server that accepts and at once closes (it refused this peer)
		// fails the handshake as surely as one that never answers.
		timer.Stop()
		_ = conn.Close()
		err = fmt.Errorf("supervisor hello: %w", err)
		if c.hsFail != nil && ctx.Err() == nil {
			c.hsFail(conn, err)
		}
		return nil, nil, err
	}
	br := frameReader(conn)
	for {
		f, err := ReadFrame(br)
		if err != nil {
			timer.Stop()
			_ = conn.Close()
			if ctx.Err() != nil {
				return nil, nil, ctx.Err()
			}
			err = fmt.Errorf("supervisor hello: no answer: %w", err)
			if c.hsFail != nil {
				c.hsFail(conn, err)
			}
			return nil, nil, err
		}
		if f.Type != FrameHelloAck {
			continue // traffic for an earlier client
		}
		var ack HelloAck
		if err := json.Unmarshal(f.Payload, &ack); err != nil || ack.Client != c.nonce {
			continue
		}
		timer.Stop()
		if ack.Version != ProtocolVersion {
			_ = conn.Close()
			return nil, nil, fmt.Errorf("supervisor speaks protocol %d, want %d", ack.Version, ProtocolVersion)
		}
		c.mu.Lock()
		c.serverPID, c.serverDir, c.limits, c.noInputWait = ack.PID, ack.Dir, ack.Limits, ack.NoInputWait
		c.stdinAcks = ack.StdinAcks
		c.relay = ack.Relay
		c.mu.Unlock()
		return conn, br, nil
	}
}

// frameReader buffers conn unless it buffers already (Demux does).
func frameReader(conn Conn) io.Reader {
	if _, ok := conn.(interface{ Buffered() int }); ok {
		return conn
	}
	return bufio.NewReaderSize(conn, 128<<10)
}

// run reads one connection until it breaks, then reconnects.
func (c *Client) run(conn Conn, br io.Reader) {
	for {
		err := c.readLoop(br)
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return
		}
		c.connected = make(chan struct{})
		c.conn = nil
		reqs := c.reqs
		c.reqs = map[uint32]chan Frame{}
		// A command whose Open (or Attach) went out on this connection and
		// got no answer may or may not run: it is not re-attached (a
		// refused attach would read as "never started"), its caller learns
		// that the outcome is unknown.
		var unanswered []*Proc
		for id, p := range c.procs {
			if p.sentOn == conn && !p.answered() {
				unanswered = append(unanswered, p)
				delete(c.procs, id)
			}
		}
		c.mu.Unlock()
		_ = conn.Close()
		for id, ch := range reqs {
			ch <- Frame{Type: FrameError, Stream: id, Payload: []byte("connection to the supervisor broke: " + errString(err))}
		}
		for _, p := range unanswered {
			p.startFailed(fmt.Errorf("%w: %s", ErrUnanswered, errString(err)))
		}
		if errors.Is(err, io.EOF) {
			// The supervisor closed it: its container stopped or was
			// removed (the usual end), or it restarts.
			c.logf("debug: supervisor connection closed; reconnecting")
		} else {
			c.logf("warning: supervisor connection broke (%v); reconnecting", err)
		}
		conn, br, err = c.reconnect()
		if err != nil {
			c.shutdown(err)
			return
		}
	}
}

func errString(err error) string {
	if err == nil {
		return "EOF"
	}
	return err.Error()
}

// reconnect dials with backoff until it succeeds, the server is gone or the
// client is closed, then re-attaches every followed command.
func (c *Client) reconnect() (Conn, io.Reader, error) {
	backoff := 20 * time.Millisecond
	for {
		ctx, cancel := context.WithTimeout(context.Background(), c.helloTO+5*time.Second)
		go func() {
			select {
			case <-c.done:
				cancel()
			case <-ctx.Done():
			}
		}()
		conn, br, err := c.handshake(ctx)
		cancel()
		if err == nil {
			c.mu.Lock()
			if c.closed {
				c.mu.Unlock()
				_ = conn.Close()
				return nil, nil, ErrClosed
			}
			c.conn = conn
			procs := make([]*Proc, 0, len(c.procs))
			for _, p := range c.procs {
				// Only commands the server confirmed are re-attached; one
				// whose Open is still to be sent goes out on this
				// connection by itself.
				if p.answered() {
					procs = append(procs, p)
				}
			}
			close(c.connected)
			c.mu.Unlock()
			for _, p := range procs {
				p.reattach(conn)
			}
			return conn, br, nil
		}
		if errors.Is(err, ErrGone) {
			return nil, nil, err
		}
		select {
		case <-c.done:
			return nil, nil, ErrClosed
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

func (c *Client) readLoop(br io.Reader) error {
	for {
		f, err := ReadFrame(br)
		if err != nil {
			return err
		}
		if err := c.dispatch(f); err != nil {
			return err
		}
	}
}

func (c *Client) dispatch(f Frame) error {
	c.lastUse.Store(time.Now().UnixNano())
	switch f.Type {
	case FrameHelloAck:
		var ack HelloAck
		if json.Unmarshal(f.Payload, &ack) == nil && ack.Client != c.nonce {
			c.logf("supervisor connection taken over by client %s (this is %s)", ack.Client, c.nonce)
			c.shutdown(ErrSuperseded)
			return ErrSuperseded
		}
		return nil
	case FrameResult, FrameError:
		c.mu.Lock()
		ch := c.reqs[f.Stream]
		delete(c.reqs, f.Stream)
		p := c.procs[f.Stream]
		c.mu.Unlock()
		if ch != nil {
			ch <- f
			return nil
		}
		if p != nil && f.Type == FrameError {
			p.serverError(string(f.Payload))
		}
		return nil
	}
	c.mu.Lock()
	p := c.procs[f.Stream]
	c.mu.Unlock()
	if p == nil {
		return nil
	}
	switch f.Type {
	case FrameStarted:
		var st Started
		_ = json.Unmarshal(f.Payload, &st)
		p.onStarted(st)
	case FrameOutput:
		if len(f.Payload) > 0 {
			p.onOutput(f.Payload[0], f.Payload[1:])
		}
	case FrameOutputZ:
		if len(f.Payload) > 0 {
			data, err := c.inflate(f.Payload[1:])
			if err != nil {
				return fmt.Errorf("supervisor protocol: bad compressed output: %w", err)
			}
			p.onOutput(f.Payload[0], data)
		}
	case FrameExit:
		var st ExitStatus
		_ = json.Unmarshal(f.Payload, &st)
		c.mu.Lock()
		delete(c.procs, f.Stream)
		c.mu.Unlock()
		p.onExit(st, nil)
	case FrameStatus:
		var st Status
		_ = json.Unmarshal(f.Payload, &st)
		p.setInputWait(st.InputWait)
	case FrameStdinAck:
		if len(f.Payload) == 4 {
			p.onStdinAck(int64(binary.BigEndian.Uint32(f.Payload)))
		}
	}
	return nil
}

// inflate decompresses one OutputZ payload: raw length (u32), DEFLATE data.
func (c *Client) inflate(z []byte) ([]byte, error) {
	if len(z) < 4 {
		return nil, errors.New("short payload")
	}
	n := binary.BigEndian.Uint32(z)
	if n > maxOutputChunk {
		return nil, errors.New("chunk too large")
	}
	src := bytes.NewReader(z[4:])
	if c.zr == nil {
		c.zr = flate.NewReader(src)
	} else if err := c.zr.(flate.Resetter).Reset(src, nil); err != nil {
		return nil, err
	}
	out := make([]byte, n)
	if _, err := io.ReadFull(c.zr, out); err != nil {
		return nil, err
	}
	return out, nil
}

// shutdown ends the client for good: every followed command fails with err.
func (c *Client) shutdown(err error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed, c.closeErr = true, err
	conn := c.conn
	procs := c.procs
	c.procs = map[uint32]*Proc{}
	reqs := c.reqs
	c.reqs = map[uint32]chan Frame{}
	close(c.done)
	c.mu.Unlock()
	if conn != nil {
		_ = conn.Close()
	}
	for id, ch := range reqs {
		ch <- Frame{Type: FrameError, Stream: id, Payload: []byte(err.Error())}
	}
	for _, p := range procs {
		p.onExit(ExitStatus{Code: -1}, err)
	}
}

// Close closes the connection. Commands keep running in the server; a new
// client can re-adopt them.
func (c *Client) Close() error {
	c.shutdown(ErrClosed)
	return nil
}

// Fail ends the client for good with err: every followed command fails
// with it (e.g. the container died; err says how).
func (c *Client) Fail(err error) { c.shutdown(err) }

// Err is why the client ended (nil while it works).
func (c *Client) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closeErr
}

// Connected reports whether a connection is up right now.
func (c *Client) Connected() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.conn != nil && !c.closed
}

// Local reports whether the live connection is a LocalConn (the server's
// socket rather than the Engine's attach stream).
func (c *Client) Local() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.conn != nil && isLocal(c.conn)
}

// Done is closed when the client has ended for good.
func (c *Client) Done() <-chan struct{} { return c.done }

// Nonce identifies this client to the server (the Hello's client field).
func (c *Client) Nonce() string { return c.nonce }

// ServerPID is the supervisor's pid inside the container.
func (c *Client) ServerPID() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.serverPID
}

// IdleFor is how long the client has followed no command, awaited no
// answer and moved no frame (0 while it does any of these).
func (c *Client) IdleFor(now time.Time) time.Duration {
	c.mu.Lock()
	busy := len(c.procs) > 0 || len(c.reqs) > 0
	c.mu.Unlock()
	if busy {
		return 0
	}
	return now.Sub(time.Unix(0, c.lastUse.Load()))
}

// Touch marks the client as just used (a caller about to send on it).
func (c *Client) Touch() { c.lastUse.Store(time.Now().UnixNano()) }

// Limits are what the server said it cannot do where it runs
// (HelloAck.Limits), as of the last handshake.
func (c *Client) Limits() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.limits
}

// NoInputWait reports whether the server cannot detect input waits where
// it runs (its Hello answer said so): Proc.InputWait then stays false.
func (c *Client) NoInputWait() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.noInputWait
}

// Relay reports whether the server's binary has the relay tool
// (RelayArg), as of the last handshake.
func (c *Client) Relay() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.relay
}

// CloseConn breaks the current connection as a network failure would; the
// client reconnects. For tests.
func (c *Client) CloseConn() {
	c.mu.Lock()
	conn := c.conn
	c.mu.Unlock()
	if conn != nil {
		_ = conn.Close()
	}
}

// waitConn waits for a live connection.
func (c *Client) waitConn(ctx context.Context) (Conn, error) {
	for {
		c.mu.Lock()
		if c.closed {
			err := c.closeErr
			c.mu.Unlock()
			return nil, err
		}
		conn, ch := c.conn, c.connected
		c.mu.Unlock()
		if conn != nil {
			return conn, nil
		}
		select {
		case <-ch:
		case <-c.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// send writes one frame on the live connection (waiting for a reconnect
// if there is none).
func (c *Client) send(ctx context.Context, typ byte, stream uint32, payload []byte) error {
	conn, err := c.waitConn(ctx)
	if err != nil {
		return err
	}
	return c.sendOn(conn, typ, stream, payload)
}

func (c *Client) sendOn(conn Conn, typ byte, stream uint32, payload []byte) error {
	c.lastUse.Store(time.Now().UnixNano())
	b := AppendFrame(make([]byte, 0, HeaderSize+len(payload)), typ, stream, payload)
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if _, err := conn.Write(b); err != nil {
		return fmt.Errorf("supervisor write: %w", err)
	}
	return nil
}

func (c *Client) nextID() uint32 {
	c.next++
	if c.next == 0 {
		c.next = 1
	}
	return c.next
}

// request sends a request frame and waits for its Result.
func (c *Client) request(ctx context.Context, typ byte, payload []byte) ([]byte, error) {
	ctx, cancel := answerDeadline(ctx)
	defer cancel()
	begun := time.Now()
	ch := make(chan Frame, 1)
	c.mu.Lock()
	if c.closed {
		err := c.closeErr
		c.mu.Unlock()
		return nil, err
	}
	id := c.nextID()
	c.reqs[id] = ch
	c.mu.Unlock()
	if err := c.send(ctx, typ, id, payload); err != nil {
		c.mu.Lock()
		delete(c.reqs, id)
		c.mu.Unlock()
		return nil, err
	}
	select {
	case f := <-ch:
		if f.Type == FrameError {
			return nil, fmt.Errorf("supervisor: %s", f.Payload)
		}
		return f.Payload, nil
	case <-ctx.Done():
		c.mu.Lock()
		delete(c.reqs, id)
		c.mu.Unlock()
		return nil, noAnswer(ctx.Err(), time.Since(begun))
	}
}

// Ping checks the round trip.
func (c *Client) Ping(ctx context.Context) error {
	_, err := c.request(ctx, FramePing, nil)
	return err
}

// List returns every session the server knows, running and finished.
func (c *Client) List(ctx context.Context) ([]SessionInfo, error) {
	b, err := c.request(ctx, FrameList, nil)
	if err != nil {
		return nil, err
	}
	var out []SessionInfo
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("supervisor list: %w", err)
	}
	return out, nil
}

// Read returns the kept output of session id (both streams, interleaved)
// and the stdout and stderr byte counts it covers (resume offsets).
func (c *Client) Read(ctx context.Context, id string) (out []byte, stdoutOff, stderrOff int64, err error) {
	b, _ := json.Marshal(ReadSpec{ID: id})
	res, err := c.request(ctx, FrameRead, b)
	if err != nil {
		return nil, 0, 0, err
	}
	if len(res) < 16 {
		return nil, 0, 0, errors.New("supervisor read: short result")
	}
	return res[16:], int64(binary.BigEndian.Uint64(res[0:8])), int64(binary.BigEndian.Uint64(res[8:16])), nil
}

// Forget drops a finished session and its files.
func (c *Client) Forget(ctx context.Context, id string) error {
	b, _ := json.Marshal(ReadSpec{ID: id})
	_, err := c.request(ctx, FrameForget, b)
	return err
}

// Signal sends sig to session id's process group.
func (c *Client) Signal(ctx context.Context, id string, sig int) error {
	b, _ := json.Marshal(SignalSpec{ID: id, Signal: sig})
	_, err := c.request(ctx, FrameSignal, b)
	return err
}

// KillTree ends session id's whole tree (TERM, KILL after grace) and returns
// once nothing of it is alive.
func (c *Client) KillTree(ctx context.Context, id string, grace time.Duration) error {
	b, _ := json.Marshal(SignalSpec{ID: id, Tree: true, GraceMs: grace.Milliseconds()})
	_, err := c.request(ctx, FrameSignal, b)
	return err
}

// Open starts a command and returns once it runs (or failed to start).
//
// It waits for the server until ctx's deadline (at most
// DefaultAnswerTimeout) and then fails with ErrNoAnswer. The command then
// never runs unseen: a server on this machine (same clock) that reads the
// Open after that deadline refuses it (OpenSpec.StartBy), and in any case
// the client asks the server to end the command's tree, which it does
// once it answers again.
func (c *Client) Open(ctx context.Context, spec OpenSpec) (*Proc, error) {
	if spec.ID == "" {
		spec.ID = newID()
	}
	if spec.Window <= 0 {
		spec.Window = c.window
	}
	ctx, cancel := answerDeadline(ctx)
	defer cancel()
	begun := time.Now()
	if d, ok := ctx.Deadline(); ok && c.Local() {
		spec.StartBy = d.UnixMilli()
	}
	p := c.newProc(spec.ID, spec.PTY, spec.PTY || spec.KeepStdin, [2]int64{})
	b, err := json.Marshal(spec)
	if err != nil {
		return nil, fmt.Errorf("supervisor open: %w", err)
	}
	p, err = c.startProc(ctx, p, FrameOpen, b)
	if errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, ErrNotSent) {
		go c.endLateStart(spec.ID)
		return nil, noAnswer(err, time.Since(begun))
	}
	return p, err
}

// endLateStart ends the tree of a command whose Open was given up on, in
// case the server starts it when it answers again (a refused or unknown
// id makes this a no-op).
func (c *Client) endLateStart(id string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	for ctx.Err() == nil {
		err := c.KillTree(ctx, id, time.Second)
		if !errors.Is(err, ErrNoAnswer) {
			return
		}
		select {
		case <-c.done:
			return
		default:
		}
	}
}

// Attach follows an existing session (after a restart of the host side):
// output from the given per-stream offsets on, then live, then its exit.
func (c *Client) Attach(ctx context.Context, info SessionInfo, stdoutOff, stderrOff int64) (*Proc, error) {
	p := c.newProc(info.ID, info.PTY, info.PTY || info.KeepStdin, [2]int64{stdoutOff, stderrOff})
	b, _ := json.Marshal(AttachSpec{ID: info.ID, Stdout: stdoutOff, Stderr: stderrOff, Window: c.window})
	return c.startProc(ctx, p, FrameAttach, b)
}

func (c *Client) newProc(id string, tty, stdin bool, recv [2]int64) *Proc {
	p := &Proc{c: c, id: id, tty: tty, hasStdin: stdin, started: make(chan struct{}), done: make(chan struct{}),
		iwCh: make(chan struct{}), stdinCh: make(chan struct{})}
	p.recv = recv
	p.stdout = newStreamBuf(p)
	if !tty {
		p.stderr = newStreamBuf(p)
	}
	return p
}

func (c *Client) startProc(ctx context.Context, p *Proc, typ byte, payload []byte) (*Proc, error) {
	c.mu.Lock()
	if c.closed {
		err := c.closeErr
		c.mu.Unlock()
		return nil, err
	}
	p.stream = c.nextID()
	c.procs[p.stream] = p
	c.mu.Unlock()
	fail := func(err error) (*Proc, error) {
		c.mu.Lock()
		delete(c.procs, p.stream)
		c.mu.Unlock()
		return nil, err
	}
	conn, err := c.waitConn(ctx)
	if err != nil {
		return fail(fmt.Errorf("%w: %w", ErrNotSent, err))
	}
	if err := c.sendOn(conn, typ, p.stream, payload); err != nil {
		return fail(fmt.Errorf("%w: %w", ErrNotSent, err))
	}
	c.mu.Lock()
	p.sentOn = conn
	broke := c.conn != conn
	c.mu.Unlock()
	if broke {
		// The connection broke while the request went out; run() may have
		// looked at this command before sentOn was set.
		p.startFailed(fmt.Errorf("%w: the connection changed while the request was sent", ErrUnanswered))
	}
	select {
	case <-p.started:
		if p.startErr != nil {
			return fail(p.startErr)
		}
		return p, nil
	case <-ctx.Done():
		return fail(ctx.Err())
	}
}

func (c *Client) isFollowing(p *Proc) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.procs[p.stream] == p
}

func (c *Client) drop(p *Proc) {
	c.mu.Lock()
	if c.procs[p.stream] == p {
		delete(c.procs, p.stream)
	}
	c.mu.Unlock()
}
