package hostexec

import (
	"errors"
	"io"
	"os"
	"sync/atomic"
	"syscall"
	"time"
)

// outputReader reads one output stream (a pipe's read end or a PTY master)
// and guarantees io.EOF shortly after the command exits.
//
// Why: the stream reaches EOF only when every writer closed it, and a
// command may leave a descendant behind that still holds it
// (`nohup sleep 600 &`, a daemon). os/exec's WaitDelay would solve this only
// for the copying goroutines os/exec owns; here the caller reads the stream
// directly. So once the command exited, exited arms a cut-off after the drain
// period: the cut-off sets a read deadline in the past, which wakes a reader
// blocked in Read; from then on each Read takes what the kernel already
// buffered without blocking and reports io.EOF when nothing is left. Output
// already written is never lost to a slow reader; only what a leftover writes
// after the cut-off is ignored.
//
// Reads must come from one goroutine at a time (io.Reader's usual contract).
// The file is closed when Read reports io.EOF.
type outputReader struct {
	f      *os.File
	cut    atomic.Bool
	closed bool // only touched by the reading goroutine
}

func newOutputReader(f *os.File) *outputReader { return &outputReader{f: f} }

// exited arms the cut-off drain after the command's exit. Called once.
func (o *outputReader) exited(drain time.Duration) {
	time.AfterFunc(drain, func() {
		o.cut.Store(true)
		// Wake a reader blocked in Read; fails harmlessly if already closed.
		_ = o.f.SetReadDeadline(time.Now())
	})
}

func (o *outputReader) Read(b []byte) (int, error) {
	if o.closed {
		return 0, io.EOF
	}
	if len(b) == 0 {
		return 0, nil
	}
	if !o.cut.Load() {
		n, err := o.f.Read(b)
		switch {
		case err == nil:
			return n, nil
		case isEndOfStream(err):
			if n > 0 {
				return n, nil
			}
			o.finish()
			return 0, io.EOF
		case errors.Is(err, os.ErrDeadlineExceeded) && o.cut.Load():
			if n > 0 {
				return n, nil
			}
			// Fall through to the non-blocking drain.
		default:
			return n, err
		}
	}
	n, err := o.readBuffered(b)
	if n > 0 {
		return n, nil
	}
	if err != nil && !isEndOfStream(err) && !errors.Is(err, syscall.EAGAIN) {
		o.finish()
		return 0, err
	}
	o.finish()
	return 0, io.EOF
}

// readBuffered reads what is buffered without waiting: the descriptor is in
// non-blocking mode (os registers pipes and the PTY master with the poller),
// and Control bypasses the expired deadline.
func (o *outputReader) readBuffered(b []byte) (int, error) {
	rc, err := o.f.SyscallConn()
	if err != nil {
		return 0, err
	}
	var n int
	var rerr error
	if cerr := rc.Control(func(fd uintptr) {
		for {
			n, rerr = syscall.Read(int(fd), b)
			if rerr != syscall.EINTR {
				return
			}
		}
	}); cerr != nil {
		return 0, cerr
	}
	if n < 0 {
		n = 0
	}
	return n, rerr
}

func (o *outputReader) finish() {
	if !o.closed {
		o.closed = true
		_ = o.f.Close()
	}
}

// isEndOfStream reports the errors that mean "no writer is left": io.EOF for
// a pipe, EIO for a PTY master whose terminal side is closed, and a file we
// closed ourselves.
func isEndOfStream(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, syscall.EIO) || errors.Is(err, os.ErrClosed)
}
