package integration

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// nodeFull runs every command on the node, without asking.
const nodeFull = "exec:\n  host: node\n  security: full\n  ask: \"off\"\n"

// loopbackAddr is a loopback address whose port is free right now.
func loopbackAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startNodeDaemonIn starts a daemon on state that takes node connections on
// addr (plain ws on loopback) and returns it with its node token.
func startNodeDaemonIn(t *testing.T, state, addr string) (*daemonUnderTest, string) {
	t.Helper()
	bin := buildBinary(t, "sandboxctl")
	cfgPath := filepath.Join(state, "sandboxctl.yaml")
	if err := os.WriteFile(cfgPath, []byte(nodeFull), 0o600); err != nil {
		t.Fatal(err)
	}
	d := startDaemonArgs(t, state, exec.Command(bin, "--state", state, "--config", cfgPath, "serve", "--listen", addr))
	b, err := os.ReadFile(filepath.Join(state, "node-token"))
	if err != nil {
		t.Fatal(err)
	}
	return d, strings.TrimSpace(string(b))
}

// nodeAgent is a real `sandboxctl node run` process.
type nodeAgent struct {
	cmd    *exec.Cmd
	exited chan struct{}
	log    syncBuffer
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startNodeAgent runs `sandboxctl node run` on the node state directory
// state until the test ends (SIGINT then).
func startNodeAgent(t *testing.T, state, addr, token, name string) *nodeAgent {
	t.Helper()
	bin := buildBinary(t, "sandboxctl")
	cfgPath := filepath.Join(state, "node.yaml")
	if err := os.WriteFile(cfgPath, []byte("exec:\n  security: full\n  ask: \"off\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	n := &nodeAgent{exited: make(chan struct{})}
	n.cmd = exec.Command(bin, "--state", state, "--config", cfgPath, "node", "run",
		"--gateway", "ws://"+addr, "--token", token, "--name", name, "--workdir", state)
	n.cmd.Stderr = &n.log
	if err := n.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = n.cmd.Wait(); close(n.exited) }()
	t.Cleanup(func() {
		_ = n.cmd.Process.Signal(os.Interrupt)
		select {
		case <-n.exited:
		case <-time.After(30 * time.Second):
			_ = n.cmd.Process.Kill()
			<-n.exited
			t.Errorf("node agent %s did not stop on SIGINT", name)
		}
		if t.Failed() {
			t.Logf("node agent %s log:\n%s", name, n.log.String())
		}
	})
	return n
}

// kill ends the agent with SIGKILL and waits until it is gone entirely.
func (n *nodeAgent) kill(t *testing.T) {
	t.Helper()
	pid := n.cmd.Process.Pid
	if err := n.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-n.exited
	waitDead(t, pid, 10*time.Second)
}

// waitNodeConnected waits until d lists node name as connected.
func waitNodeConnected(t *testing.T, d *daemonUnderTest, name string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		resp, err := d.hc.Get("http://sandboxctl/v1/nodes")
		if err == nil {
			var b bytes.Buffer
			_, _ = b.ReadFrom(resp.Body)
			resp.Body.Close()
			if strings.Contains(b.String(), `"name":"`+name+`"`) && strings.Contains(b.String(), `"connected":true`) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %s did not connect", name)
		}
	}
}

// nodeRunGated starts, in the background on the node, a command that
// prints before-restart, waits for gate, prints after-restart and then
// sleeps; it returns the session id and the shell's pid once the first line
// was polled.
func nodeRunGated(t *testing.T, d *daemonUnderTest, dir, sleep string) (id string, pid int, gate string) {
	t.Helper()
	pidFile, gate := filepath.Join(dir, "pid"), filepath.Join(dir, "GATE")
	det, text, _ := d.call(t, "exec", map[string]any{"agentId": "durable", "background": true,
		"command": "echo $$ > " + pidFile + "; echo before-restart; while [ ! -e " + gate + " ]; do sleep 0.05; done; echo after-restart; sleep " + sleep})
	id, _ = det["sessionId"].(string)
	if id == "" || det["status"] != "running" {
		t.Fatalf("background exec on the node: %v %q", det, text)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if b, err := os.ReadFile(pidFile); err == nil && bytes.HasSuffix(b, []byte("\n")) {
			pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the command did not write its pid")
		}
	}
	out := pollOutput(t, d, id, "before-restart", 10*time.Second)
	if !strings.Contains(out, "before-restart") {
		t.Fatalf("first output: %q", out)
	}
	return id, pid, gate
}

// pollOutput polls id until its output so far contains want (or the
// session ended, or within passed) and returns the output of these polls.
func pollOutput(t *testing.T, d *daemonUnderTest, id, want string, within time.Duration) string {
	t.Helper()
	var out strings.Builder
	for deadline := time.Now().Add(within); ; {
		det, text, code := d.call(t, "process", map[string]any{"agentId": "durable", "sessionId": id, "action": "poll", "timeoutMs": 500})
		if code != 200 {
			t.Fatalf("poll %s: %d %q", id, code, text)
		}
		if i := strings.LastIndex(text, "\n\n"); i >= 0 {
			text = text[:i]
		}
		if text != "(no new output)" {
			out.WriteString(text)
		}
		if strings.Contains(out.String(), want) || det["status"] != "running" || time.Now().After(deadline) {
			return out.String()
		}
	}
}

// sleepers lists the live processes whose command line is `sleep arg`.
func sleepers(arg string) []int {
	var pids []int
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		b, err := os.ReadFile(d + "/cmdline")
		if err != nil || string(b) != "sleep\x00"+arg+"\x00" {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(d))
		if alivePID(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// killAndCheckGone kills session id through d and checks that nothing of
// its tree runs on (its shell pid, and any `sleep arg`).
func killAndCheckGone(t *testing.T, d *daemonUnderTest, id string, pid int, sleep string) {
	t.Helper()
	if _, text, code := d.call(t, "process", map[string]any{"agentId": "durable", "sessionId": id, "action": "kill"}); code != 200 {
		t.Fatalf("kill after the restart: %d %q", code, text)
	}
	waitDead(t, pid, 10*time.Second)
	for deadline := time.Now().Add(10 * time.Second); len(sleepers(sleep)) > 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("sleep %s still runs after the kill: pids %v", sleep, sleepers(sleep))
		}
	}
	det, text, _ := d.call(t, "process", map[string]any{"agentId": "durable", "sessionId": id, "action": "poll", "timeoutMs": 2000})
	if det["status"] != "failed" {
		t.Fatalf("after kill: %v %q", det, text)
	}
}

// TestNodeSessionSurvivesNodeAgentSIGKILL is issue 20's node reproduction:
// a background command on a node whose `sandboxctl node run` is killed
// with SIGKILL. The command runs on under the node's host supervisor; the
// next agent on the same node state re-adopts it, and the gateway session
// goes on: it prints what follows exactly once, and killing it ends the
// whole tree.
func TestNodeSessionSurvivesNodeAgentSIGKILL(t *testing.T) {
	state, nodeState := t.TempDir(), t.TempDir()
	addr := loopbackAddr(t)
	d, token := startNodeDaemonIn(t, state, addr)
	first := startNodeAgent(t, nodeState, addr, token, "crashy")
	waitNodeConnected(t, d, "crashy")
	sleep := fmt.Sprint(4500 + time.Now().UnixNano()%400)
	id, pid, gate := nodeRunGated(t, d, t.TempDir(), sleep)
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })

	first.kill(t)
	if !alivePID(pid) {
		t.Fatal("the command died with the node agent")
	}
	begin := time.Now()
	second := startNodeAgent(t, nodeState, addr, token, "crashy")
	waitNodeConnected(t, d, "crashy")
	if !alivePID(pid) {
		t.Fatalf("the restarted node agent ended the command of its previous incarnation")
	}
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	out := pollOutput(t, d, id, "after-restart", 20*time.Second)
	t.Logf("the session printed again %v after the new node agent started", time.Since(begin).Round(time.Millisecond))
	if !strings.Contains(out, "after-restart") || strings.Contains(out, "before-restart") {
		t.Fatalf("output after the node agent restart: %q (want after-restart, and before-restart not again)", out)
	}
	_, log, _ := d.call(t, "process", map[string]any{"agentId": "durable", "sessionId": id, "action": "log"})
	if strings.Count(log, "before-restart") != 1 || strings.Count(log, "after-restart") != 1 {
		t.Errorf("log after the restart: %q, want each line once", log)
	}
	killAndCheckGone(t, d, id, pid, sleep)

	// A graceful stop of the agent ends its idle host supervisor too.
	supDir := filepath.Join(nodeState, "node", "sup")
	if len(procArgs(t, supDir)) != 1 {
		t.Fatalf("want one host supervisor of %s: %q", supDir, procArgs(t, supDir))
	}
	_ = second.cmd.Process.Signal(os.Interrupt)
	<-second.exited
	for deadline := time.Now().Add(10 * time.Second); len(procArgs(t, supDir)) > 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the node's host supervisor outlived the agent's graceful stop: %q", procArgs(t, supDir))
		}
	}
}

