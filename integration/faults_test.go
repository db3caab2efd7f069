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
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/sandboxctl/sandboxctl/sandbox/supervisor"
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
	if took > 8*time.Second {
		t.Errorf("recovery took %s, want under 8 s", took)
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

// settledRuns waits until every session the supervisor of container
// nameOrID was handed has ended (each state directory under its session
// dir has an exit file, read through the host's /proc), and returns how
// many of them ran a command containing marker.
func settledRuns(t *testing.T, cli *client.Client, nameOrID, marker string) int {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		insp, err := cli.ContainerInspect(ctx, nameOrID, client.ContainerInspectOptions{})
		cancel()
		if err != nil {
			t.Fatalf("inspect %s: %v", nameOrID, err)
		}
		root := fmt.Sprintf("/proc/%d/root", insp.Container.State.Pid)
		n, open := 0, 0
		for _, dir := range supervisor.StateDirs() {
			metas, _ := filepath.Glob(filepath.Join(root, dir, "*", "meta.json"))
			for _, meta := range metas {
				data, err := os.ReadFile(meta)
				if err != nil || !strings.Contains(string(data), marker) {
					continue
				}
				n++
				if _, err := os.Stat(filepath.Join(filepath.Dir(meta), "exit")); err != nil {
					open++
				}
			}
		}
		if open == 0 {
			return n
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d supervisor sessions running %q did not end", open, marker)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// countLines counts marker lines in the runs.txt of every workspace
// directory matching dirGlob.
func countLines(t *testing.T, dirGlob, line string) int {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dirGlob, "runs.txt"))
	n := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		n += strings.Count(string(data), line+"\n")
	}
	return n
}

// containerOf finds the managed container whose name starts with prefix on cli.
func containerOf(t *testing.T, cli *client.Client, prefix string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	list, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true,
		Filters: make(client.Filters).Add("label", "sandboxctl.managed=1").Add("name", prefix)})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("containers named %s*: %v (%v)", prefix, list.Items, err)
	}
	return list.Items[0].ID
}

// TestFaultEngineRestart replays issue 13 items 1 and 2 with the Engine
// itself: dockerd is restarted (its containers stop with it) while one
// sandbox is idle and another runs a background session. The session
// fails (it does not stay running) naming its container; the first
// command into the idle sandbox afterwards runs exactly once.
func TestFaultEngineRestart(t *testing.T) {
	eng := startOwnEngine(t, testImage)
	state := t.TempDir()
	prefix := "sbxi-eng-" + randSuffix() + "-"
	ws := filepath.Join(state, "ws")
	d := startDaemonEnv(t, state, sandboxDaemonConfig(state, prefix), eng.env())

	if _, text, code := d.call(t, "exec", scoped("a1", map[string]any{"command": "true"})); code != 200 {
		t.Fatalf("first exec: %d %q", code, text)
	}
	det, text, _ := d.call(t, "exec", scoped("a2", map[string]any{"command": "echo start; sleep 120", "background": true}))
	id, _ := det["sessionId"].(string)
	if id == "" {
		t.Fatalf("exec: %v %q", det, text)
	}
	pollUntil(t, d, "a2", id, 20*time.Second, func(all string) bool { return strings.Contains(all, "start") })

	// The session must fail while the Engine is still down: its container
	// went with the Engine (no live-restore).
	fault := time.Now()
	eng.stop(t)
	down := time.Since(fault)
	all := pollUntil(t, d, "a2", id, 30*time.Second, func(all string) bool {
		return strings.Contains(all, "Process failed") || strings.Contains(all, "Process exited")
	})
	failedAfter := time.Since(fault)
	up := eng.start(t)
	if !strings.Contains(all, "Process failed") || !strings.Contains(all, "sandbox container") {
		t.Fatalf("session whose container stopped with the Engine:\n%s", all)
	}

	began := time.Now()
	_, text, code := d.call(t, "exec", scoped("a1", map[string]any{"command": "echo T >> /workspace/runs.txt"}))
	firstAfter := time.Since(began)
	c := containerOf(t, eng.cli, prefix+"agent-a1")
	supRuns := settledRuns(t, eng.cli, c, "runs.txt")
	lines := countLines(t, filepath.Join(ws, "*"), "T")
	t.Logf("dockerd restart: stop %s, start %s; running session failed %s after the stop began; first exec after restart %s (code %d: %q)",
		down.Round(time.Millisecond), up.Round(time.Millisecond), failedAfter.Round(time.Millisecond), firstAfter.Round(time.Millisecond), code, text)
	switch {
	case lines > 1:
		t.Fatalf("the first command after the Engine restart ran %d times (supervisor sessions %d)", lines, supRuns)
	case code == 200 && lines != 1:
		t.Fatalf("exec answered %q but runs.txt has %d lines", text, lines)
	}
	if firstAfter > 20*time.Second {
		t.Errorf("first exec after the restart took %s", firstAfter)
	}
}

