package supervisor

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sandboxctl/sandboxctl/api"
)

// Proc is a command followed by a Client. Its method set satisfies
// sessions.Process.
type Proc struct {
	c        *Client
	id       string
	stream   uint32
	tty      bool
	hasStdin bool

	startOnce sync.Once
	started   chan struct{}
	startErr  error
	// sentOn is the connection the Open/Attach went out on (guarded by
	// the client's mu).
	sentOn    Conn
	pid       int
	startedAt time.Time

	stdout, stderr *streamBuf

	mu        sync.Mutex
	recv      [2]int64 // bytes received per stream (the resume offsets)
	skipped   int64    // bytes an Attach asked for that the server no longer had
	unacked   int64
	exitOnce  sync.Once
	done      chan struct{}
	exit      ExitStatus
	err       error
	lastErr   string
	inputWait atomic.Bool
	iwCh      chan struct{} // closed and replaced on every input-wait change
	// stdinInFlight is the stdin sent and not yet acked (StdinAck);
	// stdinCh is closed and replaced on every ack.
	stdinInFlight int64
	stdinCh       chan struct{}
}

func (p *Proc) onStarted(st Started) {
	p.startOnce.Do(func() {
		p.pid = st.PID
		p.startedAt = time.UnixMilli(st.StartedAt)
		p.mu.Lock()
		p.recv[0] += max(st.SkippedStdout, 0)
		p.recv[1] += max(st.SkippedStderr, 0)
		p.skipped += max(st.SkippedStdout, 0) + max(st.SkippedStderr, 0)
		p.mu.Unlock()
		close(p.started)
	})
}

// answered reports whether the server confirmed the command (Started).
func (p *Proc) answered() bool {
	select {
	case <-p.started:
		return p.startErr == nil
	default:
		return false
	}
}

// startFailed ends a start that got no confirmation; a no-op once the
// server answered.
func (p *Proc) startFailed(err error) {
	p.startOnce.Do(func() {
		p.startErr = err
		close(p.started)
	})
}

func (p *Proc) serverError(msg string) {
	started := false
	p.startOnce.Do(func() {
		p.startErr = newRefusal(msg)
		close(p.started)
		started = true
	})
	if started {
		return
	}
	p.mu.Lock()
	p.lastErr = msg
	p.mu.Unlock()
	if !p.c.isFollowing(p) {
		return
	}
	// An attach that the server refuses after a reconnect (the session is
	// gone) ends the process.
	if len(msg) > 7 && msg[:7] == "attach:" {
		p.c.drop(p)
		p.onExit(ExitStatus{Code: -1}, fmt.Errorf("supervisor: %s", msg))
	}
}

func (p *Proc) onOutput(which byte, data []byte) {
	p.mu.Lock()
	if which == StreamStdout || which == StreamStderr {
		p.recv[which-1] += int64(len(data))
	}
	p.mu.Unlock()
	if which == StreamStderr && p.stderr != nil {
		p.stderr.push(data)
	} else {
		p.stdout.push(data)
	}
}

func (p *Proc) onExit(st ExitStatus, err error) {
	p.exitOnce.Do(func() {
		p.mu.Lock()
		p.exit, p.err = st, err
		p.mu.Unlock()
		p.startOnce.Do(func() {
			p.startErr = err
			if p.startErr == nil {
				p.startErr = errors.New("supervisor: ended before it started")
			}
			close(p.started)
		})
		p.stdout.close(err)
		if p.stderr != nil {
			p.stderr.close(err)
		}
		p.setInputWait(false)
		close(p.done)
	})
}

// consumed is called as the reader takes bytes; credit goes back to the
// server in quarter windows.
func (p *Proc) consumed(n int) {
	p.mu.Lock()
	p.unacked += int64(n)
	grant := int64(0)
	if p.unacked >= p.c.window/4 {
		grant, p.unacked = p.unacked, 0
	}
	p.mu.Unlock()
	if grant == 0 {
		return
	}
	select {
	case <-p.done:
		return
	default:
	}
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], uint32(grant))
	p.c.mu.Lock()
	conn := p.c.conn
	p.c.mu.Unlock()
	if conn != nil {
		_ = p.c.sendOn(conn, FrameWindow, p.stream, b[:])
	}
}

