package nodeexec

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"

	"github.com/sandboxctl/sandboxctl/sessions/hostapi"
)

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestRoundTrip(t *testing.T) {
	g := newTestGateway(t, RegistryOptions{})
	wd := t.TempDir()
	startAgent(t, AgentOptions{GatewayURL: g.url, TLSFingerprint: g.fingerprint, Name: "alpha",
		Config: GuardConfig{Security: "full", Ask: "off"}, Workdir: wd})
	info := g.waitNode(t, "alpha")
	if info.Platform == "" || !strings.Contains(strings.Join(info.Capabilities, ","), CapSystemRun) || info.Approvals.Security != "full" {
		t.Errorf("node info %+v", info)
	}

	sub := filepath.Join(wd, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	rp, err := g.reg.Start(ctxT(t), "alpha", hostapi.StartSpec{
		Command: `echo out; echo err >&2; echo "$FOO"; pwd; exit 3`, Env: map[string]string{"FOO": "bar"}, Dir: "sub",
	})
	if err != nil {
		t.Fatal(err)
	}
	c := collect(rp)
	code, sig, err := runWait(t, rp)
	out, errOut := c.wait()
	if code != 3 || sig != "" || err != nil {
		t.Errorf("Wait = %d %q %v", code, sig, err)
	}
	if out != "out\nbar\n"+sub+"\n" || errOut != "err\n" {
		t.Errorf("stdout %q stderr %q", out, errOut)
	}
	if rp.Cwd() != sub || rp.PID() <= 0 {
		t.Errorf("cwd %q pid %d", rp.Cwd(), rp.PID())
	}

	// A directory missing on the node falls back with a warning.
	rp, err = g.reg.Start(ctxT(t), "alpha", hostapi.StartSpec{Command: "pwd", Dir: "/does/not/exist"})
	if err != nil {
		t.Fatal(err)
	}
	c = collect(rp)
	_, _, _ = runWait(t, rp)
	if out, _ := c.wait(); out != wd+"\n" || len(rp.Warnings()) != 1 {
		t.Errorf("fallback: out %q warnings %q", out, rp.Warnings())
	}

	// Unknown node.
	if _, err := g.reg.Start(ctxT(t), "nobody", hostapi.StartSpec{Command: "true"}); !errors.Is(err, ErrNodeUnknown) {
		t.Errorf("unknown node: %v", err)
	}
	// which
	paths, err := g.reg.Which(ctxT(t), "alpha", []string{"sh", "no-such-program-x"})
	if err != nil || paths["sh"] == "" || paths["no-such-program-x"] != "" {
		t.Errorf("which = %v, %v", paths, err)
	}
}

func TestStdinResizeKill(t *testing.T) {
	g := newTestGateway(t, RegistryOptions{})
	startAgent(t, AgentOptions{GatewayURL: g.url, TLSFingerprint: g.fingerprint, Name: "alpha",
		Config: GuardConfig{Security: "full", Ask: "off"}})
	g.waitNode(t, "alpha")

	rp, err := g.reg.Start(ctxT(t), "alpha", hostapi.StartSpec{Command: "cat; echo done", KeepStdin: true})
	if err != nil {
		t.Fatal(err)
	}
	c := collect(rp)
	if _, err := rp.Write([]byte("hello\n")); err != nil {
		t.Fatal(err)
	}
	if err := rp.CloseStdin(); err != nil {
		t.Fatal(err)
	}
	if code, _, err := runWait(t, rp); code != 0 || err != nil {
		t.Errorf("cat: %d %v", code, err)
	}
	if out, _ := c.wait(); out != "hello\ndone\n" {
		t.Errorf("cat output %q", out)
	}
	if _, err := rp.Write([]byte("x")); err == nil {
		t.Error("write after exit succeeded")
	}

	// Without KeepStdin cat sees EOF at once.
	rp, err = g.reg.Start(ctxT(t), "alpha", hostapi.StartSpec{Command: "cat; echo eof"})
	if err != nil {
		t.Fatal(err)
	}
	c = collect(rp)
	_, _, _ = runWait(t, rp)
	if out, _ := c.wait(); out != "eof\n" {
		t.Errorf("no-stdin cat: %q", out)
	}

	// PTY with resize.
	rp, err = g.reg.Start(ctxT(t), "alpha", hostapi.StartSpec{Command: `stty size; read x; stty size`, PTY: true, Cols: 100, Rows: 40})
	if err != nil {
		t.Fatal(err)
	}
	if rp.Stderr() != nil {
		t.Error("PTY run has a stderr stream")
	}
	c = collect(rp)
	waitFor(t, 10*time.Second, "first stty", func() bool { return strings.Contains(c.Stdout(), "40 100") })
	if err := rp.Resize(ctxT(t), 90, 33); err != nil {
		t.Fatal(err)
	}
	if _, err := rp.Write([]byte("\r")); err != nil {
		t.Fatal(err)
	}
	_, _, _ = runWait(t, rp)
	if out, _ := c.wait(); !strings.Contains(out, "33 90") {
		t.Errorf("PTY output %q", out)
	}

	// Kill ends the tree, including a child in its own session.
	m := marker(t)
	pidFile := filepath.Join(t.TempDir(), "pid")
	rp, err = g.reg.Start(ctxT(t), "alpha", hostapi.StartSpec{
		Command: "setsid sh -c 'echo $$ > " + pidFile + "; sleep 2; touch " + m + "' & sleep 30",
	})
	if err != nil {
		t.Fatal(err)
	}
	c = collect(rp)
	waitFor(t, 10*time.Second, "pid file", func() bool { b, _ := os.ReadFile(pidFile); return len(b) > 1 })
	if err := rp.Kill(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	code, sig, err := runWait(t, rp)
	c.wait()
	if sig == "" || code != -1 || err != nil {
		t.Errorf("killed run: %d %q %v", code, sig, err)
	}
	b, _ := os.ReadFile(pidFile)
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	waitFor(t, 5*time.Second, "setsid child gone", func() bool { return syscall.Kill(pid, 0) != nil })
	time.Sleep(2500 * time.Millisecond)
	if exists(m) {
		t.Error("marker created after kill")
	}
}

func TestNodeRefusals(t *testing.T) {
	g := newTestGateway(t, RegistryOptions{})
	startAgent(t, AgentOptions{GatewayURL: g.url, TLSFingerprint: g.fingerprint, Name: "denier",
		Config: GuardConfig{Security: "deny"}})
	startAgent(t, AgentOptions{GatewayURL: g.url, TLSFingerprint: g.fingerprint, Name: "strict",
		Config: GuardConfig{Security: "allowlist", Ask: "off"}})
	startAgent(t, AgentOptions{GatewayURL: g.url, TLSFingerprint: g.fingerprint, Name: "asker",
		Config: GuardConfig{Security: "allowlist", Ask: "on-miss"}})
	startAgent(t, AgentOptions{GatewayURL: g.url, TLSFingerprint: g.fingerprint, Name: "open",
		Config: GuardConfig{Security: "full", Ask: "off"}})
	for _, n := range []string{"denier", "strict", "asker", "open"} {
		g.waitNode(t, n)
	}
	ctx := ctxT(t)

	t.Run("deny mode", func(t *testing.T) {
		m := marker(t)
		_, err := g.reg.Start(ctx, "denier", hostapi.StartSpec{Command: "touch " + m, Security: "full", Ask: "off"})
		var de *DeniedError
		if !errors.As(err, &de) || !errors.Is(err, ErrDenied) || !strings.Contains(de.Reason, "deny") {
			t.Fatalf("err = %v", err)
		}
		if exists(m) {
			t.Error("marker exists")
		}
	})
	t.Run("allowlist miss while gateway is full", func(t *testing.T) {
		m := marker(t)
		_, err := g.reg.Start(ctx, "strict", hostapi.StartSpec{Command: "touch " + m, Security: "full", Ask: "off"})
		if !errors.Is(err, ErrDenied) {
			t.Fatalf("err = %v", err)
		}
		if exists(m) {
			t.Error("marker exists")
		}
	})
	t.Run("PATH override", func(t *testing.T) {
		m := marker(t)
		_, err := g.reg.Start(ctx, "open", hostapi.StartSpec{Command: "touch " + m, Env: map[string]string{"PATH": "/tmp"}})
		if !errors.Is(err, ErrDenied) || !strings.Contains(err.Error(), "PATH") {
			t.Fatalf("err = %v", err)
		}
		_, err = g.reg.Start(ctx, "open", hostapi.StartSpec{Command: "touch " + m, Env: map[string]string{"LD_PRELOAD": "/tmp/x.so"}})
		if !errors.Is(err, ErrDenied) {
			t.Fatalf("LD_PRELOAD: err = %v", err)
		}
		if exists(m) {
			t.Error("marker exists")
		}
	})
	t.Run("rawCommand differs from argv", func(t *testing.T) {
		m := marker(t)
		e, err := g.reg.lookup("open")
		if err != nil {
			t.Fatal(err)
		}
		for _, raw := range []string{"echo harmless", "touch " + m + " ", "'touch' " + m + "x"} {
			p := RunParams{Argv: []string{"/bin/sh", "-c", "touch " + m}, RawCommand: raw, RunID: NewID(), IdempotencyKey: NewID()}
			_, err = g.reg.startParams(ctx, e, p)
			if !errors.Is(err, ErrDenied) || !strings.Contains(err.Error(), "rawCommand") {
				t.Fatalf("raw %q: err = %v", raw, err)
			}
		}
		p := RunParams{Argv: []string{"touch", m}, RawCommand: "touch /elsewhere", RunID: NewID(), IdempotencyKey: NewID()}
		if _, err = g.reg.startParams(ctx, e, p); !errors.Is(err, ErrDenied) {
			t.Fatalf("plain argv: err = %v", err)
		}
		if exists(m) {
			t.Error("marker exists")
		}
	})
	t.Run("forged approved flag", func(t *testing.T) {
		m := marker(t)
		yes := true
		for _, node := range []string{"strict", "asker"} {
			e, err := g.reg.lookup(node)
			if err != nil {
				t.Fatal(err)
			}
			p := RunParams{Argv: []string{"/bin/sh", "-c", "touch " + m}, RawCommand: "touch " + m,
				RunID: NewID(), IdempotencyKey: NewID(), Approved: &yes, ApprovalDecision: "allow-always", Security: "full"}
			_, err = g.reg.startParams(ctx, e, p)
			if !errors.Is(err, ErrDenied) && !errors.Is(err, ErrApprovalPending) {
				t.Fatalf("%s: err = %v", node, err)
			}
		}
		if exists(m) {
			t.Error("marker exists")
		}
	})
	t.Run("approval on the node resolved from the gateway", func(t *testing.T) {
		m := marker(t)
		spec := hostapi.StartSpec{Command: "touch " + m, AgentID: "agent-1", Security: "full"}
		_, err := g.reg.Start(ctx, "asker", spec)
		var pe *ApprovalPendingError
		if !errors.As(err, &pe) || pe.Approval.ID == "" || pe.Details().Host != "node" {
			t.Fatalf("err = %v", err)
		}
		// A repeat while pending reuses the request.
		_, err = g.reg.Start(ctx, "asker", spec)
		var pe2 *ApprovalPendingError
		if !errors.As(err, &pe2) || pe2.Approval.ID != pe.Approval.ID {
			t.Fatalf("repeat: %v", err)
		}
		list, err := g.reg.Approvals(ctx)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, a := range list {
			if a.ID == pe.Approval.ID && a.Status == "pending" && a.Node == "asker" {
				found = true
			}
		}
		if !found {
			t.Fatalf("approval not listed: %+v", list)
		}
		if err := g.reg.ResolveApproval(ctx, "", "no-such-id", "allow-once"); !errors.Is(err, ErrApprovalUnknown) {
			t.Errorf("unknown id: %v", err)
		}
		if exists(m) {
			t.Fatal("marker exists before approval")
		}
		if err := g.reg.ResolveApproval(ctx, "", pe.Approval.Slug, "allow-once"); err != nil {
			t.Fatal(err)
		}
		rp, err := g.reg.Start(ctx, "asker", spec)
		if err != nil {
			t.Fatalf("after allow-once: %v", err)
		}
		_, _ = collect(rp), 0
		if code, _, err := runWait(t, rp); code != 0 || err != nil || !exists(m) {
			t.Fatalf("approved run: %d %v exists=%v", code, err, exists(m))
		}
		// allow-once is used up; a different env is a different request.
		if _, err := g.reg.Start(ctx, "asker", spec); !errors.Is(err, ErrApprovalPending) {
			t.Errorf("second run after allow-once: %v", err)
		}
	})
}

func TestAuthAndTLS(t *testing.T) {
	g := newTestGateway(t, RegistryOptions{})
	run := func(o AgentOptions) error {
		o.StateDir = t.TempDir()
		o.Shell = "/bin/sh"
		o.Logf = t.Logf
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		return RunAgent(ctx, o)
	}
	if err := run(AgentOptions{GatewayURL: g.url, Token: "wrong", TLSFingerprint: g.fingerprint, Name: "x"}); !errors.Is(err, ErrUnauthorized) {
		t.Errorf("bad token: %v", err)
	}
	bad := strings.Repeat("ab", 32)
	if err := run(AgentOptions{GatewayURL: g.url, Token: testToken, TLSFingerprint: bad, Name: "x"}); !errors.Is(err, ErrFingerprintMismatch) {
		t.Errorf("wrong fingerprint: %v", err)
	}
	if err := run(AgentOptions{GatewayURL: g.url, Token: testToken, Name: "x"}); err == nil || !permanent(err) {
		t.Errorf("unpinned self-signed: %v", err)
	}
	if err := run(AgentOptions{GatewayURL: "ws://192.0.2.1:1/", Token: testToken, Name: "x"}); !errors.Is(err, ErrInsecureURL) {
		t.Errorf("plain remote: %v", err)
	}
	if len(g.reg.List()) != 0 {
		t.Errorf("nodes registered: %+v", g.reg.List())
	}

	// No token: 401 before any WebSocket; no hello is ever read.
	client := g.srv.Client()
	resp, err := client.Get(g.srv.URL + ConnectPath)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("no token: HTTP %d", resp.StatusCode)
	}
	_, resp, err = websocket.Dial(ctxT(t), g.url, &websocket.DialOptions{HTTPClient: client,
		HTTPHeader: http.Header{"Authorization": {"Bearer " + testToken + "x"}}})
	if err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("bad token dial: %v", err)
	}
}

