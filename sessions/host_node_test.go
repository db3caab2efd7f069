package sessions_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxctl/sandboxctl/api"

	"github.com/sandboxctl/sandboxctl/hostexec"
	"github.com/sandboxctl/sandboxctl/internal/testbuild"
	"github.com/sandboxctl/sandboxctl/nodeexec"
	"github.com/sandboxctl/sandboxctl/sessions"
	"github.com/sandboxctl/sandboxctl/sessions/config"
	"github.com/sandboxctl/sandboxctl/sessions/hosttest"
	"github.com/sandboxctl/sandboxctl/vocab"
)

const nodeTestToken = "node-conformance-token"

// nodeGateway is a nodeexec.Registry behind a TLS test server with one node
// agent connected. external runs the agent as a separate process built from
// nodeexec/internal/testnode, its commands in a host supervisor; otherwise
// it runs in this process.
type nodeGateway struct {
	opts    nodeexec.RegistryOptions
	url, fp string       // the node endpoint and the server's certificate fingerprint
	proxy   *tcpProxy    // set when the node connects through a cuttable proxy
	node    *nodeProcess // the external node agent
	root    testing.TB   // the test that started it: Registries live as long

	mu  sync.Mutex
	reg *nodeexec.Registry // the current gateway's (restartGateway replaces it)
}

func startNodeGateway(t testing.TB, name string, external bool, security string) *nodeGateway {
	t.Helper()
	return startNodeGatewayOpts(t, name, external, security, false)
}

func startNodeGatewayOpts(t testing.TB, name string, external bool, security string, viaProxy bool) *nodeGateway {
	t.Helper()
	gw := &nodeGateway{opts: nodeexec.RegistryOptions{Token: nodeTestToken, LinkGrace: 2 * time.Second, Key: "conformance-gateway-key"}, root: t}
	gw.reg = gw.newRegistry(t)
	mux := http.NewServeMux()
	mux.Handle(nodeexec.ConnectPath, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gw.registry().Handler().ServeHTTP(w, r)
	}))
	srv := httptest.NewUnstartedServer(mux)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	addr := strings.TrimPrefix(srv.URL, "https://")
	if viaProxy {
		gw.proxy = newTCPProxy(t, addr)
		addr = gw.proxy.ln.Addr().String()
	}
	gw.url = "wss://" + addr + nodeexec.ConnectPath
	gw.fp = nodeexec.Fingerprint(srv.Certificate().Raw)
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
	})
	if external {
		gw.node = startNodeProcess(t, gw.url, gw.fp, name, security)
		gw.waitNode(t, name)
	} else {
		gw.addAgent(t, name, security, "off")
	}
	return gw
}

// newRegistry is a gateway's Registry; it adopts the runs of earlier ones
// (same ID) once Adoptions is read.
func (gw *nodeGateway) newRegistry(t testing.TB) *nodeexec.Registry {
	t.Helper()
	reg, err := nodeexec.NewRegistry(gw.opts)
	if err != nil {
		t.Fatal(err)
	}
	gw.root.Cleanup(func() { _ = reg.Close() })
	return reg
}

func (gw *nodeGateway) registry() *nodeexec.Registry {
	gw.mu.Lock()
	defer gw.mu.Unlock()
	return gw.reg
}

// restartGateway stands for the gateway daemon dying and a new one taking
// its endpoint: the old Registry's links drop (its runs are not ended on the
// node) and a new Registry with the same ID, already taking adoptions,
// serves the nodes that reconnect.
func (gw *nodeGateway) restartGateway(t testing.TB) *nodeexec.Registry {
	t.Helper()
	reg := gw.newRegistry(t)
	reg.Adoptions() // before any node can connect, as in the daemon
	gw.mu.Lock()
	old := gw.reg
	gw.reg = reg
	gw.mu.Unlock()
	_ = old.Close()
	return reg
}

