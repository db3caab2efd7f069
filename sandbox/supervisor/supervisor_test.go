package supervisor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandboxctl/sandboxctl/api"
)

// engine stands in for the Docker Engine's attach: every attached
// connection's writes go to the server's one stdin, and the server's stdout
// is copied to every attached connection (blocking, as the Engine does).
type engine struct {
	inR *io.PipeReader
	inW *io.PipeWriter

	wmu   sync.Mutex
	mu    sync.Mutex
	conns map[*attachConn]bool
}

type attachConn struct {
	e    *engine
	r    *io.PipeReader
	w    *io.PipeWriter
	once sync.Once
}

func (c *attachConn) Read(p []byte) (int, error) { return c.r.Read(p) }
func (c *attachConn) Write(p []byte) (int, error) {
	c.e.wmu.Lock()
	defer c.e.wmu.Unlock()
	c.e.mu.Lock()
	live := c.e.conns[c]
	c.e.mu.Unlock()
	if !live {
		return 0, io.ErrClosedPipe
	}
	return c.e.inW.Write(p)
}
func (c *attachConn) Close() error {
	c.once.Do(func() {
		c.e.mu.Lock()
		delete(c.e.conns, c)
		c.e.mu.Unlock()
		_ = c.r.Close()
		_ = c.w.Close()
	})
	return nil
}

// Write is the server's stdout.
func (e *engine) Write(p []byte) (int, error) {
	e.mu.Lock()
	conns := make([]*attachConn, 0, len(e.conns))
	for c := range e.conns {
		conns = append(conns, c)
	}
	e.mu.Unlock()
	for _, c := range conns {
		if _, err := c.w.Write(p); err != nil {
			_ = c.Close()
		}
	}
	return len(p), nil
}

func (e *engine) dial(ctx context.Context) (Conn, error) {
	r, w := io.Pipe()
	c := &attachConn{e: e, r: r, w: w}
	e.mu.Lock()
	e.conns[c] = true
	e.mu.Unlock()
	return c, nil
}

func startServer(t *testing.T) (*engine, *Server) { return startServerB(t) }

func startServerB(t testing.TB) (*engine, *Server) {
	t.Helper()
	return startServerOpts(t, ServerOptions{Dirs: []string{t.TempDir()}})
}

// startServerOpts serves opts (In, Out and Logf filled in) on a fresh
// engine until the test ends.
func startServerOpts(t testing.TB, opts ServerOptions) (*engine, *Server) {
	t.Helper()
	e := &engine{conns: map[*attachConn]bool{}}
	e.inR, e.inW = io.Pipe()
	opts.In, opts.Out, opts.Logf = e.inR, e, t.Logf
	srv := NewServer(opts)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = srv.Serve(ctx); close(done) }()
	t.Cleanup(func() {
		srv.Shutdown(500 * time.Millisecond)
		cancel()
		_ = e.inW.Close()
		<-done
	})
	return e, srv
}

func newTestClient(t *testing.T, e *engine) *Client { return newClientB(t, e) }

func newClientB(t testing.TB, e *engine) *Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := NewClient(ctx, ClientOptions{Dial: e.dial, Logf: t.Logf})
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func hostEnv() []string { return []string{"PATH=" + os.Getenv("PATH"), "HOME=/tmp"} }

// collect reads stdout and stderr fully and waits.
func collect(t *testing.T, p *Proc) (string, string, int, string) {
	t.Helper()
	var out, errb bytes.Buffer
	var wg sync.WaitGroup
	if p.Stderr() != nil {
		wg.Add(1)
		go func() { defer wg.Done(); _, _ = io.Copy(&errb, p.Stderr()) }()
	}
	_, _ = io.Copy(&out, p.Stdout())
	wg.Wait()
	code, sig, err := p.Wait(ctxT(t))
	if err != nil {
		t.Fatalf("wait: %v", err)
	}
	return out.String(), errb.String(), code, sig
}

func shell(t *testing.T, c *Client, script string, mod func(*OpenSpec)) *Proc {
	t.Helper()
	spec := OpenSpec{Argv: []string{"sh", "-c", script}, Env: hostEnv()}
	if mod != nil {
		mod(&spec)
	}
	p, err := c.Open(ctxT(t), spec)
	if err != nil {
		t.Fatalf("open %q: %v", script, err)
	}
	return p
}

