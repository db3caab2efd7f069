package nodeexec

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxctl/sandboxctl/internal/testbuild"
	"github.com/sandboxctl/sandboxctl/sessions/hostapi"
)

// buildTestNode builds nodeexec/internal/testnode into dir.
func buildTestNode(t testing.TB, dir string) string {
	t.Helper()
	bin, err := testbuild.Package(dir, "nodeexec/internal/testnode")
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// nodeProc is a node agent running as a separate process.
type nodeProc struct {
	name   string
	cmd    *exec.Cmd
	mu     sync.Mutex
	stdout []string
	stderr bytes.Buffer
	exited chan struct{}
	err    error
}

func startNodeProc(t testing.TB, bin, name string, args ...string) *nodeProc {
	t.Helper()
	return startNodeProcIn(t, "", bin, name, args...)
}

// startNodeProcIn runs the node agent inside network namespace ns ("" =
// this one).
func startNodeProcIn(t testing.TB, ns, bin, name string, args ...string) *nodeProc {
	t.Helper()
	np := &nodeProc{name: name, exited: make(chan struct{})}
	argv := append([]string{bin, "-name", name, "-state", t.TempDir()}, args...)
	if ns != "" {
		argv = append([]string{"ip", "netns", "exec", ns}, argv...)
	}
	np.cmd = exec.Command(argv[0], argv[1:]...)
	np.cmd.Stderr = &lockedWriter{mu: &np.mu, w: &np.stderr}
	out, err := np.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := np.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			np.mu.Lock()
			np.stdout = append(np.stdout, sc.Text())
			np.mu.Unlock()
		}
		np.err = np.cmd.Wait()
		close(np.exited)
	}()
	t.Cleanup(func() {
		_ = np.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-np.exited:
		case <-time.After(30 * time.Second):
			_ = np.cmd.Process.Kill()
			<-np.exited
			t.Errorf("node %s did not stop on SIGTERM", name)
		}
		if t.Failed() {
			np.mu.Lock()
			t.Logf("node %s stderr:\n%s", name, np.stderr.String())
			np.mu.Unlock()
		}
	})
	return np
}

func (np *nodeProc) output() string {
	np.mu.Lock()
	defer np.mu.Unlock()
	return strings.Join(np.stdout, "\n")
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// linkProxy forwards TCP to the gateway so a test can cut a node's link.
type linkProxy struct {
	ln      net.Listener
	target  string
	mu      sync.Mutex
	conns   []net.Conn
	blocked bool
	wg      sync.WaitGroup
}

func newLinkProxy(t testing.TB, target string) *linkProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &linkProxy{ln: ln, target: target}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(func() {
		_ = ln.Close()
		p.cut()
		p.wg.Wait()
	})
	return p
}

func (p *linkProxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.blocked {
			p.mu.Unlock()
			_ = c.Close()
			continue
		}
		d, err := net.Dial("tcp", p.target)
		if err != nil {
			p.mu.Unlock()
			_ = c.Close()
			continue
		}
		p.conns = append(p.conns, c, d)
		p.wg.Add(2)
		p.mu.Unlock()
		pipe := func(dst, src net.Conn) {
			defer p.wg.Done()
			_, _ = io.Copy(dst, src)
			_ = dst.Close()
			_ = src.Close()
		}
		go pipe(c, d)
		go pipe(d, c)
	}
}

// cut drops every proxied connection and refuses new ones until unblock.
func (p *linkProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.blocked = true
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
}

func (p *linkProxy) unblock() {
	p.mu.Lock()
	p.blocked = false
	p.mu.Unlock()
}

func (p *linkProxy) url() string { return "wss://" + p.ln.Addr().String() + ConnectPath }

func alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	if err := syscall.Kill(pid, 0); err != nil {
		return false
	}
	// A zombie still answers kill(0); check its state.
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z'
	}
	return true
}

