package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/client"
)

// TestFaultEngineDownAtRestartSessionAwaited replays issue 32 item 5 (Engine
// down at the restart), polled while the Engine does not answer: the
// daemon is SIGKILLed while a background sandbox command runs, and the next
// daemon starts while the Engine does not answer it. A poll of the session
// said "No session found" until the Engine answered; now it is a session
// that says what is happening (unknown: its Engine not answering since the
// restart; retrying), which becomes the real session, with its output and
// exit, once the Engine answers.
func TestFaultEngineDownAtRestartSessionAwaited(t *testing.T) {
	cli := requireDocker(t, testImage)
	prefix := "sbxi-await-" + randSuffix() + "-"
	t.Cleanup(func() { removeByPrefix(cli, prefix) })
	proxy := newEngineProxy(t)
	state := t.TempDir()
	config := sandboxDaemonConfig(state, prefix)
	first := startDaemonEnv(t, state, config, proxy.env())
	det, text, _ := first.call(t, "exec", scoped("aw", map[string]any{"background": true,
		"command": `echo start; while [ ! -e /workspace/gate ]; do sleep 0.1; done; echo end`}))
	id, _ := det["sessionId"].(string)
	if id == "" {
		t.Fatalf("exec: %v %q", det, text)
	}
	pollUntil(t, first, "aw", id, 20*time.Second, func(all string) bool { return strings.Contains(all, "start") })
	if err := first.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = first.cmd.Wait()
	proxy.down()

	second := startDaemonEnv(t, state, config, proxy.env())
	// While the Engine does not answer: polled, listed, in doubt.
	for range 3 {
		det, text, code := second.call(t, "process", scoped("aw", map[string]any{"action": "poll", "sessionId": id}))
		t.Logf("poll while the Engine is down: %d %v %q", code, det["reason"], text)
		if code != 200 || det["status"] != "running" || !strings.Contains(text, "unknown") ||
			!strings.Contains(stringOf(det["reason"]), "not answering since the daemon restarted") {
			t.Fatalf("a poll of the session while its Engine is down after the restart: %d %v\n%s", code, det, text)
		}
		_, list, _ := second.call(t, "process", scoped("aw", map[string]any{"action": "list"}))
		if !strings.Contains(list, id) {
			t.Fatalf("the session is not listed while its Engine is down:\n%s", list)
		}
		// Another scope does not see it.
		if _, text, _ := second.call(t, "process", scoped("other", map[string]any{"action": "poll", "sessionId": id})); !strings.Contains(text, "No session found") {
			t.Fatalf("another agent polls the awaited session: %q", text)
		}
		time.Sleep(500 * time.Millisecond)
	}
	if _, text, code := second.call(t, "process", scoped("aw", map[string]any{"action": "kill", "sessionId": id})); code == 200 {
		t.Fatalf("a kill of a session whose Engine does not answer was accepted: %q", text)
	}

	begin := time.Now()
	proxy.up(t)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		det, _, _ := second.call(t, "process", scoped("aw", map[string]any{"action": "poll", "sessionId": id}))
		if det["status"] == "running" && det["reason"] == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the session is still awaited 30 s after the Engine answered again: %v", det)
		}
	}
	t.Logf("recovery: the awaited session became the real one %v after the Engine answered again", time.Since(begin).Round(time.Millisecond))
	if _, text, code := second.call(t, "exec", scoped("aw", map[string]any{"command": "touch /workspace/gate"})); code != 200 {
		t.Fatalf("open the gate: %d %q", code, text)
	}
	all := pollUntil(t, second, "aw", id, 30*time.Second, func(all string) bool {
		return strings.Contains(all, "Process exited") || strings.Contains(all, "Process failed")
	})
	if !strings.Contains(all, "end") || !strings.Contains(all, "Process exited with code 0.") {
		t.Fatalf("the session after its Engine answered:\n%s", all)
	}
}

