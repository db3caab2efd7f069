package integration

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"
)

// sandboxDaemonConfig is a daemon config on the test image with its own
// container prefix and workspace root.
func sandboxDaemonConfig(state, prefix string) string {
	return fmt.Sprintf("exec:\n  host: sandbox\n  security: full\n  ask: \"off\"\nsandbox:\n  workspaceRoot: %s\n  docker:\n    image: %s\n    containerPrefix: %s\n",
		filepath.Join(state, "ws"), testImage, prefix)
}

// scoped adds the agent scope to a tool body.
func scoped(agent string, kv map[string]any) map[string]any {
	body := map[string]any{"agentId": agent}
	for k, v := range kv {
		body[k] = v
	}
	return body
}

// pollUntil polls session id until cond holds on the accumulated text.
func pollUntil(t *testing.T, d *daemonUnderTest, agent, id string, within time.Duration, cond func(all string) bool) string {
	t.Helper()
	var all strings.Builder
	deadline := time.Now().Add(within)
	for {
		_, text, _ := d.call(t, "process", scoped(agent, map[string]any{"action": "poll", "sessionId": id, "timeoutMs": 1000}))
		all.WriteString(text + "\n")
		if cond(all.String()) {
			return all.String()
		}
		if time.Now().After(deadline) {
			t.Fatalf("session %s: condition not met within %s; polled:\n%s", id, within, all.String())
		}
	}
}

var lineRE = regexp.MustCompile(`(?m)^L(\d+)$`)

// TestFaultPollCursorSurvivesRestart replays issue 13 item 5: output a
// poll delivered before the daemon was SIGKILLed is not delivered again by
// the restarted daemon, and nothing is lost.
func TestFaultPollCursorSurvivesRestart(t *testing.T) {
	cli := requireDocker(t, testImage)
	prefix := "sbxi-cursor-" + randSuffix() + "-"
	t.Cleanup(func() { removeByPrefix(cli, prefix) })
	state := t.TempDir()
	config := sandboxDaemonConfig(state, prefix)
	first := startDaemonIn(t, state, config)
	det, text, _ := first.call(t, "exec", scoped("cur", map[string]any{"command": `i=1; while [ $i -le 60 ]; do echo L$i; i=$((i+1)); sleep 0.05; done`, "background": true}))
	id, _ := det["sessionId"].(string)
	if id == "" {
		t.Fatalf("exec: %v %q", det, text)
	}
	before := pollUntil(t, first, "cur", id, 20*time.Second, func(all string) bool { return len(lineRE.FindAllString(all, -1)) >= 10 })
	if err := first.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = first.cmd.Wait()
	second := startDaemonIn(t, state, config)
	after := pollUntil(t, second, "cur", id, 30*time.Second, func(all string) bool { return strings.Contains(all, "Process exited") })
	seen := map[string]int{}
	for _, m := range lineRE.FindAllStringSubmatch(before+after, -1) {
		seen[m[1]]++
	}
	var repeated, lost []string
	for i := 1; i <= 60; i++ {
		switch n := seen[fmt.Sprint(i)]; {
		case n > 1:
			repeated = append(repeated, fmt.Sprint(i))
		case n == 0:
			lost = append(lost, fmt.Sprint(i))
		}
	}
	if len(repeated) > 0 || len(lost) > 0 {
		t.Fatalf("after a restart: repeated lines %v, lost lines %v\nbefore:\n%s\nafter:\n%s", repeated, lost, before, after)
	}
}

// TestFaultSecondDaemonLeavesFirstAlone replays issue 13 item 4: a second
// `serve` on a live state directory exits "already running" without
// taking over the first daemon's supervisors: its running session stays
// running and finishes with its output.
func TestFaultSecondDaemonLeavesFirstAlone(t *testing.T) {
	cli := requireDocker(t, testImage)
	prefix := "sbxi-lock-" + randSuffix() + "-"
	t.Cleanup(func() { removeByPrefix(cli, prefix) })
	state := t.TempDir()
	config := sandboxDaemonConfig(state, prefix)
	first := startDaemonIn(t, state, config)
	det, text, _ := first.call(t, "exec", scoped("lk", map[string]any{"command": `echo start; sleep 4; echo end`, "background": true}))
	id, _ := det["sessionId"].(string)
	if id == "" {
		t.Fatalf("exec: %v %q", det, text)
	}
	pollUntil(t, first, "lk", id, 20*time.Second, func(all string) bool { return strings.Contains(all, "start") })
	bin := buildBinary(t, "sandboxctl")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "--state", state, "--config", filepath.Join(state, "sandboxctl.yaml"), "serve").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "already running") {
		t.Fatalf("second serve: %v\n%s", err, out)
	}
	all := pollUntil(t, first, "lk", id, 20*time.Second, func(all string) bool {
		return strings.Contains(all, "Process exited") || strings.Contains(all, "Process failed")
	})
	if !strings.Contains(all, "end") || !strings.Contains(all, "Process exited with code 0.") {
		t.Fatalf("the first daemon's session after a second serve:\n%s", all)
	}
}

