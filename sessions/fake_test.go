package sessions

import (
	"bytes"
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxctl/sandboxctl/api"

	"github.com/sandboxctl/sandboxctl/sessions/config"
	"github.com/sandboxctl/sandboxctl/vocab"
)

// fakeHost is a Host whose behaviour is given by func fields; a nil field
// returns a sensible default.
type fakeHost struct {
	resolveFunc func(ctx context.Context, agentID, sessionKey, requested string) (string, string, error)
	startFunc   func(ctx context.Context, spec StartSpec) (Process, error)

	mu    sync.Mutex
	specs []StartSpec
}

func (h *fakeHost) Caps() HostCaps { return HostCaps{} }

func (h *fakeHost) ResolveWorkdir(ctx context.Context, agentID, sessionKey, requested string) (string, string, error) {
	if h.resolveFunc != nil {
		return h.resolveFunc(ctx, agentID, sessionKey, requested)
	}
	if requested == "" {
		return "/work", "", nil
	}
	return requested, "", nil
}

func (h *fakeHost) Start(ctx context.Context, spec StartSpec) (Started, error) {
	h.mu.Lock()
	h.specs = append(h.specs, spec)
	h.mu.Unlock()
	if h.startFunc == nil {
		p := newFakeProc(spec.PTY)
		p.exit(0, "")
		return Started{Process: p}, nil
	}
	p, err := h.startFunc(ctx, spec)
	if err != nil {
		return Started{}, err
	}
	// As a real host adapter does: what the fake process reports goes
	// with Started.
	st := Started{Process: p}
	if w, ok := p.(interface{ Warnings() []string }); ok {
		st.Warnings = w.Warnings()
	}
	if iw, ok := p.(InputWaiter); ok && iw.InputWaitChanged() != nil {
		st.InputWait = iw
	}
	if d, ok := p.(interface{ Doubt() string }); ok {
		st.Doubt = d.Doubt
	}
	if sg, ok := p.(interface {
		Signal(context.Context, syscall.Signal) error
	}); ok {
		st.Signal = sg.Signal
	}
	return st, nil
}

func (h *fakeHost) lastSpec() StartSpec {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.specs[len(h.specs)-1]
}

type exitInfo struct {
	code int
	sig  string
	err  error
}

// fakeProc is a Process driven by the test: say() writes output, exit()
// ends it. Kill ends it with SIGTERM unless killFunc says otherwise.
type fakeProc struct {
	pid        int
	pty        bool
	outR, errR *bufPipe
	outW, errW *bufPipe
	exitCh     chan exitInfo
	exitOnce   sync.Once
	killFunc   func(p *fakeProc)
	kills      atomic.Int32

	mu          sync.Mutex
	stdin       bytes.Buffer
	stdinClosed bool
	size        [2]int
	written     chan struct{}
}

var pidCounter atomic.Int32

func newFakeProc(pty bool) *fakeProc {
	p := &fakeProc{pid: 1000 + int(pidCounter.Add(1)), pty: pty, exitCh: make(chan exitInfo, 1), written: make(chan struct{}, 64)}
	p.outR = newBufPipe()
	p.outW = p.outR
	if !pty {
		p.errR = newBufPipe()
		p.errW = p.errR
	}
	return p
}

func (p *fakeProc) PID() int          { return p.pid }
func (p *fakeProc) Stdout() io.Reader { return p.outR }
func (p *fakeProc) Stderr() io.Reader {
	if p.errR == nil {
		return nil
	}
	return p.errR
}

func (p *fakeProc) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stdinClosed {
		return 0, errors.New("stdin closed")
	}
	p.stdin.Write(b)
	select {
	case p.written <- struct{}{}:
	default:
	}
	return len(b), nil
}

func (p *fakeProc) CloseStdin() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stdinClosed = true
	return nil
}

func (p *fakeProc) Resize(ctx context.Context, cols, rows int) error {
	if !p.pty {
		return errors.New("not a pty")
	}
	p.mu.Lock()
	p.size = [2]int{cols, rows}
	p.mu.Unlock()
	return nil
}

func (p *fakeProc) Wait(ctx context.Context) (int, string, error) {
	select {
	case e := <-p.exitCh:
		p.exitCh <- e
		return e.code, e.sig, e.err
	case <-ctx.Done():
		return -1, "", ctx.Err()
	}
}

func (p *fakeProc) Kill(ctx context.Context) error {
	p.kills.Add(1)
	if p.killFunc != nil {
		p.killFunc(p)
		return nil
	}
	p.exit(-1, "SIGTERM")
	return nil
}

func (p *fakeProc) say(s string) { _, _ = p.outW.Write([]byte(s)) }
func (p *fakeProc) sayErr(s string) {
	_, _ = p.errW.Write([]byte(s))
}

func (p *fakeProc) exit(code int, sig string) {
	p.exitOnce.Do(func() {
		p.outW.Close()
		if p.errW != nil {
			p.errW.Close()
		}
		p.exitCh <- exitInfo{code: code, sig: sig}
	})
}

func (p *fakeProc) stdinString() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stdin.String()
}

// clock is a settable clock for Options.Now.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)} }
func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}
func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// newTestManager returns a Manager whose hosts are fakes; cfg edits a
// default config. It is closed at test end.
// exitErr ends p with a failed wait: no exit code, no signal.
func (p *fakeProc) exitErr(err error) {
	p.exitOnce.Do(func() {
		p.outW.Close()
		if p.errW != nil {
			p.errW.Close()
		}
		p.exitCh <- exitInfo{code: -1, err: err}
	})
}

func newTestManager(t *testing.T, edit func(*config.File), opts ...func(*Options)) (*Manager, map[string]*fakeHost) {
	t.Helper()
	cfg := config.Default()
	if edit != nil {
		edit(&cfg)
	}
	hosts := map[string]*fakeHost{"sandbox": {}, "gateway": {}, "node": {}}
	o := Options{
		Config: cfg,
		Hosts:  map[vocab.Host]Host{"sandbox": hosts["sandbox"], "gateway": hosts["gateway"], "node": hosts["node"]},
		Logf:   t.Logf,
		Getenv: func(string) string { return "" },
	}
	for _, f := range opts {
		f(&o)
	}
	m, err := New(o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := m.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return m, hosts
}

func text(r api.Result) string {
	if len(r.Content) == 0 {
		return ""
	}
	return r.Content[0].Text
}

// startWith makes host h start the given proc.
func startWith(h *fakeHost, p *fakeProc) {
	h.startFunc = func(context.Context, StartSpec) (Process, error) { return p, nil }
}

// bufPipe is an in-memory pipe whose writes never block (unlike io.Pipe), so
// a test can produce output before anyone reads it.
type bufPipe struct {
	mu     sync.Mutex
	cond   *sync.Cond
	buf    bytes.Buffer
	closed bool
}

func newBufPipe() *bufPipe {
	b := &bufPipe{}
	b.cond = sync.NewCond(&b.mu)
	return b
}

func (b *bufPipe) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return 0, io.ErrClosedPipe
	}
	b.buf.Write(p)
	b.cond.Broadcast()
	return len(p), nil
}

func (b *bufPipe) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for b.buf.Len() == 0 && !b.closed {
		b.cond.Wait()
	}
	if b.buf.Len() == 0 {
		return 0, io.EOF
	}
	return b.buf.Read(p)
}

func (b *bufPipe) Close() error {
	b.mu.Lock()
	b.closed = true
	b.cond.Broadcast()
	b.mu.Unlock()
	return nil
}