// reattach binds the command to the new connection after a reconnect.
func (p *Proc) reattach(conn Conn) {
	p.mu.Lock()
	off := p.recv
	p.unacked = 0
	// Stdin acks of the old connection may never come: start the credit
	// anew. The server's queue holds at most one window of old input
	// besides one of new (StdinWindow is half of it).
	p.stdinInFlight = 0
	close(p.stdinCh)
	p.stdinCh = make(chan struct{})
	p.mu.Unlock()
	// Bytes the reader has not taken yet still count against the window.
	win := p.c.window - int64(p.stdout.buffered())
	if p.stderr != nil {
		win -= int64(p.stderr.buffered())
	}
	b, _ := json.Marshal(AttachSpec{ID: p.id, Stdout: off[0], Stderr: off[1], Window: max(win, 64<<10)})
	_ = p.c.sendOn(conn, FrameAttach, p.stream, b)
}

// ID is the durable session id (the SANDBOXCTL_RUN tag of its processes).
func (p *Proc) ID() string { return p.id }

// Tag is the value of SANDBOXCTL_RUN shared by the command's tree.
func (p *Proc) Tag() string { return p.id }

// PID is the command's pid inside the container.
func (p *Proc) PID() int { return p.pid }

// StartedAt is when the server started the command.
func (p *Proc) StartedAt() time.Time { return p.startedAt }

// Stdout is the output stream (stdout and stderr merged for a TTY).
func (p *Proc) Stdout() io.Reader { return p.stdout }

// Stderr is the error stream, nil for a TTY.
func (p *Proc) Stderr() io.Reader {
	if p.stderr == nil {
		return nil
	}
	return p.stderr
}

// Skipped is how many bytes (both streams) after the offsets given to
// Attach the server no longer had: the output read from Stdout and Stderr
// starts that far past them.
func (p *Proc) Skipped() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.skipped
}

// Offsets are the bytes received so far on stdout and stderr.
func (p *Proc) Offsets() (stdout, stderr int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.recv[0], p.recv[1]
}

