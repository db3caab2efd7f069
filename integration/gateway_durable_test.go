package integration

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxctl/sandboxctl/internal/procfs"
)

// gatewayRun starts `sleep 47` in the background on the gateway through d
// and returns its session id and the pid of the shell that runs it.
func gatewayRun(t *testing.T, d *daemonUnderTest, pidFile string) (string, int) {
	t.Helper()
	det, text, _ := d.call(t, "exec", map[string]any{"agentId": "durable",
		"command": "echo $$ > " + pidFile + "; echo started; sleep 47", "background": true})
	id, _ := det["sessionId"].(string)
	if id == "" {
		t.Fatalf("background exec: %v %q", det, text)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if b, err := os.ReadFile(pidFile); err == nil && bytes.HasSuffix(b, []byte("\n")) {
			pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil {
				t.Fatal(err)
			}
			return id, pid
		}
		if time.Now().After(deadline) {
			t.Fatal("the command did not write its pid")
		}
	}
}

// alivePID reports whether pid is a live process (not a zombie whose
// threads all exited).
func alivePID(pid int) bool { return !procfs.Exited("/proc", pid) }

// waitDead waits until pid is no live process.
func waitDead(t *testing.T, pid int, within time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(within); alivePID(pid); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("pid %d still alive after %v", pid, within)
		}
	}
}

// hostSupervisorPID finds the host supervisor serving state.
func hostSupervisorPID(t *testing.T, state string) int {
	t.Helper()
	want := filepath.Join(state, "gateway-supervisor")
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		b, err := os.ReadFile(d + "/cmdline")
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		if len(args) > 3 && args[len(args)-3] == "host-supervisor" && args[len(args)-1] == want {
			pid, _ := strconv.Atoi(filepath.Base(d))
			if alivePID(pid) {
				return pid
			}
		}
	}
	return 0
}

// TestGatewaySessionSurvivesDaemonSIGKILL is issue 20's reproduction: a
// background `sleep 47` on the gateway, the daemon killed with SIGKILL. The
// next daemon lists the session as running, with its output, and can kill
// it; nothing is left running untracked, and a graceful stop ends the host
// supervisor.
func TestGatewaySessionSurvivesDaemonSIGKILL(t *testing.T) {
	state := t.TempDir()
	first := startDaemonIn(t, state, gatewayFull)
	id, pid := gatewayRun(t, first, filepath.Join(state, "pid"))
	sup := hostSupervisorPID(t, state)
	if sup == 0 {
		t.Fatal("no host supervisor runs for the daemon")
	}
	t.Cleanup(func() { _ = syscall.Kill(sup, syscall.SIGKILL); _ = syscall.Kill(pid, syscall.SIGKILL) })
	if err := first.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = first.cmd.Wait()
	if !alivePID(pid) {
		t.Fatal("the command died with the daemon")
	}

	begin := time.Now()
	second := startDaemonIn(t, state, gatewayFull)
	t.Logf("the new daemon answered %v after its start", time.Since(begin).Round(time.Millisecond))
	scope := map[string]any{"agentId": "durable", "sessionId": id}
	with := func(kv map[string]any) map[string]any {
		for k, v := range scope {
			kv[k] = v
		}
		return kv
	}
	_, list, _ := second.call(t, "process", map[string]any{"agentId": "durable", "action": "list"})
	if !strings.Contains(list, id) || !strings.Contains(list, "running") {
		t.Fatalf("the session from before the restart is not listed as running:\n%s", list)
	}
	_, log, _ := second.call(t, "process", with(map[string]any{"action": "log"}))
	if !strings.Contains(log, "started") {
		t.Fatalf("log after the restart: %q", log)
	}
	if _, text, code := second.call(t, "process", with(map[string]any{"action": "kill"})); code != 200 {
		t.Fatalf("kill after the restart: %d %q", code, text)
	}
	waitDead(t, pid, 10*time.Second)
	var det map[string]any
	var text string
	for deadline := time.Now().Add(10 * time.Second); ; {
		det, text, _ = second.call(t, "process", with(map[string]any{"action": "poll", "timeoutMs": 1000}))
		if det["status"] != "running" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("killed session still running: %q", text)
		}
	}
	if det["status"] != "failed" {
		t.Fatalf("after kill: %v %q", det, text)
	}
	if hostSupervisorPID(t, state) != sup {
		t.Fatal("the new daemon did not keep the running host supervisor")
	}

	// A graceful stop ends the sessions and the idle host supervisor.
	_ = second.cmd.Process.Signal(os.Interrupt)
	_ = second.cmd.Wait()
	waitDead(t, sup, 10*time.Second)
}

// TestGatewaySessionLostWithItsSupervisor: the daemon and its host
// supervisor are both killed with SIGKILL while a command runs. The next
// daemon ends what the command left running and reports the session as
// failed, with the reason; nothing runs untracked.
func TestGatewaySessionLostWithItsSupervisor(t *testing.T) {
	state := t.TempDir()
	id, pid := gatewayRunThenKillBoth(t, state)
	if !alivePID(pid) {
		t.Fatal("the command died with its supervisor: nothing to sweep")
	}

	second := startDaemonIn(t, state, gatewayFull)
	waitDead(t, pid, 10*time.Second) // swept before the daemon answered
	det, text, _ := second.call(t, "process", map[string]any{"agentId": "durable", "sessionId": id, "action": "poll"})
	if det["status"] != "failed" || !strings.Contains(text+" "+stringOf(det["reason"]), "host supervisor died") {
		t.Fatalf("lost session: %v %q", det, text)
	}
}

func stringOf(v any) string { s, _ := v.(string); return s }

