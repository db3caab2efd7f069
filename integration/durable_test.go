package integration

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"
)

// TestSessionsSurviveDaemonSIGKILL: a daemon is killed with SIGKILL while a
// background command runs in a supervised sandbox; a new daemon on the same
// state directory shows that command finishing ("persisted", exit 0) and
// still lists and logs a session that had finished before the kill.
func TestSessionsSurviveDaemonSIGKILL(t *testing.T) {
	cli := requireDocker(t, testImage)
	prefix := "sbxi-durable-" + randSuffix() + "-"
	state := t.TempDir()
	config := fmt.Sprintf("exec:\n  host: sandbox\n  security: full\n  ask: \"off\"\nsandbox:\n  workspaceRoot: %s\n  docker:\n    image: %s\n    containerPrefix: %s\n",
		filepath.Join(state, "ws"), testImage, prefix)
	t.Cleanup(func() { removeByPrefix(cli, prefix) })
	scope := map[string]any{"agentId": "durable"}
	call := func(d *daemonUnderTest, tool string, kv map[string]any) (map[string]any, string) {
		body := map[string]any{}
		for k, v := range scope {
			body[k] = v
		}
		for k, v := range kv {
			body[k] = v
		}
		det, text, _ := d.call(t, tool, body)
		return det, text
	}

	first := startDaemonIn(t, state, config)
	det, text := call(first, "exec", map[string]any{"command": "echo before-restart", "background": true})
	doneID, _ := det["sessionId"].(string)
	if doneID == "" {
		t.Fatalf("%v %q", det, text)
	}
	if w, ok := det["warnings"]; ok {
		t.Fatalf("sandbox not on the supervisor path: %v", w)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, text = call(first, "process", map[string]any{"action": "poll", "sessionId": doneID, "timeoutMs": 2000})
		if strings.Contains(text, "exited with code 0") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("first session did not finish: %q", text)
		}
	}
	det, _ = call(first, "exec", map[string]any{"command": "sleep 3; echo persisted", "background": true})
	runID, _ := det["sessionId"].(string)

	if err := first.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = first.cmd.Wait()

	second := startDaemonIn(t, state, config)
	_, list := call(second, "process", map[string]any{"action": "list"})
	if !strings.Contains(list, doneID) || !strings.Contains(list, runID) {
		t.Fatalf("sessions from before the restart not listed:\n%s", list)
	}
	_, log := call(second, "process", map[string]any{"action": "log", "sessionId": doneID})
	if !strings.Contains(log, "before-restart") {
		t.Fatalf("log of a finished session after restart: %q", log)
	}
	var all strings.Builder
	deadline = time.Now().Add(30 * time.Second)
	for {
		_, text = call(second, "process", map[string]any{"action": "poll", "sessionId": runID, "timeoutMs": 2000})
		all.WriteString(text)
		if strings.Contains(text, "Process exited") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("re-adopted session did not finish: %q", all.String())
		}
	}
	if !strings.Contains(all.String(), "persisted") || !strings.Contains(text, "exited with code 0") {
		t.Fatalf("re-adopted session output %q", all.String())
	}
}

// removeByPrefix removes the managed containers whose name starts with
// prefix (those a daemon under test created).
func removeByPrefix(cli *client.Client, prefix string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	list, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true,
		Filters: make(client.Filters).Add("label", "sandboxctl.managed=1").Add("name", prefix)})
	if err != nil {
		return
	}
	for _, c := range list.Items {
		_, _ = cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
	}
}

// TestForegroundReadReturnsWaitingForInput: `read x` in the foreground with
// no stdin given comes back within a second or two as waiting for input
// (not after the timeout); write + eof then completes it.
func TestForegroundReadReturnsWaitingForInput(t *testing.T) {
	cli := requireDocker(t, testImage)
	prefix := "sbxi-input-" + randSuffix() + "-"
	state := t.TempDir()
	t.Cleanup(func() { removeByPrefix(cli, prefix) })
	d := startDaemonIn(t, state, fmt.Sprintf("exec:\n  host: sandbox\n  security: full\n  ask: \"off\"\nsandbox:\n  workspaceRoot: %s\n  docker:\n    image: %s\n    containerPrefix: %s\n",
		filepath.Join(state, "ws"), testImage, prefix))
	// Warm the sandbox so the measurement is the input-wait detection.
	d.call(t, "exec", map[string]any{"command": "true", "agentId": "input"})
	start := time.Now()
	det, text, _ := d.call(t, "exec", map[string]any{"command": "read x; echo got:$x", "agentId": "input", "timeout": 60})
	took := time.Since(start)
	if det["status"] != "running" || det["waitingForInput"] != true {
		t.Fatalf("after %s: %v %q", took, det, text)
	}
	if took > 8*time.Second { // below the 10 s yield window that would answer without it
		t.Fatalf("waiting for input reported after %s", took)
	}
	t.Logf("waiting for input reported after %s", took)
	id := det["sessionId"].(string)
	d.call(t, "process", map[string]any{"action": "write", "sessionId": id, "data": "hello\n", "eof": true, "agentId": "input"})
	deadline := time.Now().Add(20 * time.Second)
	var all strings.Builder
	for {
		_, text, _ = d.call(t, "process", map[string]any{"action": "poll", "sessionId": id, "timeoutMs": 2000, "agentId": "input"})
		all.WriteString(text)
		if strings.Contains(text, "Process exited") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("did not complete after write: %q", all.String())
		}
	}
	if !strings.Contains(all.String(), "got:hello") || !strings.Contains(text, "code 0") {
		t.Fatalf("output %q", all.String())
	}
}

// TestSandboxAskAlwaysWaitsForAHuman: on the sandbox host the container is
// the boundary, but ask=always still asks first; once approved, the command
// runs in the sandbox as written.
func TestSandboxAskAlwaysWaitsForAHuman(t *testing.T) {
	cli := requireDocker(t, testImage)
	prefix := "sbxi-ask-" + randSuffix() + "-"
	state := t.TempDir()
	t.Cleanup(func() { removeByPrefix(cli, prefix) })
	d := startDaemonIn(t, state, fmt.Sprintf("exec:\n  host: sandbox\n  security: allowlist\n  ask: always\nsandbox:\n  workspaceRoot: %s\n  docker:\n    image: %s\n    containerPrefix: %s\n",
		filepath.Join(state, "ws"), testImage, prefix))
	det, text, _ := d.call(t, "exec", map[string]any{"command": "echo approved-ran; cat /proc/1/cmdline | tr '\\0' ' '", "agentId": "asker"})
	if det["status"] != "approval-pending" {
		t.Fatalf("%v %q", det, text)
	}
	id, _ := det["approvalId"].(string)
	sid, _ := det["sessionId"].(string)
	resp, err := d.hc.Post("http://sandboxctl/v1/approvals/"+id, "application/json", strings.NewReader(`{"decision":"allow-once"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("resolve: http %d", resp.StatusCode)
	}
	var all strings.Builder
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, text, _ = d.call(t, "process", map[string]any{"action": "poll", "sessionId": sid, "timeoutMs": 2000, "agentId": "asker"})
		all.WriteString(text)
		if strings.Contains(text, "Process exited") || strings.Contains(text, "Process failed") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("approved sandbox command did not finish: %q", all.String())
		}
	}
	if !strings.Contains(all.String(), "approved-ran") || !(strings.Contains(all.String(), "docker-init") || strings.Contains(all.String(), "/.sandboxctl/supervisor")) || !strings.Contains(text, "code 0") {
		t.Fatalf("approved command did not run in the sandbox: %q", all.String())
	}
}
