package sandbox

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// engineWatch tells the calls waiting on an Engine that its health check
// found it not answering (issue 32 item 3): a call already waiting when the
// Engine stalls ends then with the reason, instead of waiting as long as
// the stall lasts. The zero value is an Engine that answers.
type engineWatch struct {
	mu   sync.Mutex
	down chan struct{} // closed while the Engine does not answer
	err  error         // why, while down
}

// markDown records that the Engine does not answer (err names it) and
// ends the calls bound to it.
func (w *engineWatch) markDown(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.down == nil {
		w.down = make(chan struct{})
	}
	if w.err != nil {
		return
	}
	w.err = err
	close(w.down)
}

// markUp records that the Engine answers again.
func (w *engineWatch) markUp() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil || w.down == nil {
		w.down, w.err = make(chan struct{}), nil
	}
}

// current is the channel closed when the Engine is found not answering
// (already closed while it is so) and the function that says why.
func (w *engineWatch) current() (<-chan struct{}, func() error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.down == nil {
		w.down = make(chan struct{})
	}
	return w.down, func() error {
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.err == nil {
			return ErrEngineDown
		}
		return w.err
	}
}

// whileEngineAnswers returns ctx bound to m's Engine: it is cancelled,
// with the Engine's down error as its cause, when the health check finds
// the Engine not answering (at once if it already is), or when ctx ends,
// until release is called. release does not cancel it: what was set up
// with it (a stream, a connection) may outlive the call.
func (m *DockerEngine) whileEngineAnswers(ctx context.Context) (bound context.Context, release func()) {
	cctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	stopParent := context.AfterFunc(ctx, func() { cancel(context.Cause(ctx)) })
	down, why := m.stall.current()
	stop := make(chan struct{})
	go func() {
		select {
		case <-down:
			cancel(why())
		case <-stop:
		}
	}()
	return cctx, func() {
		stopParent()
		close(stop)
	}
}

// engineErr is err of a call made with a context of whileEngineAnswers:
// the Engine's down error when that is what ended the call, else err.
func engineErr(bound context.Context, err error) error {
	if err == nil || bound.Err() == nil {
		return err
	}
	if cause := context.Cause(bound); errors.Is(cause, ErrEngineDown) {
		return fmt.Errorf("sandbox: %w; the call waiting on it was cut short", cause)
	}
	return err
}

// downErr is why the Engine does not answer, or nil while it does.
func (w *engineWatch) downErr() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// Doubt is its hostapi.Started.Doubt: while the sandbox's Engine does not
// answer and the command is followed through it (the attach stream), its
// state is unknown (it may still run, its output is held up); "" while the
// Engine answers or the supervisor's local socket, which does not go
// through the Engine, follows it.
func (p *SupervisedExec) Doubt() string {
	if p.m == nil {
		return "" // a Backend's: its engine ends the session when it loses it
	}
	err := p.m.stall.downErr()
	if err == nil || (p.client != nil && p.client.Local()) {
		return ""
	}
	return fmt.Sprintf("unknown: %v; the command may still be running", err)
}
