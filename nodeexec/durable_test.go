package nodeexec

import (
	"context"
	"fmt"
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

// sleepers lists the live processes whose command line is `sleep arg`.
func sleepers(arg string) []int {
	var pids []int
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		b, err := os.ReadFile(d + "/cmdline")
		if err != nil || string(b) != "sleep\x00"+arg+"\x00" {
			continue
		}
		if pid, _ := strconv.Atoi(filepath.Base(d)); alive(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// supervisors lists the live host supervisors serving dir.
func supervisors(dir string) []int {
	var pids []int
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		b, err := os.ReadFile(d + "/cmdline")
		if err != nil || !strings.HasSuffix(string(b), "\x00-host-supervisor\x00"+dir+"\x00") {
			continue
		}
		if pid, _ := strconv.Atoi(filepath.Base(d)); alive(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// gatedRun starts, on node, a command that prints one, waits for its gate
// file, prints two (and err on stderr) and sleeps; it returns the run, its
// collector, the shell's pid, the gate and the sleep argument once one was
// received.
func gatedRun(t *testing.T, g *testGateway, node string) (*RemoteProcess, *collected, int, string, string) {
	t.Helper()
	dir := t.TempDir()
	pidFile, gate := filepath.Join(dir, "pid"), filepath.Join(dir, "GATE")
	sleep := fmt.Sprint(3000 + time.Now().UnixNano()%500)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rp, err := g.reg.Start(ctx, node, hostapi.StartSpec{SessionID: "durable-session", AgentID: "agent-d",
		Command: "echo $$ > " + pidFile + "; echo one; while [ ! -e " + gate + " ]; do sleep 0.05; done; echo two; echo err >&2; sleep " + sleep})
	if err != nil {
		t.Fatal(err)
	}
	c := collect(rp)
	var pid int
	waitFor(t, 10*time.Second, "the first line", func() bool {
		b, _ := os.ReadFile(pidFile)
		pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return pid > 0 && c.Stdout() == "one\n"
	})
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	return rp, c, pid, gate, sleep
}

// killAndCheck kills rp and checks that nothing of its tree runs on.
func killAndCheck(t *testing.T, rp *RemoteProcess, pid int, sleep string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := rp.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	if _, sig, err := rp.Wait(ctx); sig == "" || err != nil {
		t.Errorf("after kill: signal %q, err %v", sig, err)
	}
	waitFor(t, 10*time.Second, "the run's tree gone", func() bool { return !alive(pid) && len(sleepers(sleep)) == 0 })
}

// TestSupervisedRunSurvivesAgentSIGKILL: a node agent whose commands run in
// its host supervisor is killed with SIGKILL while a run prints. The run
// goes on; the next agent on the state directory re-adopts it, and the
// gateway's run receives what follows, each byte once, then is killed
// for good. A graceful stop of the agent then ends the idle supervisor.
func TestSupervisedRunSurvivesAgentSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts node agent processes")
	}
	bin := buildTestNode(t, t.TempDir())
	g := newTestGateway(t, RegistryOptions{LinkGrace: 10 * time.Second, PingInterval: time.Second})
	state := t.TempDir()
	args := []string{"-gateway", g.url, "-security", "full", "-ask", "off", "-state", state, "-supervise",
		"-token", testToken, "-tls-fingerprint", g.fingerprint, "-ping", "1s", "-kill-grace", "500ms"}
	first := startNodeProc(t, bin, "durable", args...)
	g.waitNode(t, "durable")
	rp, c, pid, gate, sleep := gatedRun(t, g, "durable")

	if err := first.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-first.exited
	if !alive(pid) {
		t.Fatal("the run died with its agent")
	}
	begin := time.Now()
	second := startNodeProc(t, bin, "durable", args...)
	g.waitNode(t, "durable")
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the output after the restart", func() bool { return strings.Contains(c.Stdout(), "two") })
	t.Logf("the run printed again %v after the new agent started", time.Since(begin).Round(time.Millisecond))
	killAndCheck(t, rp, pid, sleep)
	if out, errOut := c.wait(); out != "one\ntwo\n" || errOut != "err\n" {
		t.Errorf("output across the agent's SIGKILL: %q / %q, want each line once", out, errOut)
	}
	if err := second.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-second.exited
	waitFor(t, 10*time.Second, "the idle host supervisor gone", func() bool { return len(supervisors(SupervisorDir(state))) == 0 })
}

// TestSupervisedRunAdoptedByRestartedGateway: the gateway dies while a run
// prints on a node; a new Registry with the same gateway ID, on the same
// address, adopts the run when the node reconnects: the output the node
// kept, then what follows, each byte once; killable.
func TestSupervisedRunAdoptedByRestartedGateway(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts node agent processes")
	}
	t.Run("gateway", func(t *testing.T) { testAdoptedByRestartedGateway(t, false) })
	// Both die: the new agent holds the run and the new gateway adopts it.
	t.Run("gateway and agent", func(t *testing.T) { testAdoptedByRestartedGateway(t, true) })
}

func testAdoptedByRestartedGateway(t *testing.T, agentToo bool) {
	bin := buildTestNode(t, t.TempDir())
	opts := RegistryOptions{Key: "gw-durable-key", LinkGrace: 10 * time.Second, PingInterval: time.Second}
	g1 := newTestGateway(t, opts)
	args := []string{"-gateway", g1.url, "-security", "full", "-ask", "off", "-supervise",
		"-token", testToken, "-tls-fingerprint", g1.fingerprint, "-ping", "1s", "-kill-grace", "500ms", "-link-grace", "10s",
		"-state", t.TempDir()}
	agent := startNodeProc(t, bin, "steady", args...)
	g1.waitNode(t, "steady")
	_, _, pid, gate, sleep := gatedRun(t, g1, "steady")

	addr := g1.srv.Listener.Addr().String()
	// The gateway dies: its links drop (the node's runs are not told
	// anything), its listener closes.
	_ = g1.reg.Close()
	g1.srv.Close()
	if agentToo {
		if err := agent.cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		<-agent.exited
	}
	begin := time.Now()
	g2 := newTestGatewayOn(t, opts, addr)
	if agentToo {
		startNodeProc(t, bin, "steady", args...)
	}
	var a *AdoptedRun
	select {
	case a = <-g2.adopted:
	case <-time.After(20 * time.Second):
		t.Fatalf("the restarted gateway adopted nothing; nodes %+v", g2.reg.List())
	}
	t.Logf("the restarted gateway adopted the run %v after it started", time.Since(begin).Round(time.Millisecond))
	st := a.State
	if string(a.Output) != "one\n" || a.Covered != 4 || st.SessionID != "durable-session" || st.AgentID != "agent-d" || !st.Running || st.PID != pid {
		t.Fatalf("adopted run: output %q covered %d state %+v (pid %d)", a.Output, a.Covered, st, pid)
	}
	c := collect(a.Process)
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the output after the restart", func() bool { return strings.Contains(c.Stdout(), "two") })
	killAndCheck(t, a.Process, pid, sleep)
	if out, errOut := c.wait(); out != "two\n" || errOut != "err\n" {
		t.Errorf("output after the adoption: %q / %q, want what followed the kept output, once", out, errOut)
	}
}

// TestSecurityNodeCannotForgeAdoption: after a gateway restart a node
// (holding the node token) reports runs in its hello. Only a run whose
// owner mark the gateway made for exactly that run, node and session scope
// is adopted: a node that moves one of its runs into another agent's
// scope, onto another node's id, or into the current epoch gets it ended
// (left out of the welcome's resume list).
func TestSecurityNodeCannotForgeAdoption(t *testing.T) {
	opts := RegistryOptions{Key: "forge-test-key"}
	g1 := newTestGateway(t, opts)
	g2 := newTestGateway(t, opts)
	other := newTestGateway(t, RegistryOptions{Key: "another-gateway"})
	legit := RunParams{RunID: NewID(), SessionID: "sess-a", AgentID: "agent-a", SessionKey: "key-a"}
	mark := g1.reg.ownerMark(g1.reg.epoch, "node-1", legit)
	run := func(id, agent, owner string) RunState {
		return RunState{RunID: id, Running: true, Owner: owner, SessionID: "sess-a", AgentID: agent, SessionKey: "key-a"}
	}
	hello := func(g *testGateway, node string, runs ...RunState) []Resume {
		t.Helper()
		c, _, err := websocket.Dial(ctxT(t), g.url, &websocket.DialOptions{HTTPClient: g.srv.Client(),
			HTTPHeader: http.Header{"Authorization": {"Bearer " + testToken}}})
		if err != nil {
			t.Fatal(err)
		}
		defer c.CloseNow()
		if err := wsjson.Write(ctxT(t), c, &frame{Type: frameHello, Hello: &Hello{Protocol: ProtocolVersion, NodeID: node, Name: node, Key: testNodeKey(node),
			Capabilities: []string{CapSystemRun}, Running: runs}}); err != nil {
			t.Fatal(err)
		}
		var w frame
		if err := wsjson.Read(ctxT(t), c, &w); err != nil || w.Type != frameWelcome || w.Reason != "" {
			t.Fatalf("welcome: %+v %v", w, err)
		}
		return w.Resume
	}
	for _, g := range []*testGateway{g1, g2, other} {
		g.reg.Adoptions()
	}
	forged := []RunState{
		run(legit.RunID, "agent-victim", mark),              // another agent's scope
		run(NewID(), "agent-a", mark),                       // another run id
		run(legit.RunID, "agent-a", g2.reg.epoch+mark[16:]), // the current epoch
		run(legit.RunID, "agent-a", "x:"+strings.Repeat("0", 64)),
	}
	for _, rs := range forged {
		if got := hello(g2, "node-1", rs); len(got) != 0 {
			t.Errorf("forged run %+v kept: %+v", rs, got)
		}
	}
	if got := hello(g2, "node-2", run(legit.RunID, "agent-a", mark)); len(got) != 0 {
		t.Errorf("a run moved to another node id kept: %+v", got)
	}
	if got := hello(other, "node-1", run(legit.RunID, "agent-a", mark)); len(got) != 0 {
		t.Errorf("another gateway adopted the run: %+v", got)
	}
	if got := hello(g2, "node-1", run(legit.RunID, "agent-a", mark)); len(got) != 1 || !got[0].Adopt || got[0].RunID != legit.RunID {
		t.Errorf("the genuine run of an earlier incarnation: resume %+v, want it adopted", got)
	}
}

// TestSupervisedRunEndsWhileAgentDead: a run ends while its node agent is
// dead (SIGKILL). The host supervisor keeps its output and exit status; the
// next agent delivers both to the gateway's run, each byte once.
func TestSupervisedRunEndsWhileAgentDead(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts node agent processes")
	}
	bin := buildTestNode(t, t.TempDir())
	g := newTestGateway(t, RegistryOptions{LinkGrace: 10 * time.Second, PingInterval: time.Second})
	state, dir := t.TempDir(), t.TempDir()
	args := []string{"-gateway", g.url, "-security", "full", "-ask", "off", "-state", state, "-supervise",
		"-token", testToken, "-tls-fingerprint", g.fingerprint, "-ping", "1s", "-kill-grace", "500ms"}
	first := startNodeProc(t, bin, "finisher", args...)
	g.waitNode(t, "finisher")
	pidFile, gate := filepath.Join(dir, "pid"), filepath.Join(dir, "GATE")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rp, err := g.reg.Start(ctx, "finisher", hostapi.StartSpec{
		Command: "echo $$ > " + pidFile + "; echo one; while [ ! -e " + gate + " ]; do sleep 0.05; done; echo two; exit 7"})
	if err != nil {
		t.Fatal(err)
	}
	c := collect(rp)
	var pid int
	waitFor(t, 10*time.Second, "the first line", func() bool {
		b, _ := os.ReadFile(pidFile)
		pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return pid > 0 && c.Stdout() == "one\n"
	})
	if err := first.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-first.exited
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the command ended while no agent ran", func() bool { return !alive(pid) })
	startNodeProc(t, bin, "finisher", args...)
	code, sig, err := runWait(t, rp)
	out, _ := c.wait()
	if code != 7 || sig != "" || err != nil || out != "one\ntwo\n" {
		t.Errorf("the end delivered by the new agent: code %d signal %q err %v output %q", code, sig, err, out)
	}
}

// TestSupervisedRunEndedAfterGraceIsReported: the gateway stays away longer
// than the node's link grace. The node ends the run's tree, keeps its end
// with the reason, and the restarted gateway adopts it as ended, with that
// reason: nothing runs on untracked, nothing is silently gone.
func TestSupervisedRunEndedAfterGraceIsReported(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts node agent processes")
	}
	bin := buildTestNode(t, t.TempDir())
	opts := RegistryOptions{Key: "gw-late-key", LinkGrace: 10 * time.Second, PingInterval: time.Second}
	g1 := newTestGateway(t, opts)
	startNodeProc(t, bin, "patient", "-gateway", g1.url, "-security", "full", "-ask", "off", "-supervise",
		"-token", testToken, "-tls-fingerprint", g1.fingerprint, "-ping", "1s", "-kill-grace", "500ms", "-link-grace", "1s")
	g1.waitNode(t, "patient")
	_, _, pid, _, sleep := gatedRun(t, g1, "patient")
	addr := g1.srv.Listener.Addr().String()
	_ = g1.reg.Close()
	g1.srv.Close()
	waitFor(t, 10*time.Second, "the node ended the run after its grace", func() bool { return !alive(pid) && len(sleepers(sleep)) == 0 })

	g2 := newTestGatewayOn(t, opts, addr)
	var a *AdoptedRun
	select {
	case a = <-g2.adopted:
	case <-time.After(20 * time.Second):
		t.Fatalf("the restarted gateway adopted nothing; nodes %+v", g2.reg.List())
	}
	c := collect(a.Process)
	code, sig, err := runWait(t, a.Process)
	c.wait()
	if string(a.Output) != "one\n" || code != -1 || sig == "" || err == nil || !strings.Contains(err.Error(), "not back within 1s") {
		t.Errorf("adopted ended run: state %+v output %q, end %d %q %v", a.State, a.Output, code, sig, err)
	}
}