func TestOutputExitAndTag(t *testing.T) {
	e, _ := startServer(t)
	c := newTestClient(t, e)
	p := shell(t, c, `echo out; echo err >&2; echo "tag=$SANDBOXCTL_RUN"; exit 7`, nil)
	out, errs, code, sig := collect(t, p)
	if code != 7 || sig != "" || errs != "err\n" || out != "out\ntag="+p.ID()+"\n" {
		t.Fatalf("got out %q err %q code %d sig %q", out, errs, code, sig)
	}
}

// TestOpenRefusalIsTyped: a program the server does not find is refused
// as api.ErrCommandNotFound (and ErrRefused), which callers branch on
// rather than on the message; a working directory that cannot be used is
// refused, and is not that.
func TestOpenRefusalIsTyped(t *testing.T) {
	e, _ := startServer(t)
	c := newTestClient(t, e)
	_, err := c.Open(ctxT(t), OpenSpec{Argv: []string{"no-such-command-xyz"}, Env: hostEnv()})
	if !errors.Is(err, api.ErrCommandNotFound) || !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "no-such-command-xyz: "+api.CommandNotFound) {
		t.Fatalf("open of a missing program: %v", err)
	}
	_, err = c.Open(ctxT(t), OpenSpec{Argv: []string{"true"}, Env: hostEnv(), Dir: "/nonexistent/dir"})
	if !errors.Is(err, ErrRefused) || errors.Is(err, api.ErrCommandNotFound) {
		t.Fatalf("open in a missing directory: %v", err)
	}
}