// TestFaultContainerDiesThroughDaemon: the sandbox of a running
// background session is killed (docker kill), stopped (docker stop) or
// loses its supervisor (SIGKILL from the host); the session fails within
// 2 s with a reason naming the container's exit, and the next command
// runs exactly once.
func TestFaultContainerDiesThroughDaemon(t *testing.T) {
	cli := requireDocker(t, testImage)
	state := t.TempDir()
	prefix := "sbxi-die-" + randSuffix() + "-"
	t.Cleanup(func() { removeByPrefix(cli, prefix) })
	d := startDaemonIn(t, state, sandboxDaemonConfig(state, prefix))
	for _, tc := range []struct {
		fault, want string
		within      time.Duration
	}{
		{"kill", "exit code 137", 2 * time.Second},
		{"stop", "exit code (0|143)", 3 * time.Second}, // docker stop -t1 itself takes up to 1 s
		{"supervisor", "exit code 137", 2 * time.Second},
	} {
		t.Run(tc.fault, func(t *testing.T) {
			agent := "die-" + tc.fault
			ws := filepath.Join(state, "ws")
			det, text, _ := d.call(t, "exec", scoped(agent, map[string]any{"command": "echo start; sleep 120", "background": true}))
			id, _ := det["sessionId"].(string)
			if id == "" {
				t.Fatalf("exec: %v %q", det, text)
			}
			pollUntil(t, d, agent, id, 20*time.Second, func(all string) bool { return strings.Contains(all, "start") })
			c := containerOf(t, cli, prefix+"agent-"+agent)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			fault := time.Now()
			switch tc.fault {
			case "kill":
				if _, err := cli.ContainerKill(ctx, c, client.ContainerKillOptions{Signal: "KILL"}); err != nil {
					t.Fatal(err)
				}
			case "stop":
				timeout := 1
				if _, err := cli.ContainerStop(ctx, c, client.ContainerStopOptions{Timeout: &timeout}); err != nil {
					t.Fatal(err)
				}
			case "supervisor":
				insp, err := cli.ContainerInspect(ctx, c, client.ContainerInspectOptions{})
				if err != nil {
					t.Fatal(err)
				}
				// The supervisor is the container's pid 1.
				sup := insp.Container.State.Pid
				if sup <= 0 {
					t.Fatalf("supervisor pid: %+v", insp.Container.State)
				}
				if err := syscall.Kill(sup, syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
			}
			all := pollUntil(t, d, agent, id, 10*time.Second, func(all string) bool { return strings.Contains(all, "Process failed") })
			took := time.Since(fault)
			t.Logf("%s: session failed %s after the fault", tc.fault, took.Round(time.Millisecond))
			if took > tc.within || !regexp.MustCompile(tc.want).MatchString(all) {
				t.Fatalf("after %s, want a reason matching %q:\n%s", took, tc.want, all)
			}
			began := time.Now()
			_, text, code := d.call(t, "exec", scoped(agent, map[string]any{"command": "echo T >> /workspace/runs.txt"}))
			t.Logf("%s: first exec after the fault: %s (code %d %q)", tc.fault, time.Since(began).Round(time.Millisecond), code, text)
			supRuns := settledRuns(t, cli, c, "runs.txt")
			if n := countLines(t, filepath.Join(ws, "agent-"+agent+"-*"), "T"); n > 1 || (code == 200 && n != 1) {
				t.Fatalf("the command ran %d times (supervisor sessions %d; exec %d %q)", n, supRuns, code, text)
			}
		})
	}
}

// TestSecuritySupervisorOutOfCommandsReach: a command signals pid 1 (the
// supervisor). Under a sandbox identity the command's uid is not the
// supervisor's, so both signals are refused, the supervisor serves on, and
// the background session it keeps still answers (issue 25, finding 7).
func TestSecuritySupervisorOutOfCommandsReach(t *testing.T) {
	cli := requireDocker(t, testImage)
	state := t.TempDir()
	prefix := "sbxi-sig-" + randSuffix() + "-"
	t.Cleanup(func() { removeByPrefix(cli, prefix) })
	d := startDaemonIn(t, state, sandboxDaemonConfig(state, prefix))
	agent := "sig1"
	det, text, _ := d.call(t, "exec", scoped(agent, map[string]any{"command": "echo start; sleep 120", "background": true}))
	id, _ := det["sessionId"].(string)
	if id == "" {
		t.Fatalf("exec: %v %q", det, text)
	}
	pollUntil(t, d, agent, id, 20*time.Second, func(all string) bool { return strings.Contains(all, "start") })
	_, text, code := d.call(t, "exec", scoped(agent, map[string]any{"command": "kill -KILL 1; echo kill=$?; kill -TERM 1; echo term=$?"}))
	if code != 200 || !strings.Contains(text, "kill=1") || !strings.Contains(text, "term=1") {
		t.Fatalf("signals to the supervisor were not refused: %d %q", code, text)
	}
	_, text, code = d.call(t, "exec", scoped(agent, map[string]any{"command": "echo alive"}))
	if code != 200 || !strings.Contains(text, "alive") {
		t.Fatalf("the supervisor stopped serving: %d %q", code, text)
	}
	_, text, _ = d.call(t, "process", scoped(agent, map[string]any{"action": "poll", "sessionId": id}))
	if !strings.Contains(text, "still running") {
		t.Fatalf("the background session did not survive: %q", text)
	}
}

// lockFree reports whether no process holds the state directory's lock.
func lockFree(state string) bool {
	f, err := os.Open(filepath.Join(state, "daemon.lock"))
	if err != nil {
		return true
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return false
	}
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return true
}

// TestFaultDaemonSIGKILLConcurrentAutoStarts replays issue 13 item 4 (the
// crash half): the daemon is SIGKILLed while a background session runs in a
// supervised sandbox, then four CLI execs race to auto-start a new one. All
// four run once, one daemon wins, and the session from before the crash is
// re-adopted and finishes with its output (not "taken over").
func TestFaultDaemonSIGKILLConcurrentAutoStarts(t *testing.T) {
	cli := requireDocker(t, testImage)
	bin := buildBinary(t, "sandboxctl")
	state := t.TempDir()
	prefix := "sbxi-crash-" + randSuffix() + "-"
	t.Cleanup(func() { removeByPrefix(cli, prefix) })
	cfgPath := filepath.Join(state, "sandboxctl.yaml")
	if err := os.WriteFile(cfgPath, []byte(sandboxDaemonConfig(state, prefix)), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, bin, append([]string{"--state", state, "--config", cfgPath}, args...)...).CombinedOutput()
		return string(out), err
	}
	t.Cleanup(func() {
		if out, err := run("serve", "stop"); err != nil {
			t.Errorf("serve stop: %v\n%s", err, out)
		}
	})
	out, err := run("--json", "exec", "--agent", "a1", "--background", "--", "echo start; sleep 5; echo end")
	if err != nil {
		t.Fatalf("background exec: %v\n%s", err, out)
	}
	id := regexp.MustCompile(`"sessionId":\s*"([^"]+)"`).FindStringSubmatch(out)
	if id == nil {
		t.Fatalf("no session id in %s", out)
	}
	pidData, err := os.ReadFile(filepath.Join(state, "daemon.pid"))
	if err != nil {
		t.Fatal(err)
	}
	var pid int
	fmt.Sscan(string(pidData), &pid)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); !lockFree(state); {
		if time.Now().After(deadline) {
			t.Fatal("the killed daemon still holds the lock")
		}
		time.Sleep(20 * time.Millisecond)
	}
	began := time.Now()
	type res struct {
		out string
		err error
	}
	results := make(chan res, 4)
	for i := range 4 {
		go func() {
			out, err := run("exec", "--agent", "a1", "--", fmt.Sprintf("echo hi-%d", i))
			results <- res{out, err}
		}()
	}
	for range 4 {
		r := <-results
		if r.err != nil || !strings.Contains(r.out, "hi-") {
			t.Errorf("concurrent exec after the crash: %v\n%s", r.err, r.out)
		}
	}
	t.Logf("daemon SIGKILL: 4 concurrent auto-starting execs done in %s", time.Since(began).Round(time.Millisecond))
	var all strings.Builder
	for deadline := time.Now().Add(30 * time.Second); ; {
		out, _ := run("process", "poll", id[1], "--agent", "a1")
		all.WriteString(out)
		if strings.Contains(out, "Process exited") || strings.Contains(out, "Process failed") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("re-adopted session did not finish:\n%s", all.String())
		}
	}
	if !strings.Contains(all.String(), "end") || !strings.Contains(all.String(), "exited with code 0") ||
		strings.Count(all.String(), "start") != 1 {
		t.Fatalf("the session from before the crash:\n%s", all.String())
	}
}