// TestSupervisedRunLinkCutLosesNothing: the link is cut while a supervised
// run prints fast, then comes back within the grace. Whatever was in flight
// when the connection died is sent again from where the gateway's output
// ends: the gateway's run ends with every line exactly once, in order.
func TestSupervisedRunLinkCutLosesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts node agent processes")
	}
	bin := buildTestNode(t, t.TempDir())
	g := newTestGateway(t, RegistryOptions{LinkGrace: 10 * time.Second, PingInterval: time.Second})
	px := newLinkProxy(t, strings.TrimPrefix(g.srv.URL, "https://"))
	startNodeProc(t, bin, "flaky", "-gateway", px.url(), "-security", "full", "-ask", "off", "-supervise",
		"-token", testToken, "-tls-fingerprint", g.fingerprint, "-ping", "1s", "-kill-grace", "500ms", "-link-grace", "10s")
	g.waitNode(t, "flaky")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const lines = 40000
	rp, err := g.reg.Start(ctx, "flaky", hostapi.StartSpec{Command: fmt.Sprintf("i=0; while [ $i -lt %d ]; do echo line-$i; i=$((i+1)); done", lines)})
	if err != nil {
		t.Fatal(err)
	}
	c := collect(rp)
	for cut := 0; cut < 3; cut++ {
		waitFor(t, 20*time.Second, "more output", func() bool { return strings.Count(c.Stdout(), "\n") > (cut+1)*lines/5 })
		px.cut()
		waitFor(t, 5*time.Second, "flaky offline", func() bool {
			for _, n := range g.reg.List() {
				if n.Name == "flaky" {
					return !n.Connected
				}
			}
			return false
		})
		px.unblock()
		g.waitNode(t, "flaky")
	}
	code, _, err := runWait(t, rp)
	out, _ := c.wait()
	var want strings.Builder
	for i := range lines {
		fmt.Fprintf(&want, "line-%d\n", i)
	}
	if code != 0 || err != nil || out != want.String() {
		got := strings.Split(out, "\n")
		t.Fatalf("after 3 cuts: code %d err %v, %d lines (want %d): lost or repeated output", code, err, len(got)-1, lines)
	}
}