// addAgent runs a node agent in this process until the test ends and waits
// for it to connect.
func (gw *nodeGateway) addAgent(t testing.TB, name, security, ask string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- nodeexec.RunAgent(ctx, nodeexec.AgentOptions{
			GatewayURL: gw.url, Token: nodeTestToken, TLSFingerprint: gw.fp, Name: name,
			StateDir: t.TempDir(), Shell: "/bin/sh",
			Environ: []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + t.TempDir(), "LANG=C.UTF-8"},
			Config:  nodeexec.GuardConfig{Security: vocab.Security(security), Ask: vocab.Ask(ask)},
		})
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	gw.waitNode(t, name)
}

func (gw *nodeGateway) waitNode(t testing.TB, name string) {
	t.Helper()
	gw.waitNodeSince(t, name, time.Time{})
}

// waitNodeSince waits until node name is connected on a link that came up
// after since.
func (gw *nodeGateway) waitNodeSince(t testing.TB, name string, since time.Time) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		for _, n := range gw.registry().List() {
			if n.Name == name && n.Connected && n.ConnectedAt.After(since) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %s did not connect", name)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// nodeProcess is the test node agent running as a separate process, its
// commands in its host supervisor.
type nodeProcess struct {
	bin, name string
	args      []string
	cmd       *exec.Cmd
	exited    chan struct{}
	stderr    *strings.Builder
}

// startNodeProcess builds the test node agent and runs it until the test ends.
func startNodeProcess(t testing.TB, url, fingerprint, name, security string) *nodeProcess {
	t.Helper()
	bin, err := testbuild.Package(t.TempDir(), "nodeexec/internal/testnode")
	if err != nil {
		t.Fatal(err)
	}
	np := &nodeProcess{bin: bin, name: name, args: []string{"-gateway", url, "-token", nodeTestToken, "-tls-fingerprint", fingerprint,
		"-name", name, "-state", t.TempDir(), "-security", security, "-ask", "off", "-link-grace", "2s",
		"-min-backoff", "100ms", "-max-backoff", "500ms", "-kill-grace", "500ms", "-supervise"}}
	np.start(t)
	t.Cleanup(func() {
		_ = np.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-np.exited:
		case <-time.After(30 * time.Second):
			_ = np.cmd.Process.Kill()
			<-np.exited
			t.Errorf("node agent did not stop on SIGTERM")
		}
		if t.Failed() {
			t.Logf("node agent stderr:\n%s", np.stderr.String())
		}
	})
	return np
}

func (np *nodeProcess) start(t testing.TB) {
	t.Helper()
	np.cmd = exec.Command(np.bin, np.args...)
	if np.stderr == nil {
		np.stderr = &strings.Builder{}
	}
	np.cmd.Stderr = np.stderr
	out, err := np.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := np.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	np.exited = make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, bufio.NewReader(out))
		_ = np.cmd.Wait()
		close(np.exited)
	}()
}

// restart kills the agent with SIGKILL and starts a new one on the same
// state directory.
func (np *nodeProcess) restart(t testing.TB) {
	t.Helper()
	if err := np.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-np.exited
	np.start(t)
}

func newNodeManager(t *testing.T, reg *nodeexec.Registry, node string, cursorFile ...string) *sessions.Manager {
	t.Helper()
	cfg := config.Default()
	cfg.Exec.Host, cfg.Exec.Security, cfg.Exec.Ask, cfg.Exec.Node = "node", "full", "off", node
	return newSingleHostManager(t, cfg, "node", sessions.NewNodeHost(reg, node), cursorFile...)
}

// TestNodeConformance runs the host conformance suite against the node host:
// a gateway Registry in this process, the node agent as a separate process.
func TestNodeConformance(t *testing.T) {
	if testing.Short() {
		t.Skip("conformance suite builds a node agent and runs real processes")
	}
	gw := startNodeGateway(t, "conformance-node", true, "full")
	hosttest.Run(t, func(t *testing.T) hosttest.Target {
		scratch := t.TempDir()
		cursors := filepath.Join(t.TempDir(), "cursors.json") // the daemon's, kept across its restart
		return hosttest.Target{
			Restart: func(t *testing.T) hosttest.Tools {
				m := newNodeManager(t, gw.restartGateway(t), "conformance-node", cursors)
				if _, err := m.Recover(context.Background()); err != nil {
					t.Fatalf("Recover: %v", err)
				}
				return m
			},
			RestartNode: func(t *testing.T) {
				killedAt := time.Now()
				gw.node.restart(t)
				gw.waitNodeSince(t, "conformance-node", killedAt)
			},
			Tools:      newNodeManager(t, gw.registry(), "conformance-node", cursors),
			Host:       "node",
			AgentID:    "agent-conformance",
			SessionKey: "session-" + strings.ReplaceAll(t.Name(), "/", "-"),
			Scratch:    scratch,
			Inspect: func(ctx context.Context, command string) (string, error) {
				// The node runs on this machine, so its side effects are
				// visible here.
				out, err := exec.CommandContext(ctx, "/bin/sh", "-c", command).CombinedOutput()
				return string(out), err
			},
		}
	})
}