// TestMultiProcess runs a gateway Registry in this process and node agents
// as separate processes (built from internal/testnode): runs, refusals with
// marker files, bad token and fingerprint, and a link cut mid-run.
func TestMultiProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts node agent processes")
	}
	bin := buildTestNode(t, t.TempDir())
	const grace = 2 * time.Second
	g := newTestGateway(t, RegistryOptions{LinkGrace: grace, PingInterval: time.Second})
	px := newLinkProxy(t, strings.TrimPrefix(g.srv.URL, "https://"))
	common := []string{"-token", testToken, "-tls-fingerprint", g.fingerprint, "-link-grace", grace.String(), "-ping", "1s", "-kill-grace", "500ms"}
	startNodeProc(t, bin, "alpha", append([]string{"-gateway", px.url(), "-security", "full", "-ask", "off"}, common...)...)
	startNodeProc(t, bin, "beta", append([]string{"-gateway", g.url, "-security", "allowlist", "-ask", "on-miss"}, common...)...)
	startNodeProc(t, bin, "gamma", append([]string{"-gateway", g.url, "-security", "deny"}, common...)...)
	for _, n := range []string{"alpha", "beta", "gamma"} {
		info := g.waitNode(t, n)
		if info.Platform != runtime.GOOS+"/"+runtime.GOARCH || len(info.Capabilities) < 2 {
			t.Errorf("node %s: %+v", n, info)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	t.Run("run, stdin, kill", func(t *testing.T) {
		rp, err := g.reg.Start(ctx, "alpha", hostapi.StartSpec{Command: "read l; echo got:$l; echo e >&2; exit 4", KeepStdin: true})
		if err != nil {
			t.Fatal(err)
		}
		c := collect(rp)
		if _, err := rp.Write([]byte("line\n")); err != nil {
			t.Fatal(err)
		}
		code, _, err := runWait(t, rp)
		out, errOut := c.wait()
		if code != 4 || err != nil || out != "got:line\n" || errOut != "e\n" {
			t.Errorf("run: code %d err %v out %q stderr %q", code, err, out, errOut)
		}
		rp, err = g.reg.Start(ctx, "alpha", hostapi.StartSpec{Command: "sleep 60"})
		if err != nil {
			t.Fatal(err)
		}
		c = collect(rp)
		pid := rp.PID()
		if !alive(pid) {
			t.Fatalf("pid %d not alive", pid)
		}
		if err := rp.Kill(ctx); err != nil {
			t.Fatal(err)
		}
		_, sig, _ := runWait(t, rp)
		c.wait()
		if sig == "" || alive(pid) {
			t.Errorf("after kill: signal %q alive %v", sig, alive(pid))
		}
	})

	t.Run("refusals", func(t *testing.T) {
		m := marker(t)
		touch := "touch " + m
		// deny mode
		if _, err := g.reg.Start(ctx, "gamma", hostapi.StartSpec{Command: touch, Security: "full", Ask: "off"}); !errors.Is(err, ErrDenied) {
			t.Errorf("deny mode: %v", err)
		}
		// allowlist miss on the node while the gateway is full: approval
		// pending on the node, nothing runs; a human's deny sticks.
		_, err := g.reg.Start(ctx, "beta", hostapi.StartSpec{Command: touch, Security: "full", Ask: "off", AgentID: "a1"})
		var pe *ApprovalPendingError
		if !errors.As(err, &pe) {
			t.Fatalf("allowlist miss: %v", err)
		}
		if err := g.reg.ResolveApproval(ctx, "beta", pe.Approval.ID, "deny"); err != nil {
			t.Fatal(err)
		}
		if _, err := g.reg.Start(ctx, "beta", hostapi.StartSpec{Command: touch, Security: "full", AgentID: "a1"}); !errors.Is(err, ErrDenied) {
			t.Errorf("after a human deny: %v", err)
		}
		// forged approved: true
		yes := true
		for _, node := range []string{"beta", "gamma"} {
			e, err := g.reg.lookup(node)
			if err != nil {
				t.Fatal(err)
			}
			_, err = g.reg.startParams(ctx, e, RunParams{Argv: []string{"/bin/sh", "-c", touch}, RawCommand: touch,
				RunID: NewID(), IdempotencyKey: NewID(), Approved: &yes, ApprovalDecision: "allow-once", Security: "full", AgentID: "a2"})
			if !errors.Is(err, ErrDenied) && !errors.Is(err, ErrApprovalPending) {
				t.Errorf("forged approved on %s: %v", node, err)
			}
		}
		// rawCommand that differs from argv, on a node in full mode.
		e, err := g.reg.lookup("alpha")
		if err != nil {
			t.Fatal(err)
		}
		_, err = g.reg.startParams(ctx, e, RunParams{Argv: []string{"/bin/sh", "-c", touch}, RawCommand: "echo harmless",
			RunID: NewID(), IdempotencyKey: NewID()})
		if !errors.Is(err, ErrDenied) || !strings.Contains(err.Error(), "rawCommand") {
			t.Errorf("rawCommand mismatch: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
		if exists(m) {
			t.Error("a refused command ran: marker exists")
		}
	})

	t.Run("bad token and wrong fingerprint", func(t *testing.T) {
		bad := startNodeProc(t, bin, "intruder", "-gateway", g.url, "-token", "not-the-token", "-tls-fingerprint", g.fingerprint)
		pinned := startNodeProc(t, bin, "mitm", "-gateway", g.url, "-token", testToken, "-tls-fingerprint", strings.Repeat("0", 64))
		for _, np := range []*nodeProc{bad, pinned} {
			select {
			case <-np.exited:
			case <-time.After(20 * time.Second):
				t.Fatalf("%s did not give up", np.name)
			}
		}
		if !strings.Contains(bad.output(), "refused the node token") || !strings.Contains(pinned.output(), "fingerprint") {
			t.Errorf("outputs: %q / %q", bad.output(), pinned.output())
		}
		for _, n := range g.reg.List() {
			if n.Name == "intruder" || n.Name == "mitm" {
				t.Errorf("refused node listed: %+v", n)
			}
		}
	})

	t.Run("short cut keeps the run", func(t *testing.T) {
		rp, err := g.reg.Start(ctx, "alpha", hostapi.StartSpec{Command: "sleep 1.5; echo finished"})
		if err != nil {
			t.Fatal(err)
		}
		c := collect(rp)
		time.Sleep(200 * time.Millisecond)
		px.cut()
		waitFor(t, 5*time.Second, "alpha offline", func() bool {
			for _, n := range g.reg.List() {
				if n.Name == "alpha" {
					return !n.Connected
				}
			}
			return false
		})
		px.unblock()
		info := g.waitNode(t, "alpha")
		reported := false
		for _, rs := range info.Reported {
			reported = reported || (rs.RunID == rp.RunID() && rs.Running)
		}
		if !reported {
			t.Errorf("reconnected node did not report run %s: %+v", rp.RunID(), info.Reported)
		}
		code, _, err := runWait(t, rp)
		out, _ := c.wait()
		if code != 0 || err != nil || out != "finished\n" {
			t.Errorf("after reconnect: %d %v %q", code, err, out)
		}
	})

	t.Run("link lost mid-run", func(t *testing.T) {
		m := marker(t)
		pidFile := filepath.Join(t.TempDir(), "pid")
		rp, err := g.reg.Start(ctx, "alpha", hostapi.StartSpec{
			Command: "sh -c 'echo $$ > " + pidFile + "; sleep 5; touch " + m + "' & echo started; wait",
		})
		if err != nil {
			t.Fatal(err)
		}
		c := collect(rp)
		waitFor(t, 10*time.Second, "started", func() bool {
			b, _ := os.ReadFile(pidFile)
			return strings.Contains(c.Stdout(), "started") && len(b) > 1
		})
		b, _ := os.ReadFile(pidFile)
		child, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		shell := rp.PID()
		cutAt := time.Now()
		px.cut()
		code, sig, err := runWait(t, rp)
		c.wait()
		if !errors.Is(err, ErrLinkLost) || !strings.Contains(err.Error(), "the link to node alpha was lost") || code != -1 || sig != "" {
			t.Fatalf("Wait after cut = %d %q %v", code, sig, err)
		}
		if d := time.Since(cutAt); d < grace || d > grace+5*time.Second {
			t.Errorf("failed after %v, want about the grace %v", d, grace)
		}
		if _, err := g.reg.Start(ctx, "alpha", hostapi.StartSpec{Command: "true"}); !errors.Is(err, ErrNodeOffline) {
			t.Errorf("Start on the cut node: %v", err)
		}
		waitFor(t, 10*time.Second, "the node's process tree gone", func() bool { return !alive(shell) && !alive(child) })
		// The shell that would touch it is gone (waited for above).
		if exists(m) {
			t.Error("the killed tree's marker exists")
		}
		px.unblock()
		g.waitNode(t, "alpha")
	})
}

// TestNodeAgentSIGKILLLeavesNothingRunning is issue 20's node reproduction:
// a background `sleep 45` on a node whose agent is killed with SIGKILL. The
// gateway fails the run after the link grace; the next agent on the same
// state directory ends what the dead one left running before it connects.
func TestNodeAgentSIGKILLLeavesNothingRunning(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts node agent processes")
	}
	bin := buildTestNode(t, t.TempDir())
	const grace = time.Second
	g := newTestGateway(t, RegistryOptions{LinkGrace: grace, PingInterval: time.Second})
	state := t.TempDir()
	args := []string{"-gateway", g.url, "-security", "full", "-ask", "off", "-state", state,
		"-token", testToken, "-tls-fingerprint", g.fingerprint, "-link-grace", grace.String(), "-ping", "1s", "-kill-grace", "500ms"}
	first := startNodeProc(t, bin, "crashy", args...)
	g.waitNode(t, "crashy")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pidFile := filepath.Join(t.TempDir(), "pid")
	rp, err := g.reg.Start(ctx, "crashy", hostapi.StartSpec{Command: "echo $$ > " + pidFile + "; sleep 45"})
	if err != nil {
		t.Fatal(err)
	}
	c := collect(rp)
	var pid int
	waitFor(t, 10*time.Second, "the run's pid", func() bool {
		b, _ := os.ReadFile(pidFile)
		pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return pid > 0
	})
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })

	if err := first.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-first.exited
	if _, _, err := runWait(t, rp); !errors.Is(err, ErrLinkLost) {
		t.Fatalf("run on the killed node: %v", err)
	}
	c.wait()
	if !alive(pid) {
		t.Fatal("the run died with its agent: nothing left to end")
	}

	begin := time.Now()
	startNodeProc(t, bin, "crashy", args...)
	waitFor(t, 10*time.Second, "the dead agent's run ended", func() bool { return !alive(pid) })
	t.Logf("the new agent ended the orphaned run %v after its start", time.Since(begin).Round(time.Millisecond))
}