func TestFrameLimits(t *testing.T) {
	g := newTestGateway(t, RegistryOptions{})
	dial := func() *websocket.Conn {
		c, _, err := websocket.Dial(ctxT(t), g.url, &websocket.DialOptions{HTTPClient: g.srv.Client(),
			HTTPHeader: http.Header{"Authorization": {"Bearer " + testToken}}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.CloseNow() })
		return c
	}
	// An oversized first frame closes the link.
	c := dial()
	big := strings.Repeat("x", MaxFrameBytes+10)
	_ = wsjson.Write(ctxT(t), c, &frame{Type: frameHello, Hello: &Hello{Protocol: 1, NodeID: "n1", Name: big}})
	if _, _, err := c.Read(ctxT(t)); err == nil {
		t.Error("oversized hello: link stayed open")
	}
	// A hello that breaks the field limits is refused.
	c = dial()
	_ = wsjson.Write(ctxT(t), c, &frame{Type: frameHello, Hello: &Hello{Protocol: 1, NodeID: "bad id!", Name: "n"}})
	if _, _, err := c.Read(ctxT(t)); websocket.CloseStatus(err) != websocket.StatusPolicyViolation {
		t.Errorf("bad hello: %v", err)
	}
	// A frame other than hello first is refused.
	c = dial()
	_ = wsjson.Write(ctxT(t), c, &frame{Type: frameOutput, RunID: "r", Data: []byte("x")})
	if _, _, err := c.Read(ctxT(t)); websocket.CloseStatus(err) != websocket.StatusPolicyViolation {
		t.Errorf("non-hello first: %v", err)
	}
	if n := len(g.reg.List()); n != 0 {
		t.Errorf("%d nodes registered", n)
	}
}