func TestNodeHostStartAndRefusal(t *testing.T) {
	gw := startNodeGateway(t, "refusing-node", false, "deny")
	h := sessions.NewNodeHost(gw.registry(), "refusing-node")
	dir, warn, err := h.ResolveWorkdir(context.Background(), "a", "s", "/some/where")
	if dir != "/some/where" || warn != "" || err != nil {
		t.Errorf("ResolveWorkdir = %q %q %v", dir, warn, err)
	}
	marker := filepath.Join(t.TempDir(), "MARKER")
	_, err = h.Start(context.Background(), sessions.StartSpec{Command: "touch " + marker})
	if !errors.Is(err, nodeexec.ErrDenied) {
		t.Fatalf("Start on a deny node: %v", err)
	}
	reason, approval, ok := sessions.NodeRefusalForTest(err)
	if !ok || approval != nil || !strings.Contains(reason, "refusing-node") || !strings.Contains(reason, "deny") {
		t.Errorf("nodeRefusal = %q %v %v", reason, approval, ok)
	}
	if _, _, ok := sessions.NodeRefusalForTest(errors.New("other")); ok {
		t.Error("an unrelated error classified as a refusal")
	}
	if _, err := h.Start(context.Background(), sessions.StartSpec{Command: "true", Node: "no-such-node"}); !errors.Is(err, nodeexec.ErrNodeUnknown) {
		t.Errorf("unknown node: %v", err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("marker exists")
	}
}

// BenchmarkRoundTrip measures `true` through sessions.Manager.Exec on the
// gateway host and on the node host (node agent as a separate process on
// loopback TLS), side by side in one run. Besides ns/op it reports the
// median and p90 in ms.
func BenchmarkRoundTrip(b *testing.B) {
	gw := startNodeGateway(b, "bench-node", true, "full")
	runner, err := hostexec.NewRunner(context.Background(), hostexec.Options{
		Shell:   "/bin/sh",
		Environ: []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + b.TempDir(), "LANG=C.UTF-8"},
	})
	if err != nil {
		b.Fatal(err)
	}
	newManager := func(b *testing.B, host vocab.Host, h sessions.Host) *sessions.Manager {
		cfg := config.Default()
		cfg.Exec.Host, cfg.Exec.Security, cfg.Exec.Ask, cfg.Exec.Node = host, "full", "off", "bench-node"
		m, err := sessions.New(sessions.Options{Config: cfg, Hosts: map[vocab.Host]sessions.Host{host: h}, Getenv: func(string) string { return "" }})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			_ = m.Close(ctx)
		})
		return m
	}
	for _, tc := range []struct {
		name string
		host sessions.Host
	}{
		{"gateway", sessions.NewGatewayHost(runner, b.TempDir())},
		{"node", sessions.NewNodeHost(gw.registry(), "bench-node")},
	} {
		b.Run(tc.name, func(b *testing.B) {
			m := newManager(b, vocab.Host(tc.name), tc.host)
			ctx := context.Background()
			durs := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for range b.N {
				start := time.Now()
				r, err := m.Exec(ctx, api.ExecParams{Command: "true", Host: tc.name})
				durs = append(durs, time.Since(start))
				if err != nil || r.Details.Status != api.StatusCompleted {
					b.Fatalf("exec: %v %+v", err, r.Details)
				}
			}
			b.StopTimer()
			slices.Sort(durs)
			b.ReportMetric(float64(durs[len(durs)/2].Microseconds())/1000, "ms-median")
			b.ReportMetric(float64(durs[len(durs)*9/10].Microseconds())/1000, "ms-p90")
		})
	}
}

