package integration

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestFaultNodeAgentOtherStateDir replays issue 32 item 9 (another state
// directory): a node agent is SIGKILLed while a background command runs
// (the command goes on under the agent's host supervisor) and a new agent
// starts, with the same name, on another state directory, which knows
// nothing of it. The gateway reported the run failed ("the node kills what
// it started") while it went on and completed; now, while the command
// runs, the session is never failed: it is running, in doubt.
func TestFaultNodeAgentOtherStateDir(t *testing.T) {
	state, nodeState, otherState := t.TempDir(), t.TempDir(), t.TempDir()
	addr := loopbackAddr(t)
	d, token := startNodeDaemonIn(t, state, addr)
	first := startNodeAgent(t, nodeState, addr, token, "moved")
	waitNodeConnected(t, d, "moved")
	sleep := fmt.Sprint(4700 + time.Now().UnixNano()%200)
	id, pid, _ := nodeRunGated(t, d, t.TempDir(), sleep)
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	first.kill(t)
	if !alivePID(pid) {
		t.Fatal("the command died with its node agent: nothing to replay")
	}
	begin := time.Now()
	second := startNodeAgent(t, otherState, addr, token, "moved")
	_ = second
	// Past the gateway's link grace (10 s).
	var unknownAt time.Duration
	for time.Since(begin) < 15*time.Second {
		det, text, code := d.call(t, "process", map[string]any{"agentId": "durable", "sessionId": id, "action": "poll"})
		if unknownAt == 0 && strings.Contains(stringOf(det["reason"]), "unknown") {
			unknownAt = time.Since(begin)
		}
		if !alivePID(pid) {
			t.Fatal("the command died")
		}
		if code != 200 || det["status"] != "running" {
			t.Fatalf("%v after the agent moved to another state directory, while the command runs (pid %d alive): %d %v\n%s",
				time.Since(begin).Round(time.Millisecond), pid, code, det, text)
		}
		time.Sleep(500 * time.Millisecond)
	}
	det, text, _ := d.call(t, "process", map[string]any{"agentId": "durable", "sessionId": id, "action": "poll"})
	t.Logf("recovery: the session said its state is unknown %v after the agent moved (the link grace is 10s): %v %q", unknownAt.Round(time.Millisecond), det["reason"], text)
	if !strings.Contains(stringOf(det["reason"]), "unknown") {
		t.Fatalf("the session of a command its node lost sight of: %v", det)
	}
	// A kill cannot reach it: it is refused at once, saying so, and the
	// session stays as it is.
	k0 := time.Now()
	_, text, code := d.call(t, "process", map[string]any{"agentId": "durable", "sessionId": id, "action": "kill"})
	t.Logf("kill of the unreachable run answered after %v: %d %q", time.Since(k0).Round(time.Millisecond), code, text)
	if code == 200 || time.Since(k0) > 10*time.Second || !strings.Contains(text, "cannot be reached") {
		t.Fatalf("kill of a run whose node is unreachable: %d %q", code, text)
	}
	if det, _, _ := d.call(t, "process", map[string]any{"agentId": "durable", "sessionId": id, "action": "poll"}); det["status"] != "running" || !alivePID(pid) {
		t.Fatalf("after the refused kill: %v (command alive: %v)", det, alivePID(pid))
	}
}