func TestIdempotentRetry(t *testing.T) {
	g := newTestGateway(t, RegistryOptions{})
	startAgent(t, AgentOptions{GatewayURL: g.url, TLSFingerprint: g.fingerprint, Name: "alpha",
		Config: GuardConfig{Security: "full", Ask: "off"}})
	g.waitNode(t, "alpha")
	e, err := g.reg.lookup("alpha")
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "count")
	cmd := "echo run >> " + f + "; sleep 0.3"
	p := RunParams{Argv: []string{"/bin/sh", "-c", cmd}, RawCommand: cmd, RunID: NewID(), IdempotencyKey: NewID()}
	rp, err := g.reg.startParams(ctxT(t), e, p)
	if err != nil {
		t.Fatal(err)
	}
	c := collect(rp)
	l, _ := g.reg.currentLink(e)
	for range 3 {
		if err := l.send(&frame{Type: frameRun, RunID: p.RunID, Run: &p}); err != nil {
			t.Fatal(err)
		}
	}
	_, _, _ = runWait(t, rp)
	c.wait()
	// Retried after the run ended: still nothing new.
	if err := l.send(&frame{Type: frameRun, RunID: p.RunID, Run: &p}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	b, _ := os.ReadFile(f)
	if string(b) != "run\n" {
		t.Errorf("the command ran %d times", strings.Count(string(b), "run"))
	}
}

