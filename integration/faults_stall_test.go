package integration

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/client"
)

// containerPID is the host pid of the main process of the one container
// whose name starts with prefix (a supervised sandbox's supervisor).
func containerPID(t *testing.T, cli *client.Client, prefix string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	list, err := cli.ContainerList(ctx, client.ContainerListOptions{Filters: make(client.Filters).Add("name", prefix)})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("containers named %s*: %v %v", prefix, list, err)
	}
	insp, err := cli.ContainerInspect(ctx, list.Items[0].ID, client.ContainerInspectOptions{})
	if err != nil || insp.Container.State == nil || insp.Container.State.Pid == 0 {
		t.Fatalf("inspect: %v", err)
	}
	return insp.Container.State.Pid
}

// TestFaultFrozenSupervisorAnswersInTime replays issue 32 item 4: with the
// sandbox's supervisor stopped (SIGSTOP from the host), an exec with
// yieldMs 2000 or timeout 3 blocked for as long as it was stopped. Each
// answers within its window with the reason, and its command never runs,
// not even once the supervisor runs again.
func TestFaultFrozenSupervisorAnswersInTime(t *testing.T) {
	cli := requireDocker(t, testImage)
	prefix := "sbxi-frozen-" + randSuffix() + "-"
	t.Cleanup(func() { removeByPrefix(cli, prefix) })
	state := t.TempDir()
	d := startDaemonIn(t, state, sandboxDaemonConfig(state, prefix))
	if _, text, code := d.call(t, "exec", scoped("frz", map[string]any{"command": "echo ready"})); code != 200 || !strings.Contains(text, "ready") {
		t.Fatalf("first exec: %d %q", code, text)
	}
	pid := containerPID(t, cli, prefix)
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := true
	cont := func() {
		if stopped {
			_ = syscall.Kill(pid, syscall.SIGCONT)
			stopped = false
		}
	}
	t.Cleanup(cont)
	for _, tc := range []struct {
		name  string
		extra map[string]any
		limit time.Duration // the window, plus room for a loaded machine
	}{
		{"yieldMs 2000", map[string]any{"yieldMs": 2000}, 2*time.Second + 3*time.Second},
		{"timeout 3", map[string]any{"timeout": 3}, 3*time.Second + 3*time.Second},
	} {
		body := scoped("frz", map[string]any{"command": "touch /workspace/PROOF-" + strings.ReplaceAll(tc.name, " ", "")})
		for k, v := range tc.extra {
			body[k] = v
		}
		start := time.Now()
		_, text, code := d.call(t, "exec", body)
		took := time.Since(start)
		t.Logf("%s: HTTP %d after %v: %s", tc.name, code, took.Round(time.Millisecond), text)
		if took > tc.limit {
			t.Errorf("%s: answered after %v, want within %v", tc.name, took, tc.limit)
		}
		if code == 200 || !strings.Contains(text, "supervisor") {
			t.Errorf("%s: HTTP %d %q, want an error naming the supervisor", tc.name, code, text)
		}
	}
	cont()
	resumed := time.Now()
	var text string
	for {
		var code int
		_, text, code = d.call(t, "exec", scoped("frz", map[string]any{"command": "ls /workspace; echo listed"}))
		if code == 200 && strings.Contains(text, "listed") {
			break
		}
		if time.Since(resumed) > 30*time.Second {
			t.Fatalf("the sandbox did not answer again within 30 s after SIGCONT: %d %q", code, text)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("recovered %v after SIGCONT", time.Since(resumed).Round(time.Millisecond))
	// A late start would have run by now; give a killed one a moment too.
	time.Sleep(time.Second)
	_, text, _ = d.call(t, "exec", scoped("frz", map[string]any{"command": "ls /workspace; echo listed"}))
	if strings.Contains(text, "PROOF") {
		t.Fatalf("a command that exec reported as not started ran once the supervisor ran again: %q", text)
	}
}