// TestFaultNodeReconnectingAfterRestart replays issue 32 item 9 (node
// reconnecting): the gateway daemon is SIGKILLed while a background command
// runs on a node, and the next daemon starts while the node agent cannot
// reconnect yet (it is stopped with SIGSTOP, for less than its link grace).
// Its polls said "No session found" until the node reconnected; now the
// session says the node is reconnecting, then becomes the real session
// (output from where the polls stopped, exit) once it has.
func TestFaultNodeReconnectingAfterRestart(t *testing.T) {
	state, nodeState := t.TempDir(), t.TempDir()
	addr := loopbackAddr(t)
	first, token := startNodeDaemonIn(t, state, addr)
	agent := startNodeAgent(t, nodeState, addr, token, "recon")
	waitNodeConnected(t, first, "recon")
	sleep := fmt.Sprint(4300 + time.Now().UnixNano()%400)
	id, pid, gate := nodeRunGated(t, first, t.TempDir(), sleep)
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })

	agentPID := agent.cmd.Process.Pid
	if err := syscall.Kill(agentPID, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	t.Cleanup(func() { _ = syscall.Kill(agentPID, syscall.SIGCONT) })
	if err := first.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = first.cmd.Wait()
	waitDead(t, first.cmd.Process.Pid, 10*time.Second)
	second, _ := startNodeDaemonIn(t, state, addr)
	det, text, code := second.call(t, "process", map[string]any{"agentId": "durable", "sessionId": id, "action": "poll"})
	t.Logf("poll before the node reconnected: %d %v %q", code, det["reason"], text)
	if code != 200 || det["status"] != "running" || !strings.Contains(stringOf(det["reason"]), `node "recon" is reconnecting`) {
		t.Fatalf("a poll of the node session before its node reconnected: %d %v\n%s", code, det, text)
	}
	if _, list, _ := second.call(t, "process", map[string]any{"agentId": "durable", "action": "list"}); !strings.Contains(list, id) {
		t.Fatalf("the node session is not listed before its node reconnected:\n%s", list)
	}
	t.Logf("the node agent was stopped for %v", time.Since(stopped).Round(time.Millisecond))
	if err := syscall.Kill(agentPID, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		det, _, _ := second.call(t, "process", map[string]any{"agentId": "durable", "sessionId": id, "action": "poll"})
		if det["status"] == "running" && det["reason"] == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the node session is still awaited 30 s after the node agent resumed: %v", det)
		}
	}
	t.Logf("recovery: the node session became the real one %v after the node agent resumed", time.Since(begin).Round(time.Millisecond))
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	out := pollOutput(t, second, id, "after-restart", 20*time.Second)
	if !strings.Contains(out, "after-restart") || strings.Contains(out, "before-restart") {
		t.Fatalf("output after the restart: %q (want after-restart, and before-restart not again)", out)
	}
	killAndCheckGone(t, second, id, pid, sleep)
}

// TestFaultCorruptSandboxRecordKept replays issue 32 item 5 (corrupt
// metadata) in a sandbox: every session record (meta.json) in the
// supervisor's store under /run is overwritten with garbage while a
// background command runs, and the daemon is SIGKILLed and started again.
// The session does not vanish: the supervisor answers from what it holds,
// so the next daemon re-adopts it under its id, with its output and exit.
func TestFaultCorruptSandboxRecordKept(t *testing.T) {
	cli := requireDocker(t, testImage)
	prefix := "sbxi-corrupt-" + randSuffix() + "-"
	t.Cleanup(func() { removeByPrefix(cli, prefix) })
	state := t.TempDir()
	config := sandboxDaemonConfig(state, prefix)
	first := startDaemonIn(t, state, config)
	det, text, _ := first.call(t, "exec", scoped("cr", map[string]any{"background": true,
		"command": `echo start; while [ ! -e /workspace/gate ]; do sleep 0.1; done; echo end`}))
	id, _ := det["sessionId"].(string)
	if id == "" {
		t.Fatalf("exec: %v %q", det, text)
	}
	pollUntil(t, first, "cr", id, 20*time.Second, func(all string) bool { return strings.Contains(all, "start") })
	name, err := exec.Command("docker", "ps", "-q", "--filter", "name="+prefix).Output()
	if err != nil || len(strings.Fields(string(name))) != 1 {
		t.Fatalf("the sandbox container: %q %v", name, err)
	}
	out, err := exec.Command("docker", "exec", "-u", "0", strings.TrimSpace(string(name)), "sh", "-c",
		`n=0; for f in /run/sandboxctl/*/meta.json; do printf '{"id": \001garbage' > "$f" && n=$((n+1)); done; echo $n`).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) == "0" {
		t.Fatalf("corrupt the session records: %q %v", out, err)
	}
	t.Logf("corrupted %s session record(s)", strings.TrimSpace(string(out)))
	if err := first.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = first.cmd.Wait()

	begin := time.Now()
	second := startDaemonIn(t, state, config)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		_, list, _ := second.call(t, "process", scoped("cr", map[string]any{"action": "list"}))
		if strings.Contains(list, id) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the session with a corrupt record vanished after the restart:\n%s", list)
		}
	}
	t.Logf("recovery: the session with a corrupt record was listed %v after the daemon's start", time.Since(begin).Round(time.Millisecond))
	if _, text, code := second.call(t, "exec", scoped("cr", map[string]any{"command": "touch /workspace/gate"})); code != 200 {
		t.Fatalf("open the gate: %d %q", code, text)
	}
	all := pollUntil(t, second, "cr", id, 30*time.Second, func(all string) bool {
		return strings.Contains(all, "Process exited") || strings.Contains(all, "Process failed")
	})
	if !strings.Contains(all, "end") || !strings.Contains(all, "Process exited with code 0.") {
		t.Fatalf("the session after the restart:\n%s", all)
	}
}