func TestConcurrentCommandsOneConnection(t *testing.T) {
	e, _ := startServer(t)
	c := newTestClient(t, e)
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for i := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := c.Open(ctxT(t), OpenSpec{Argv: []string{"sh", "-c", fmt.Sprintf("sleep 0.1; echo %d; exit %d", i, i%5)}, Env: hostEnv()})
			if err != nil {
				errs <- err
				return
			}
			out, _ := io.ReadAll(p.Stdout())
			_, _ = io.ReadAll(p.Stderr())
			code, _, err := p.Wait(ctxT(t))
			if err != nil || code != i%5 || string(out) != fmt.Sprintf("%d\n", i) {
				errs <- fmt.Errorf("cmd %d: out %q code %d err %v", i, out, code, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestStdinAndEOF(t *testing.T) {
	e, _ := startServer(t)
	c := newTestClient(t, e)
	p := shell(t, c, `cat; echo END`, func(s *OpenSpec) { s.KeepStdin = true })
	if _, err := p.Write([]byte("hello\n")); err != nil {
		t.Fatal(err)
	}
	if err := p.CloseStdin(); err != nil {
		t.Fatal(err)
	}
	out, _, code, _ := collect(t, p)
	if out != "hello\nEND\n" || code != 0 {
		t.Fatalf("out %q code %d", out, code)
	}
	// Without stdin the command reads EOF at once.
	p = shell(t, c, `cat; echo DONE`, nil)
	if out, _, _, _ := collect(t, p); out != "DONE\n" {
		t.Fatalf("no-stdin cat: %q", out)
	}
}

func TestPTYSizeAndResize(t *testing.T) {
	e, _ := startServer(t)
	c := newTestClient(t, e)
	p := shell(t, c, `stty size; tty >/dev/null && echo ISTTY; read x; stty size`, func(s *OpenSpec) { s.PTY, s.Cols, s.Rows = true, 120, 30 })
	var mu sync.Mutex
	var buf bytes.Buffer
	done := make(chan struct{})
	go func() {
		b := make([]byte, 4096)
		for {
			n, err := p.Stdout().Read(b)
			mu.Lock()
			buf.Write(b[:n])
			mu.Unlock()
			if err != nil {
				close(done)
				return
			}
		}
	}()
	waitFor(t, func() bool { mu.Lock(); defer mu.Unlock(); return strings.Contains(buf.String(), "ISTTY") }, "first stty")
	if err := p.Resize(ctxT(t), 100, 40); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	if _, err := p.Write([]byte("go\r")); err != nil {
		t.Fatal(err)
	}
	<-done
	code, _, _ := p.Wait(ctxT(t))
	s := buf.String()
	if !strings.Contains(s, "30 120") || !strings.Contains(s, "40 100") || code != 0 {
		t.Fatalf("pty output %q code %d", s, code)
	}
}

func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestKillTreeWithSetsidEscapee(t *testing.T) {
	e, _ := startServer(t)
	c := newTestClient(t, e)
	proof := filepath.Join(t.TempDir(), "PROOF")
	p := shell(t, c, fmt.Sprintf(`(setsid sh -c 'sleep 2; touch %s') & sleep 30`, proof), nil)
	time.Sleep(300 * time.Millisecond)
	start := time.Now()
	if err := p.Kill(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	_, _, code, sig := collect(t, p)
	if code != -1 || sig != "SIGTERM" {
		t.Fatalf("killed: code %d sig %q", code, sig)
	}
	if time.Since(start) > 10*time.Second { // far from sleep 30, far above the usual ~0.1 s
		t.Fatalf("kill took %s", time.Since(start))
	}
	time.Sleep(2500 * time.Millisecond)
	if _, err := os.Stat(proof); err == nil {
		t.Fatal("PROOF exists: the setsid child survived the kill")
	}
}

func TestReconnectKeepsOutput(t *testing.T) {
	e, _ := startServer(t)
	c := newTestClient(t, e)
	p := shell(t, c, `i=0; while [ $i -lt 30 ]; do echo line$i; i=$((i+1)); sleep 0.02; done`, nil)
	got := make(chan string, 1)
	go func() { b, _ := io.ReadAll(p.Stdout()); got <- string(b) }()
	time.Sleep(150 * time.Millisecond)
	c.CloseConn()
	time.Sleep(100 * time.Millisecond)
	c.CloseConn()
	out := <-got
	var want strings.Builder
	for i := range 30 {
		fmt.Fprintf(&want, "line%d\n", i)
	}
	if out != want.String() {
		t.Fatalf("output after reconnects:\n%q\nwant\n%q", out, want.String())
	}
	if code, _, err := p.Wait(ctxT(t)); code != 0 || err != nil {
		t.Fatalf("code %d err %v", code, err)
	}
}

func TestNewClientAdoptsSessions(t *testing.T) {
	e, _ := startServer(t)
	c1 := newTestClient(t, e)
	done := shell(t, c1, `echo finished-output; exit 3`, func(s *OpenSpec) { s.Meta = map[string]string{"name": "done"} })
	collect(t, done)
	running := shell(t, c1, `echo before; sleep 1; echo persisted`, nil)
	buf := make([]byte, 7)
	if _, err := io.ReadFull(running.Stdout(), buf); err != nil {
		t.Fatal(err)
	}
	// A second client (a restarted daemon) takes over.
	c2 := newTestClient(t, e)
	waitFor(t, func() bool { return c1.Err() != nil }, "first client superseded")
	list, err := c2.List(ctxT(t))
	if err != nil || len(list) != 2 {
		t.Fatalf("list: %+v %v", list, err)
	}
	var fin, run SessionInfo
	for _, s := range list {
		if s.ID == done.ID() {
			fin = s
		} else {
			run = s
		}
	}
	if fin.Running || fin.Exit == nil || fin.Exit.Code != 3 || fin.Meta["name"] != "done" {
		t.Fatalf("finished session: %+v", fin)
	}
	if !run.Running || run.ID != running.ID() {
		t.Fatalf("running session: %+v", run)
	}
	out, so, _, err := c2.Read(ctxT(t), fin.ID)
	if err != nil || string(out) != "finished-output\n" || so != int64(len(out)) {
		t.Fatalf("read: %q %v", out, err)
	}
	p, err := c2.Attach(ctxT(t), run, run.Stdout, run.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	rest, _, code, _ := collect(t, p)
	if rest != "persisted\n" || code != 0 {
		t.Fatalf("adopted: %q code %d", rest, code)
	}
	// Attach to a finished session replays all and reports the exit.
	p, err = c2.Attach(ctxT(t), fin, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if out, _, code, _ := collect(t, p); out != "finished-output\n" || code != 3 {
		t.Fatalf("replayed finished: %q %d", out, code)
	}
	if err := c2.Forget(ctxT(t), fin.ID); err != nil {
		t.Fatal(err)
	}
}

func TestInputWait(t *testing.T) {
	e, _ := startServer(t)
	c := newTestClient(t, e)
	p := shell(t, c, `echo ask; read x; echo "got $x"`, func(s *OpenSpec) { s.KeepStdin = true })
	select {
	case <-p.InputWaitChanged():
	case <-time.After(20 * time.Second):
		t.Fatal("no input wait reported")
	}
	if !p.InputWait() {
		t.Fatal("InputWait false after the change")
	}
	list, _ := c.List(ctxT(t))
	if len(list) != 1 || !list[0].InputWait {
		t.Fatalf("list: %+v", list)
	}
	if _, err := p.Write([]byte("yes\n")); err != nil {
		t.Fatal(err)
	}
	_ = p.CloseStdin()
	out, _, code, _ := collect(t, p)
	if out != "ask\ngot yes\n" || code != 0 || p.InputWait() {
		t.Fatalf("out %q code %d", out, code)
	}
	// A busy command is never waiting for input.
	q := shell(t, c, `sleep 0.6`, func(s *OpenSpec) { s.KeepStdin = true })
	collect(t, q)
	if q.InputWait() {
		t.Fatal("sleep reported as waiting for input")
	}
}

func TestLargeOutputFlowControl(t *testing.T) {
	e, _ := startServer(t)
	c := newTestClient(t, e)
	p := shell(t, c, `head -c 20000000 /dev/zero`, nil)
	// Read slowly at first: the server must stop at the window.
	time.Sleep(300 * time.Millisecond)
	if b := p.stdout.buffered(); b > DefaultWindow+64<<10 {
		t.Fatalf("client buffered %d bytes, over the window", b)
	}
	n, _ := io.Copy(io.Discard, p.Stdout())
	if n != 20000000 {
		t.Fatalf("got %d bytes", n)
	}
	if code, _, _ := p.Wait(ctxT(t)); code != 0 {
		t.Fatal(code)
	}
}

func TestOutlogCapAndReplay(t *testing.T) {
	l, err := newOutlog(t.TempDir(), 200)
	if err != nil {
		t.Fatal(err)
	}
	var all [2]bytes.Buffer
	for i := range 300 {
		s := byte(1 + i%2)
		d := []byte(fmt.Sprintf("%03d", i))
		all[s-1].Write(d)
		if err := l.append(s, d); err != nil {
			t.Fatal(err)
		}
	}
	if kept := l.counts[0][0] + l.counts[0][1] + l.counts[1][0] + l.counts[1][1]; kept > 400 || kept < 200 {
		t.Fatalf("log keeps %d bytes of output, want between cap and 2*cap (200)", kept)
	}
	var got [2]bytes.Buffer
	skipped, _ := l.replay([2]int64{}, func(s byte, d []byte) { got[s-1].Write(d) })
	if skipped != l.base {
		t.Fatalf("replay from 0 skipped %v, want the dropped %v", skipped, l.base)
	}
	for i := range 2 {
		if !strings.HasSuffix(all[i].String(), got[i].String()) || int64(all[i].Len()-got[i].Len()) != l.base[i] {
			t.Fatalf("stream %d: kept %q of %q base %d", i, got[i].String(), all[i].String(), l.base[i])
		}
	}
	got[0].Reset()
	_, _ = l.replay([2]int64{int64(all[0].Len() - 4), 1 << 30}, func(s byte, d []byte) { got[s-1].Write(d) })
	if got[0].String() != all[0].String()[all[0].Len()-4:] {
		t.Fatalf("replay from offset: %q", got[0].String())
	}
}

func TestExitWhileChildKeepsWriting(t *testing.T) {
	e, _ := startServer(t)
	c := newTestClient(t, e)
	p := shell(t, c, `(while :; do echo spam; sleep 0.01; done) & echo leader-done`, nil)
	go func() { _, _ = io.Copy(io.Discard, p.Stdout()) }()
	go func() { _, _ = io.Copy(io.Discard, p.Stderr()) }()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	code, _, err := p.Wait(ctx)
	if err != nil || code != 0 {
		t.Fatalf("exit not reported while a child writes on: %d %v", code, err)
	}
	// The child is part of the session's tree: kill it.
	if err := c.KillTree(ctxT(t), p.ID(), 100*time.Millisecond); err != nil {
		t.Fatal(err)
	}
}