// slowGuard delays every decision so a test can drop the link meanwhile.
type slowGuard struct {
	allowAll
	delay time.Duration
}

func (g slowGuard) Check(ctx context.Context, req GuardRequest) (GuardVerdict, error) {
	time.Sleep(g.delay)
	return g.allowAll.Check(ctx, req)
}

// TestStartRetriesAcrossLinkDrop: the link drops after the gateway sent
// system.run and before the node answered. Start waits for the node to come
// back, resends under the same idempotency key, and the command runs once.
func TestStartRetriesAcrossLinkDrop(t *testing.T) {
	g := newTestGateway(t, RegistryOptions{LinkGrace: 5 * time.Second})
	px := newLinkProxy(t, strings.TrimPrefix(g.srv.URL, "https://"))
	startAgent(t, AgentOptions{GatewayURL: px.url(), TLSFingerprint: g.fingerprint, Name: "slow",
		Guard: slowGuard{delay: 600 * time.Millisecond}})
	g.waitNode(t, "slow")
	count := filepath.Join(t.TempDir(), "count")
	type result struct {
		rp  *RemoteProcess
		err error
	}
	done := make(chan result, 1)
	go func() {
		rp, err := g.reg.Start(ctxT(t), "slow", hostapi.StartSpec{Command: "echo once >> " + count + "; echo out"})
		done <- result{rp, err}
	}()
	time.Sleep(200 * time.Millisecond) // the node is inside its guard now
	px.cut()
	time.Sleep(300 * time.Millisecond)
	px.unblock()
	res := <-done
	if res.err != nil {
		t.Fatalf("Start across a link drop: %v", res.err)
	}
	c := collect(res.rp)
	if code, _, err := runWait(t, res.rp); code != 0 || err != nil {
		t.Fatalf("Wait: %d %v", code, err)
	}
	if out, _ := c.wait(); out != "out\n" {
		t.Errorf("output %q", out)
	}
	time.Sleep(300 * time.Millisecond)
	if b, _ := os.ReadFile(count); string(b) != "once\n" {
		t.Errorf("the command ran %d times", strings.Count(string(b), "once"))
	}
}