func (p *Proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stdinFrame is the most stdin one frame carries: bulk input (an upload)
// goes in few frames and few writes.
const stdinFrame = 256 << 10

// Write sends data to the command's stdin.
func (p *Proc) Write(b []byte) (int, error) {
	if !p.hasStdin {
		return 0, errors.New("supervisor: the command has no stdin")
	}
	if p.exited() {
		return 0, errors.New("supervisor: process has exited")
	}
	ctx, cancel := context.WithTimeout(context.Background(), stdinWait)
	defer cancel()
	// A write that fits the window waits for all its credit first, so that
	// a command that does not take its input fails it whole (nothing
	// sent: ErrStdinNotTaken, safe to retry); a larger one goes a window
	// at a time.
	n := 0
	for len(b) > 0 {
		part := b[:min(len(b), StdinWindow)]
		if err := p.awaitStdinCredit(ctx, int64(len(part))); err != nil {
			return n, err
		}
		for len(part) > 0 {
			k := min(len(part), stdinFrame)
			if err := p.c.send(ctx, FrameStdin, p.stream, part[:k]); err != nil {
				p.onStdinAck(int64(len(part)))
				return n, err
			}
			n += k
			part, b = part[k:], b[k:]
		}
	}
	return n, nil
}

// stdinWait bounds how long one Write waits for the command to take its
// input (stdin credit) or for the connection.
const stdinWait = 30 * time.Second

// ErrStdinNotTaken is a Write of which nothing was sent because the
// command took none of its earlier input for stdinWait: the caller may
// write the same bytes again. It is of containerd's errdefs class
// "deadline exceeded" (its DeadlineExceeded method), which crosses HTTP as
// 504, without this package importing errdefs.
var ErrStdinNotTaken error = stdinNotTaken{}

type stdinNotTaken struct{}

func (stdinNotTaken) Error() string {
	return fmt.Sprintf("stdin: the command took none of its pending input within %s; nothing of this write was sent", stdinWait)
}

// DeadlineExceeded marks the errdefs class.
func (stdinNotTaken) DeadlineExceeded() {}

// awaitStdinCredit takes k bytes of stdin credit, waiting while
// StdinWindow bytes are in flight (a command that reads slowly holds its
// writer back); against a server that does not ack stdin it takes none.
func (p *Proc) awaitStdinCredit(ctx context.Context, k int64) error {
	p.c.mu.Lock()
	acks := p.c.stdinAcks
	p.c.mu.Unlock()
	if !acks {
		return nil
	}
	for {
		p.mu.Lock()
		if p.stdinInFlight == 0 || p.stdinInFlight+k <= StdinWindow {
			p.stdinInFlight += k
			p.mu.Unlock()
			return nil
		}
		ch := p.stdinCh
		p.mu.Unlock()
		select {
		case <-ch:
		case <-p.done:
			return errors.New("supervisor: process has exited")
		case <-ctx.Done():
			return ErrStdinNotTaken
		}
	}
}

// onStdinAck returns n bytes of stdin credit.
func (p *Proc) onStdinAck(n int64) {
	p.mu.Lock()
	p.stdinInFlight = max(0, p.stdinInFlight-n)
	close(p.stdinCh)
	p.stdinCh = make(chan struct{})
	p.mu.Unlock()
}

// CloseStdin sends EOF (^D on a TTY).
func (p *Proc) CloseStdin() error {
	if !p.hasStdin {
		return nil
	}
	if p.exited() {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return p.c.send(ctx, FrameStdinClose, p.stream, nil)
}

// Resize sets the terminal size.
func (p *Proc) Resize(ctx context.Context, cols, rows int) error {
	if !p.tty {
		return errors.New("supervisor: resize needs a TTY")
	}
	if cols <= 0 || rows <= 0 {
		return fmt.Errorf("supervisor: bad terminal size %dx%d", cols, rows)
	}
	b, _ := json.Marshal(Size{Cols: cols, Rows: rows})
	return p.c.send(ctx, FrameResize, p.stream, b)
}

// Wait blocks until the command has ended: its exit code, or -1 and the
// signal name.
func (p *Proc) Wait(ctx context.Context) (int, string, error) {
	select {
	case <-ctx.Done():
		return 0, "", ctx.Err()
	case <-p.done:
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil {
		return -1, "", p.err
	}
	return p.exit.Code, p.exit.Signal, nil
}

// Done is closed when the command has ended.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Exit returns the exit status once Done is closed.
func (p *Proc) Exit() ExitStatus {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exit
}

// Signal sends sig to the command's process group.
func (p *Proc) Signal(ctx context.Context, sig syscall.Signal) error {
	if p.exited() {
		return nil
	}
	err := p.c.Signal(ctx, p.id, int(sig))
	if p.exited() {
		return nil
	}
	return err
}

// Kill ends the whole tree (SIGTERM, SIGKILL after KillGrace) and returns
// once nothing of it is alive.
func (p *Proc) Kill(ctx context.Context) error {
	return p.KillGrace(ctx, api.KillGrace)
}

// KillGrace is Kill with another grace period.
// After the command exited it still ends what is left of its tree
// (children that outlived it), ignoring errors.
func (p *Proc) KillGrace(ctx context.Context, grace time.Duration) error {
	err := p.c.KillTree(ctx, p.id, grace)
	if p.exited() {
		return nil
	}
	return err
}

// InputWait reports whether the command sits blocked reading a stdin that
// holds no data (the kernel's view, see the package doc).
func (p *Proc) InputWait() bool { return p.inputWait.Load() }

// InputWaitChanged returns a channel closed at the next change of InputWait.
func (p *Proc) InputWaitChanged() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.iwCh
}

func (p *Proc) setInputWait(v bool) {
	if p.inputWait.Swap(v) == v {
		return
	}
	p.mu.Lock()
	close(p.iwCh)
	p.iwCh = make(chan struct{})
	p.mu.Unlock()
}

// Detach stops following the command; it runs on in the container.
func (p *Proc) Detach(ctx context.Context) error {
	p.c.drop(p)
	return p.c.send(ctx, FrameDetach, p.stream, nil)
}

// streamBuf is an unbounded in-memory pipe whose size the server's credit
// bounds: push never blocks (it keeps the frame's payload, no copy), Read
// blocks until data or close.
type streamBuf struct {
	p      *Proc
	mu     sync.Mutex
	cond   *sync.Cond
	chunks [][]byte
	size   int
	closed bool
	err    error
}

func newStreamBuf(p *Proc) *streamBuf {
	b := &streamBuf{p: p}
	b.cond = sync.NewCond(&b.mu)
	return b
}

func (b *streamBuf) push(d []byte) {
	if len(d) == 0 {
		return
	}
	b.mu.Lock()
	b.chunks = append(b.chunks, d)
	b.size += len(d)
	b.cond.Broadcast()
	b.mu.Unlock()
}

func (b *streamBuf) close(err error) {
	b.mu.Lock()
	b.closed, b.err = true, err
	b.cond.Broadcast()
	b.mu.Unlock()
}

func (b *streamBuf) buffered() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.size
}

// wait blocks until data or close; it returns with b.mu held.
func (b *streamBuf) wait() {
	b.mu.Lock()
	for b.size == 0 && !b.closed {
		b.cond.Wait()
	}
}

func (b *streamBuf) endErr() error {
	if b.err != nil {
		return b.err
	}
	return io.EOF
}

// WriteTo hands whole chunks to w (io.Copy uses it): no copy, and one lock
// round per chunk instead of per small read.
func (b *streamBuf) WriteTo(w io.Writer) (int64, error) {
	var total int64
	for {
		b.wait()
		if b.size == 0 {
			err := b.endErr()
			b.mu.Unlock()
			if err == io.EOF {
				err = nil
			}
			return total, err
		}
		chunks := b.chunks
		b.chunks, b.size = nil, 0
		b.mu.Unlock()
		for _, c := range chunks {
			n, err := w.Write(c)
			total += int64(n)
			b.p.consumed(len(c))
			if err != nil {
				return total, err
			}
		}
	}
}

func (b *streamBuf) Read(d []byte) (int, error) {
	b.wait()
	if b.size == 0 {
		err := b.endErr()
		b.mu.Unlock()
		return 0, err
	}
	n := 0
	for n < len(d) && len(b.chunks) > 0 {
		k := copy(d[n:], b.chunks[0])
		n += k
		if k == len(b.chunks[0]) {
			b.chunks[0] = nil
			b.chunks = b.chunks[1:]
		} else {
			b.chunks[0] = b.chunks[0][k:]
		}
	}
	b.size -= n
	if len(b.chunks) == 0 {
		b.chunks = nil
	}
	b.mu.Unlock()
	b.p.consumed(n)
	return n, nil
}

// refusal is the server's Error answer to an Open: nothing started. It is
// ErrRefused, and api.ErrCommandNotFound too when the server did not find
// the program (its message ends with api.CommandNotFound, as the server
// writes it): read here, where the answer enters, once.
type refusal struct {
	msg      string
	notFound bool
}

func newRefusal(msg string) *refusal {
	return &refusal{msg: msg, notFound: strings.HasSuffix(msg, api.CommandNotFound)}
}

func (r *refusal) Error() string { return ErrRefused.Error() + ": " + r.msg }

// Is matches ErrRefused, and api.ErrCommandNotFound for a program not
// found.
func (r *refusal) Is(target error) bool {
	return target == ErrRefused || r.notFound && target == api.ErrCommandNotFound
}