// TestFaultContainerRemovedThroughDaemon: the sandbox of a running
// background session is removed with docker rm -f. The session fails at
// once, the daemon forgets the container (no endless inspect retries), and
// a graceful shutdown afterwards is quick and leaves no socket, pid file
// or lock behind.
func TestFaultContainerRemovedThroughDaemon(t *testing.T) {
	cli := requireDocker(t, testImage)
	state := t.TempDir()
	prefix := "sbxi-rm-" + randSuffix() + "-"
	t.Cleanup(func() { removeByPrefix(cli, prefix) })
	d := startDaemonIn(t, state, sandboxDaemonConfig(state, prefix))
	det, text, _ := d.call(t, "exec", scoped("r1", map[string]any{"command": "echo start; sleep 120", "background": true}))
	id, _ := det["sessionId"].(string)
	if id == "" {
		t.Fatalf("exec: %v %q", det, text)
	}
	pollUntil(t, d, "r1", id, 20*time.Second, func(all string) bool { return strings.Contains(all, "start") })
	c := containerOf(t, cli, prefix+"agent-r1")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := cli.ContainerRemove(ctx, c, client.ContainerRemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	fault := time.Now()
	all := pollUntil(t, d, "r1", id, 10*time.Second, func(all string) bool { return strings.Contains(all, "Process failed") })
	took := time.Since(fault)
	t.Logf("docker rm -f: session failed after %s", took.Round(time.Millisecond))
	if took > 2*time.Second || !strings.Contains(all, "sandbox container") {
		t.Fatalf("after %s:\n%s", took, all)
	}
	began := time.Now()
	if err := d.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if err := d.cmd.Wait(); err != nil {
		t.Fatalf("daemon exit: %v", err)
	}
	stop := time.Since(began)
	t.Logf("graceful shutdown after rm -f: %s", stop.Round(time.Millisecond))
	if stop > 5*time.Second {
		t.Errorf("graceful shutdown took %s", stop)
	}
	for _, f := range []string{"sandboxctl.sock", "daemon.pid"} {
		if _, err := os.Stat(filepath.Join(state, f)); !os.IsNotExist(err) {
			t.Errorf("%s left behind: %v", f, err)
		}
	}
	if !lockFree(state) {
		t.Error("lock still held")
	}
	if left, _ := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: make(client.Filters).Add("name", prefix)}); len(left.Items) != 0 {
		t.Errorf("containers left: %v", left.Items)
	}
}