// TestFaultEngineDownAtRestartOfTwo replays issue 32 item 5 with two
// Engines: the daemon is SIGKILLed while a background command runs on
// each, and the next daemon starts while one of them does not answer. The
// other's session is adopted at once; the silent one's is shown as in
// doubt and, once its Engine answers, becomes the real session with its
// output and exit. (With several Engines it stayed "unknown" for good:
// the sessions of an Engine down at the start were not asked for again.)
func TestFaultEngineDownAtRestartOfTwo(t *testing.T) {
	cli := requireDocker(t, testImage)
	far := startOwnEngine(t, testImage)
	proxy := newEngineProxyTo(t, strings.TrimPrefix(far.host, "unix://"))
	prefix := "sbxi-await2-" + randSuffix() + "-"
	t.Cleanup(func() { removeByPrefix(cli, prefix); removeByPrefix(far.cli, prefix) })
	near := "/var/run/docker.sock"
	if h := os.Getenv("DOCKER_HOST"); strings.HasPrefix(h, "unix://") {
		near = strings.TrimPrefix(h, "unix://")
	}
	state := t.TempDir()
	config := sandboxDaemonConfig(state, prefix) + fmt.Sprintf("  engines:\n    - name: near\n      address: unix://%s\n    - name: far\n      address: unix://%s\n", near, proxy.path)
	first := startDaemonEnv(t, state, config, nil)
	// New sandboxes go to the Engine with the fewest: one on each.
	ids := map[string]string{}
	for _, agent := range []string{"aw1", "aw2"} {
		det, text, _ := first.call(t, "exec", scoped(agent, map[string]any{"background": true,
			"command": `echo start; while [ ! -e /workspace/gate ]; do sleep 0.1; done; echo end`}))
		id, _ := det["sessionId"].(string)
		if id == "" {
			t.Fatalf("exec: %v %q", det, text)
		}
		pollUntil(t, first, agent, id, 30*time.Second, func(all string) bool { return strings.Contains(all, "start") })
		ids[agent] = id
	}
	onFar := ""
	for agent := range ids {
		list, err := far.cli.ContainerList(context.Background(), client.ContainerListOptions{All: true,
			Filters: make(client.Filters).Add("name", prefix+"agent-"+agent)})
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Items) == 1 {
			onFar = agent
		}
	}
	if onFar == "" {
		t.Fatalf("no sandbox was placed on the second Engine")
	}
	onNear := "aw1"
	if onFar == onNear {
		onNear = "aw2"
	}
	t.Logf("sessions %v; on the far Engine: %s", ids, onFar)
	if err := first.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = first.cmd.Wait()
	proxy.down()

	second := startDaemonEnv(t, state, config, nil)
	det, text, code := second.call(t, "process", scoped(onNear, map[string]any{"action": "poll", "sessionId": ids[onNear]}))
	if code != 200 || det["status"] != "running" || det["reason"] != nil {
		t.Fatalf("the session on the Engine that answers, after the restart: %d %v %q", code, det, text)
	}
	det, text, code = second.call(t, "process", scoped(onFar, map[string]any{"action": "poll", "sessionId": ids[onFar]}))
	t.Logf("poll while its Engine is down: %d %v %q", code, det["reason"], text)
	if code != 200 || det["status"] != "running" || !strings.Contains(stringOf(det["reason"]), "unknown") {
		t.Fatalf("a poll of the session while its Engine is down after the restart: %d %v\n%s", code, det, text)
	}

	begin := time.Now()
	proxy.up(t)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		det, _, _ := second.call(t, "process", scoped(onFar, map[string]any{"action": "poll", "sessionId": ids[onFar]}))
		if det["status"] == "running" && det["reason"] == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the session is still in doubt 30 s after its Engine answered again: %v", det)
		}
	}
	t.Logf("recovery: the session of the Engine down at the restart became the real one %v after it answered again", time.Since(begin).Round(time.Millisecond))
	for _, agent := range []string{onNear, onFar} {
		if _, text, code := second.call(t, "exec", scoped(agent, map[string]any{"command": "touch /workspace/gate"})); code != 200 {
			t.Fatalf("open the gate of %s: %d %q", agent, code, text)
		}
		all := pollUntil(t, second, agent, ids[agent], 30*time.Second, func(all string) bool {
			return strings.Contains(all, "Process exited") || strings.Contains(all, "Process failed")
		})
		if !strings.Contains(all, "end") || !strings.Contains(all, "Process exited with code 0.") {
			t.Fatalf("the session of %s after the restart:\n%s", agent, all)
		}
	}
}