// TestFaultTwoStateDirsOneEngine: daemons with different state
// directories and the same containerPrefix on one Engine. The second
// refuses to use the first one's sandbox (a clear error, nothing runs);
// the first one's session is untouched.
func TestFaultTwoStateDirsOneEngine(t *testing.T) {
	cli := requireDocker(t, testImage)
	prefix := "sbxi-twostate-" + randSuffix() + "-"
	t.Cleanup(func() { removeByPrefix(cli, prefix) })
	ws := t.TempDir()
	config := fmt.Sprintf("exec:\n  host: sandbox\n  security: full\n  ask: \"off\"\nsandbox:\n  workspaceRoot: %s\n  docker:\n    image: %s\n    containerPrefix: %s\n", ws, testImage, prefix)
	a := startDaemonIn(t, t.TempDir(), config)
	b := startDaemonIn(t, t.TempDir(), config)
	det, text, _ := a.call(t, "exec", scoped("a1", map[string]any{"command": `echo start; sleep 3; echo end`, "background": true}))
	id, _ := det["sessionId"].(string)
	if id == "" {
		t.Fatalf("exec: %v %q", det, text)
	}
	pollUntil(t, a, "a1", id, 20*time.Second, func(all string) bool { return strings.Contains(all, "start") })
	_, text, code := b.call(t, "exec", scoped("a1", map[string]any{"command": `echo T >> /workspace/runs.txt`}))
	if code != http.StatusConflict || !strings.Contains(text, "another state directory") {
		t.Fatalf("second state dir's exec: %d %q", code, text)
	}
	all := pollUntil(t, a, "a1", id, 20*time.Second, func(all string) bool {
		return strings.Contains(all, "Process ") && !strings.Contains(all, "still running.\n") || strings.Contains(all, "exited") || strings.Contains(all, "failed")
	})
	if !strings.Contains(all, "end") || !strings.Contains(all, "Process exited with code 0.") {
		t.Fatalf("first daemon's session:\n%s", all)
	}
	matches, _ := filepath.Glob(filepath.Join(ws, "*", "runs.txt"))
	if len(matches) != 0 {
		t.Fatalf("the refused command ran: %v", matches)
	}
}

// TestFaultInvalidUTF8RunsNothing: a command with invalid UTF-8 is
// refused with 400 and nothing runs (a marker file proves it).
func TestFaultInvalidUTF8RunsNothing(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "ran")
	d := startDaemon(t, gatewayFull)
	body := []byte("{\"command\":\"touch " + marker + "; echo \xff\"}")
	resp, err := d.hc.Post("http://sandboxctl/v1/tools/exec", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(buf.String(), "UTF-8") {
		t.Fatalf("got %d %s", resp.StatusCode, buf.String())
	}
	// Proof of absence: a valid command after it runs and returns, and the
	// marker of the refused one is still missing.
	_, text, code := d.call(t, "exec", map[string]any{"command": "echo ok"})
	if code != 200 || !strings.Contains(text, "ok") {
		t.Fatalf("follow-up exec: %d %q", code, text)
	}
	if _, err := os.Stat(marker); !os.IsNotExist(err) {
		t.Fatalf("the refused command ran: %v", err)
	}
}

var _ = client.ContainerListOptions{}

// TestFaultSocketDeleted replays issue 13 item 6: the daemon's socket file
// is deleted while a session runs. The daemon re-creates it (the session
// keeps running and is polled to its end), and `serve stop` stops it.
func TestFaultSocketDeleted(t *testing.T) {
	state := t.TempDir()
	d := startDaemonIn(t, state, gatewayFull)
	det, text, _ := d.call(t, "exec", map[string]any{"command": "echo start; sleep 2; echo end", "background": true})
	id, _ := det["sessionId"].(string)
	if id == "" {
		t.Fatalf("exec: %v %q", det, text)
	}
	sock := filepath.Join(state, "sandboxctl.sock")
	if err := os.Remove(sock); err != nil {
		t.Fatal(err)
	}
	d.hc.CloseIdleConnections()
	fresh := &http.Client{Transport: &http.Transport{DisableKeepAlives: true,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		}}}
	deleted := time.Now()
	for {
		resp, err := fresh.Get("http://sandboxctl/healthz")
		if err == nil {
			resp.Body.Close()
			break
		}
		if time.Since(deleted) > 10*time.Second {
			t.Fatalf("daemon unreachable 10 s after its socket was deleted: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	took := time.Since(deleted)
	t.Logf("socket deleted: reachable again after %s", took.Round(time.Millisecond))
	if took > 3*time.Second {
		t.Errorf("recovery took %s, want under 3 s", took)
	}
	var all strings.Builder
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(all.String(), "Process exited") {
		_, text, _ := d.call(t, "process", map[string]any{"action": "poll", "sessionId": id, "timeoutMs": 1000})
		all.WriteString(text + "\n")
		if time.Now().After(deadline) {
			t.Fatalf("session after socket re-creation:\n%s", all.String())
		}
	}
	if !strings.Contains(all.String(), "end") || !strings.Contains(all.String(), "code 0") {
		t.Fatalf("session after socket re-creation:\n%s", all.String())
	}
	bin := buildBinary(t, "sandboxctl")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, bin, "--state", state, "serve", "stop").CombinedOutput(); err != nil {
		t.Fatalf("serve stop: %v\n%s", err, out)
	}
	done := make(chan error, 1)
	go func() { done <- d.cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("daemon still running after serve stop")
	}
}