// TestGatewaySupervisorDeathSweptAtOnce: the host supervisor dies while the
// daemon lives. The session fails, and what the command left running is
// ended at once, not at the next command or daemon.
func TestGatewaySupervisorDeathSweptAtOnce(t *testing.T) {
	state := t.TempDir()
	d := startDaemonIn(t, state, gatewayFull)
	id, pid := gatewayRun(t, d, filepath.Join(state, "pid"))
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	sup := hostSupervisorPID(t, state)
	if err := syscall.Kill(sup, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	waitDead(t, pid, 5*time.Second)
	t.Logf("the orphaned command was ended %v after its supervisor died", time.Since(begin).Round(time.Millisecond))
	det, text, _ := d.call(t, "process", map[string]any{"agentId": "durable", "sessionId": id, "action": "poll"})
	if det["status"] != "failed" {
		t.Fatalf("session of a dead supervisor: %v %q", det, text)
	}
}

// TestGatewaySupervisorWithoutSocketIsNotSwept: the daemon dies and the
// host supervisor's socket file is deleted. The next daemon must not take
// the live supervisor for dead (ending its sessions and starting a second
// one); it says what is wrong instead.
func TestGatewaySupervisorWithoutSocketIsNotSwept(t *testing.T) {
	state := t.TempDir()
	first := startDaemonIn(t, state, gatewayFull)
	_, pid := gatewayRun(t, first, filepath.Join(state, "pid"))
	sup := hostSupervisorPID(t, state)
	t.Cleanup(func() { _ = syscall.Kill(sup, syscall.SIGKILL); _ = syscall.Kill(pid, syscall.SIGKILL) })
	if err := first.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = first.cmd.Wait()
	if err := os.Remove(filepath.Join(state, "gateway-supervisor", "supervisor.sock")); err != nil {
		t.Fatal(err)
	}
	second := startDaemonIn(t, state, gatewayFull)
	_, text, _ := second.call(t, "exec", map[string]any{"agentId": "durable", "command": "true"})
	if !strings.Contains(text, "runs but its socket") {
		t.Fatalf("gateway exec with the supervisor's socket gone: %q", text)
	}
	if !alivePID(pid) || !alivePID(sup) {
		t.Fatalf("the live supervisor (alive %v) or its command (alive %v) was ended", alivePID(sup), alivePID(pid))
	}
	if n := strings.Count(strings.Join(procArgs(t, "host-supervisor"), "\n"), filepath.Join(state, "gateway-supervisor")); n != 1 {
		t.Fatalf("%d host supervisors serve the state directory", n)
	}
}

// TestGatewayFinishedSessionAfterGracefulRestart: a finished gateway
// session keeps its exit code across a graceful stop and start.
func TestGatewayFinishedSessionAfterGracefulRestart(t *testing.T) {
	state := t.TempDir()
	first := startDaemonIn(t, state, gatewayFull)
	det, _, _ := first.call(t, "exec", map[string]any{"agentId": "durable", "command": "echo kept; exit 3", "background": true})
	id, _ := det["sessionId"].(string)
	for deadline := time.Now().Add(10 * time.Second); ; {
		det, _, _ = first.call(t, "process", map[string]any{"agentId": "durable", "sessionId": id, "action": "poll", "timeoutMs": 1000})
		if det["status"] != "running" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the command did not end")
		}
	}
	_ = first.cmd.Process.Signal(os.Interrupt)
	_ = first.cmd.Wait()
	second := startDaemonIn(t, state, gatewayFull)
	det, text, _ := second.call(t, "process", map[string]any{"agentId": "durable", "sessionId": id, "action": "poll"})
	if det["status"] != "completed" || det["exitCode"] != float64(3) {
		t.Fatalf("finished session after a graceful restart: %v %q", det, text)
	}
}

// procArgs lists the command lines (spaces for NULs) of the processes
// whose command line contains word.
func procArgs(t *testing.T, word string) []string {
	t.Helper()
	var out []string
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		b, err := os.ReadFile(d + "/cmdline")
		if err != nil || !bytes.Contains(b, []byte(word)) {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(d))
		if alivePID(pid) {
			out = append(out, strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	return out
}

// TestSecurityGatewayLeftoversEndWithSession: what a gateway command leaves
// running in the background is ended when the command's session ends (the
// host supervisor ends the group and the tagged processes of a command
// whose leader exited).
func TestSecurityGatewayLeftoversEndWithSession(t *testing.T) {
	state := t.TempDir()
	d := startDaemonIn(t, state, gatewayFull)
	pidFile := filepath.Join(state, "leftover")
	det, text, _ := d.call(t, "exec", map[string]any{"agentId": "durable",
		"command": "sleep 300 & echo $! > " + pidFile + "; (setsid sleep 301 &); echo started"})
	if det["status"] != "completed" || !strings.Contains(text, "started") {
		t.Fatalf("exec: %v %q", det, text)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	waitDead(t, pid, 5*time.Second)
	for deadline := time.Now().Add(5 * time.Second); len(procArgs(t, "sleep 301")) > 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the setsid leftover still runs: %v", procArgs(t, "sleep 301"))
		}
	}
}

// gatewayRunThenKillBoth starts a daemon on state, starts a gateway command
// (gatewayRun) and SIGKILLs the daemon and then its host supervisor,
// leaving the command running. It returns the session id and the
// command's pid (killed when the test ends).
func gatewayRunThenKillBoth(t *testing.T, state string) (string, int) {
	t.Helper()
	first := startDaemonIn(t, state, gatewayFull)
	id, pid := gatewayRun(t, first, filepath.Join(state, "pid"))
	sup := hostSupervisorPID(t, state)
	if sup == 0 {
		t.Fatal("no host supervisor runs for the daemon")
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	if err := first.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = first.cmd.Wait()
	if err := syscall.Kill(sup, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitDead(t, sup, 5*time.Second)
	return id, pid
}