// TestSecondAgentOnStateDirRefused: a second node agent on a live agent's
// state directory stops with a clear error and ends none of its runs.
func TestSecondAgentOnStateDirRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts node agent processes")
	}
	bin := buildTestNode(t, t.TempDir())
	g := newTestGateway(t, RegistryOptions{LinkGrace: time.Second, PingInterval: time.Second})
	state := t.TempDir()
	args := []string{"-gateway", g.url, "-security", "full", "-ask", "off", "-state", state,
		"-token", testToken, "-tls-fingerprint", g.fingerprint}
	startNodeProc(t, bin, "first", args...)
	g.waitNode(t, "first")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rp, err := g.reg.Start(ctx, "first", hostapi.StartSpec{Command: "sleep 30"})
	if err != nil {
		t.Fatal(err)
	}
	c := collect(rp)
	defer func() { _ = rp.Kill(ctx); c.wait() }()
	second := startNodeProc(t, bin, "second", args...)
	select {
	case <-second.exited:
	case <-time.After(20 * time.Second):
		t.Fatal("a second agent on the same state directory kept running")
	}
	second.mu.Lock()
	stderr := second.stderr.String()
	second.mu.Unlock()
	if !strings.Contains(stderr, "another node agent runs on the state directory") {
		t.Fatalf("second agent's error: %q", stderr)
	}
	if !alive(rp.PID()) {
		t.Fatal("the second agent ended the first one's run")
	}
}