// tcpProxy forwards loopback TCP so a test can cut a node's link.
type tcpProxy struct {
	ln      net.Listener
	mu      sync.Mutex
	conns   []net.Conn
	blocked bool
	wg      sync.WaitGroup
}

func newTCPProxy(t testing.TB, target string) *tcpProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &tcpProxy{ln: ln}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			d, derr := net.Dial("tcp", target)
			if p.blocked || derr != nil {
				p.mu.Unlock()
				_ = c.Close()
				if d != nil {
					_ = d.Close()
				}
				continue
			}
			p.conns = append(p.conns, c, d)
			p.wg.Add(2)
			p.mu.Unlock()
			for _, pair := range [][2]net.Conn{{c, d}, {d, c}} {
				go func() {
					defer p.wg.Done()
					_, _ = io.Copy(pair[0], pair[1])
					_ = pair[0].Close()
					_ = pair[1].Close()
				}()
			}
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		p.cut()
		p.wg.Wait()
	})
	return p
}

// unblock takes new connections again.
func (p *tcpProxy) unblock() {
	p.mu.Lock()
	p.blocked = false
	p.mu.Unlock()
}

// cut drops every proxied connection and refuses new ones.
func (p *tcpProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.blocked = true
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
}

// TestNodeLinkLostFailsSession cuts a node's link while a background session
// runs on it: the node (a separate process) kills the whole tree when its
// grace ends; the gateway, which cannot tell an agent that killed its runs
// from one that died and left them running in its host supervisor, says
// the session's state is unknown (never failed while it may run) until the
// node is back, and then fails it with the reason.
func TestNodeLinkLostFailsSession(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a node agent and waits out the link grace")
	}
	gw := startNodeGatewayOpts(t, "cut-node", true, "full", true)
	m := newNodeManager(t, gw.registry(), "cut-node")
	dir := t.TempDir()
	proof, pidFile := filepath.Join(dir, "PROOF"), filepath.Join(dir, "pid")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := m.Exec(ctx, api.ExecParams{
		Command: "sh -c 'echo $$ > " + pidFile + "; sleep 6; touch " + proof + "' & echo started; wait",
		Host:    "node", Background: true, AgentID: "a", SessionKey: "s",
	})
	if err != nil || r.Details.Status != api.StatusRunning {
		t.Fatalf("exec: %v %+v", err, r.Details)
	}
	id := r.Details.SessionID
	shell := *r.Details.PID
	var child int
	for deadline := time.Now().Add(10 * time.Second); child == 0; {
		b, _ := os.ReadFile(pidFile)
		child, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		if time.Now().After(deadline) {
			t.Fatal("the command did not start")
		}
		time.Sleep(20 * time.Millisecond)
	}
	cutAt := time.Now()
	gw.proxy.cut()
	var last api.Result
	for {
		last, err = m.Process(ctx, api.ProcessParams{Action: "poll", SessionID: id, TimeoutMs: ptrFloat(2000), AgentID: "a", SessionKey: "s"})
		if err != nil {
			t.Fatal(err)
		}
		if last.Details.Status != api.StatusRunning || last.Details.Reason != "" || time.Since(cutAt) > 20*time.Second {
			break
		}
	}
	reason := last.Details.Reason
	if last.Details.Status != api.StatusRunning || !strings.Contains(reason, `unknown: the link to node "cut-node" was lost`) {
		t.Fatalf("after the cut: %+v\n%s", last.Details, last.Content)
	}
	t.Logf("session unknown %v after the cut: %s", time.Since(cutAt).Round(time.Millisecond), reason)
	for _, pid := range []int{shell, child} {
		for deadline := time.Now().Add(10 * time.Second); syscall.Kill(pid, 0) == nil && !isZombie(pid); {
			if time.Now().After(deadline) {
				t.Fatalf("pid %d still alive: the node did not kill its tree", pid)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	// The shell that would touch it is gone (waited for above).
	if _, err := os.Stat(proof); err == nil {
		t.Error("PROOF exists: the tree survived the lost link")
	}
	// The node comes back and reports how the run ended: now it is known.
	backAt := time.Now()
	gw.proxy.unblock()
	for {
		last, err = m.Process(ctx, api.ProcessParams{Action: "poll", SessionID: id, TimeoutMs: ptrFloat(2000), AgentID: "a", SessionKey: "s"})
		if err != nil {
			t.Fatal(err)
		}
		if last.Details.Status != api.StatusRunning || time.Since(backAt) > 20*time.Second {
			break
		}
	}
	reason = last.Details.Reason
	if last.Details.Status != api.StatusFailed || !strings.Contains(reason, "the node ended it: its link to the gateway was not back") {
		t.Fatalf("after the node came back: %+v\n%s", last.Details, last.Content)
	}
	t.Logf("session failed %v after the node could reconnect: %s", time.Since(backAt).Round(time.Millisecond), reason)
}

func ptrFloat(f float64) *float64 { return &f }

func isZombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] == 'Z'
}