// TestNodeSessionSurvivesDaemonSIGKILL: a background command on a node, and
// the gateway daemon killed with SIGKILL. The next daemon on the same state
// re-adopts the run when the node reconnects: listed, polled from where the
// polls before the crash stopped, killable.
func TestNodeSessionSurvivesDaemonSIGKILL(t *testing.T) {
	state, nodeState := t.TempDir(), t.TempDir()
	addr := loopbackAddr(t)
	first, token := startNodeDaemonIn(t, state, addr)
	startNodeAgent(t, nodeState, addr, token, "steady")
	waitNodeConnected(t, first, "steady")
	sleep := fmt.Sprint(4100 + time.Now().UnixNano()%400)
	id, pid, gate := nodeRunGated(t, first, t.TempDir(), sleep)
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })

	if err := first.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = first.cmd.Wait()
	waitDead(t, first.cmd.Process.Pid, 10*time.Second)
	begin := time.Now()
	second, _ := startNodeDaemonIn(t, state, addr)
	waitNodeConnected(t, second, "steady")
	var list string
	for deadline := time.Now().Add(15 * time.Second); !strings.Contains(list, id); time.Sleep(50 * time.Millisecond) {
		_, list, _ = second.call(t, "process", map[string]any{"agentId": "durable", "action": "list"})
		if time.Now().After(deadline) {
			t.Fatalf("the new daemon does not list the node session %s:\n%s", id, list)
		}
	}
	t.Logf("the new daemon listed the node session %v after its start", time.Since(begin).Round(time.Millisecond))
	if !strings.Contains(list, "running") {
		t.Fatalf("the re-adopted node session is not running:\n%s", list)
	}
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	out := pollOutput(t, second, id, "after-restart", 20*time.Second)
	if !strings.Contains(out, "after-restart") || strings.Contains(out, "before-restart") {
		t.Fatalf("output after the daemon restart: %q (want after-restart, and before-restart not again)", out)
	}
	_, log, _ := second.call(t, "process", map[string]any{"agentId": "durable", "sessionId": id, "action": "log"})
	if strings.Count(log, "before-restart") != 1 || strings.Count(log, "after-restart") != 1 {
		t.Errorf("log after the restart: %q, want each line once", log)
	}
	killAndCheckGone(t, second, id, pid, sleep)
}