// TestNodeManagerRefusalsAndApproval drives the node's own decisions through
// the Manager (configured security full, ask off, so only the node refuses):
// a deny node and an allowlist miss give denied, an on-miss node gives
// approval-pending; resolved from the gateway, the repeated exec runs once.
func TestNodeManagerRefusalsAndApproval(t *testing.T) {
	gw := startNodeGateway(t, "deny-node", false, "deny")
	gw.addAgent(t, "strict-node", "allowlist", "off")
	gw.addAgent(t, "asking-node", "allowlist", "on-miss")
	m := newNodeManager(t, gw.registry(), "deny-node")
	marker := filepath.Join(t.TempDir(), "MARKER")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	exec := func(node string) api.Result {
		t.Helper()
		r, err := m.Exec(ctx, api.ExecParams{Command: "touch " + marker, Host: "node", Node: node, AgentID: "a", SessionKey: "s"})
		if err != nil {
			t.Fatalf("exec on %s: %v", node, err)
		}
		return r
	}
	for _, node := range []string{"deny-node", "strict-node"} {
		r := exec(node)
		if r.Details.Status != api.StatusDenied || !strings.Contains(r.Details.Reason, node) {
			t.Errorf("%s: %+v", node, r.Details)
		}
	}
	r := exec("asking-node")
	if r.Details.Status != api.StatusApprovalPending || r.Details.Host != "node" || *r.Details.NodeID == "" {
		t.Fatalf("asking-node: %+v", r.Details)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("marker exists before approval")
	}
	id := r.Details.ApprovalID
	sid := r.Details.SessionID
	if sid == "" {
		t.Fatalf("the approval-pending node exec is not a session: %+v", r.Details)
	}
	if err := gw.registry().ResolveApproval(ctx, "", id, "allow-once"); err != nil {
		t.Fatal(err)
	}
	// The approved command starts by itself, as that session.
	for deadline := time.Now().Add(20 * time.Second); ; {
		p, err := m.Process(ctx, api.ProcessParams{Action: "poll", SessionID: sid, TimeoutMs: ptrFloat(1000), AgentID: "a", SessionKey: "s"})
		if err != nil {
			t.Fatal(err)
		}
		if p.Details.Status == api.StatusCompleted {
			break
		}
		if p.Details.Status != api.StatusRunning || time.Now().After(deadline) {
			t.Fatalf("the approved session: %+v", p.Details)
		}
	}
	if _, err := os.Stat(marker); err != nil {
		t.Errorf("approved command did not run: %v", err)
	}
	if r := exec("asking-node"); r.Details.Status != api.StatusApprovalPending {
		t.Errorf("allow-once reused: %+v", r.Details)
	}
	if _, err := m.Exec(ctx, api.ExecParams{Command: "true", Host: "node", Node: "ghost-node"}); !errors.Is(err, nodeexec.ErrNodeUnknown) {
		t.Errorf("unknown node: %v", err)
	}
}
