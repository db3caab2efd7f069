package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/client"
)

// mountTmpfs mounts a tmpfs of size bytes on a fresh directory and returns
// it; it is unmounted (lazily, so that a process still in it does not keep
// it) when the test ends. It needs root, as the fault suite does in CI.
func mountTmpfs(t *testing.T, size int) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs to fill needs root")
	}
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d,mode=0700", size)); err != nil {
		t.Fatalf("mount a tmpfs on %s: %v", dir, err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
	return dir
}

// fillDisk writes a file in dir until its filesystem is full and returns
// the file's path; removing it makes room again.
func fillDisk(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("fill %s: %v", dir, err)
			}
			break
		}
	}
	// The last bytes: a page-sized write can fail while a small one fits.
	for _, err := f.Write([]byte{0}); err == nil; _, err = f.Write([]byte{0}) {
	}
	return path
}

// serveFails runs `sandboxctl serve` on state with extra args, expects it
// to exit with an error within a minute and returns its output.
func serveFails(t *testing.T, state string, args ...string) string {
	t.Helper()
	bin := buildBinary(t, "sandboxctl")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	argv := append([]string{"--state", state, "--config", filepath.Join(state, "sandboxctl.yaml"), "serve"}, args...)
	out, err := exec.CommandContext(ctx, bin, argv...).CombinedOutput()
	if err == nil {
		t.Fatalf("serve %v started, want a failed start:\n%s", args, out)
	}
	if ctx.Err() != nil {
		t.Fatalf("serve %v did not exit within a minute:\n%s", args, out)
	}
	return string(out)
}

// restartWorkload is a running sandbox session and a running gateway
// session of one daemon.
type restartWorkload struct {
	sandboxID, gatewayID string
	gate                 string // the gateway command ends once it exists
	gatewayPID, supPID   int
}

// startRestartWorkload starts, through d, a sandbox session printing L1…L30
// over 6 s and a gateway session that prints start, waits for a gate file
// and prints end; it returns once both printed.
func startRestartWorkload(t *testing.T, d *daemonUnderTest, dir string) restartWorkload {
	t.Helper()
	w := restartWorkload{gate: filepath.Join(dir, "gate")}
	det, text, _ := d.call(t, "exec", scoped("rs", map[string]any{"host": "sandbox", "background": true,
		"command": `i=1; while [ $i -le 30 ]; do echo L$i; i=$((i+1)); sleep 0.2; done`}))
	if w.sandboxID, _ = det["sessionId"].(string); w.sandboxID == "" {
		t.Fatalf("sandbox exec: %v %q", det, text)
	}
	pidFile := filepath.Join(dir, "gwpid")
	det, text, _ = d.call(t, "exec", scoped("rs", map[string]any{"elevated": true, "background": true,
		"command": "echo $$ > " + pidFile + "; echo start; while [ ! -e " + w.gate + " ]; do sleep 0.05; done; echo end"}))
	if w.gatewayID, _ = det["sessionId"].(string); w.gatewayID == "" {
		t.Fatalf("gateway exec: %v %q", det, text)
	}
	pollUntil(t, d, "rs", w.gatewayID, 20*time.Second, func(all string) bool { return strings.Contains(all, "start") })
	pollUntil(t, d, "rs", w.sandboxID, 20*time.Second, func(all string) bool { return strings.Contains(all, "L2\n") })
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Sscan(string(b), &w.gatewayPID)
	if w.supPID = hostSupervisorPID(t, d.state); w.supPID == 0 {
		t.Fatal("no host supervisor runs for the daemon")
	}
	t.Cleanup(func() { _ = syscall.Kill(w.gatewayPID, syscall.SIGKILL); _ = syscall.Kill(w.supPID, syscall.SIGKILL) })
	return w
}

// checkIntact checks, through a daemon started after a failed start, that
// both sessions ran on whole: the sandbox session printed L1…L30 exactly
// once and exited 0, the gateway session printed end and exited 0.
func (w restartWorkload) checkIntact(t *testing.T, d *daemonUnderTest) {
	t.Helper()
	if err := os.WriteFile(w.gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{w.sandboxID, w.gatewayID} {
		all := pollUntil(t, d, "rs", id, 30*time.Second, func(all string) bool {
			return strings.Contains(all, "Process exited") || strings.Contains(all, "Process failed") || strings.Contains(all, "No session")
		})
		if !strings.Contains(all, "Process exited with code 0.") {
			t.Errorf("session %s after the failed start and a good one:\n%s", id, all)
		}
	}
	_, log, _ := d.call(t, "process", scoped("rs", map[string]any{"action": "log", "sessionId": w.sandboxID, "limit": 1000}))
	for i := 1; i <= 30; i++ {
		if n := strings.Count(log+"\n", fmt.Sprintf("L%d\n", i)); n != 1 {
			t.Errorf("sandbox output: L%d %d times, want once:\n%s", i, n, log)
			break
		}
	}
	_, log, _ = d.call(t, "process", scoped("rs", map[string]any{"action": "log", "sessionId": w.gatewayID}))
	if !strings.Contains(log, "start") || !strings.Contains(log, "end") {
		t.Errorf("gateway output: %q, want start and end", log)
	}
}

// checkAlive checks, right after a failed start, that it harmed nothing.
func (w restartWorkload) checkAlive(t *testing.T) {
	t.Helper()
	if !alivePID(w.supPID) {
		t.Fatalf("the failed start ended the host supervisor (pid %d)", w.supPID)
	}
	if !alivePID(w.gatewayPID) {
		t.Fatalf("the failed start ended the gateway command (pid %d)", w.gatewayPID)
	}
}

// TestFaultFailedStartLeavesAdoptedSessions replays issue 32 item 1: with a
// running sandbox session and a running gateway session, the daemon is
// SIGKILLed and a new one cannot finish starting — its --listen port is
// taken, or the state filesystem has no room for its pid file. The failed
// start must leave both sessions running; the next good start adopts them,
// and they end whole.
func TestFaultFailedStartLeavesAdoptedSessions(t *testing.T) {
	cli := requireDocker(t, testImage)
	for _, fault := range []string{"port-taken", "disk-full"} {
		t.Run(fault, func(t *testing.T) {
			prefix := "sbxi-failstart-" + randSuffix() + "-"
			t.Cleanup(func() { removeByPrefix(cli, prefix) })
			state := t.TempDir()
			if fault == "disk-full" {
				state = mountTmpfs(t, 8<<20)
			}
			dir := t.TempDir()
			// The gateway session is an elevated run (full, no ask).
			config := fmt.Sprintf("exec:\n  host: sandbox\n  security: full\n  ask: \"off\"\nelevated:\n  enabled: true\n  allowFrom: [\"*\"]\n  defaultLevel: full\nsandbox:\n  workspaceRoot: %s\n  docker:\n    image: %s\n    containerPrefix: %s\n",
				filepath.Join(dir, "ws"), testImage, prefix)
			first := startDaemonIn(t, state, config)
			w := startRestartWorkload(t, first, dir)
			if err := first.cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			_ = first.cmd.Wait()

			var out string
			switch fault {
			case "port-taken":
				ln, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					t.Fatal(err)
				}
				out = serveFails(t, state, "--listen", ln.Addr().String())
				ln.Close()
			case "disk-full":
				filler := fillDisk(t, state)
				out = serveFails(t, state)
				if err := os.Remove(filler); err != nil {
					t.Fatal(err)
				}
			}
			t.Logf("the failed start said: %s", strings.TrimSpace(out))
			w.checkAlive(t)

			begin := time.Now()
			second := startDaemonIn(t, state, config)
			t.Logf("recovery: the next daemon answered %v after its start", time.Since(begin).Round(time.Millisecond))
			w.checkIntact(t, second)
		})
	}
}

// uploadTemps lists the files tool's temporary upload files under dir.
func uploadTemps(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	_ = filepath.WalkDir(dir, func(p string, e os.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(e.Name(), ".sandboxctl-upload-") {
			out = append(out, p)
		}
		return nil
	})
	return out
}

// patternReader yields n bytes of a repeating pattern without holding them.
type patternReader struct{ n int64 }

func (p *patternReader) Read(b []byte) (int, error) {
	if p.n <= 0 {
		return 0, io.EOF
	}
	if int64(len(b)) > p.n {
		b = b[:p.n]
	}
	for i := range b {
		b[i] = "0123456789abcdef"[i%16]
	}
	p.n -= int64(len(b))
	return len(b), nil
}

// TestFaultUploadTempRemovedAfterDaemonSIGKILL replays issue 32 item 7: the
// daemon is SIGKILLed while a raw PUT streams a file into a sandbox. The
// file tool's temporary file sits in the workspace; the restarted daemon
// ends the orphaned transfer, and its temporary file goes with it (the
// target is never created). A new upload then works.
//
// The daemon streams the body to the file tool as it arrives: its
// .sandboxctl-upload-* temp appears in the workspace at once, and the
// daemon is killed as soon as it does, with most of the body still to
// stream.
func TestFaultUploadTempRemovedAfterDaemonSIGKILL(t *testing.T) {
	cli := requireDocker(t, testImage)
	prefix := "sbxi-uptemp-" + randSuffix() + "-"
	t.Cleanup(func() { removeByPrefix(cli, prefix) })
	state := t.TempDir()
	config := sandboxDaemonConfig(state, prefix)
	// The agent's workspace is a directory of state/ws (mode 0700, owned
	// by the sandbox's identity; the test runs as root): walk all of it.
	ws := filepath.Join(state, "ws")
	first := startDaemonIn(t, state, config)
	if _, text, code := first.call(t, "exec", scoped("up", map[string]any{"command": "echo ready"})); code != 200 || !strings.Contains(text, "ready") {
		t.Fatalf("exec: %d %q", code, text)
	}

	// Under the default --files-max-bytes (1 GiB); streaming it into the
	// sandbox takes far longer than one round of the poll below.
	const size = 256 << 20
	type result struct {
		status int
		err    error
	}
	done := make(chan result, 1)
	sent := time.Now()
	go func() {
		req, _ := http.NewRequest(http.MethodPut, "http://sandboxctl/v1/files?agent=up&path=/workspace/big.bin", &patternReader{n: size})
		req.ContentLength = size
		resp, err := first.hc.Do(req)
		if err != nil {
			done <- result{err: err}
			return
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		done <- result{status: resp.StatusCode, err: fmt.Errorf("%s", bytes.TrimSpace(body))}
	}()
	var tmp string
	var seen int64
	for deadline := time.Now().Add(120 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if tmps := uploadTemps(t, ws); len(tmps) == 1 {
			if fi, err := os.Stat(tmps[0]); err == nil && fi.Size() > 0 {
				tmp, seen = tmps[0], fi.Size()
				break
			}
		}
		select {
		case r := <-done:
			t.Fatalf("the upload ended before its temp was seen in %s: HTTP %d %v", ws, r.status, r.err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no upload temp in %s within 2 minutes: %v", ws, uploadTemps(t, ws))
		}
	}
	if err := first.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = first.cmd.Wait()
	t.Logf("the temp appeared %v after the upload began; the daemon was killed with %d of %d bytes in it",
		time.Since(sent).Round(time.Millisecond), seen, size)
	select {
	case r := <-done:
		if r.status == http.StatusOK {
			t.Fatalf("the upload finished before the kill: nothing to replay")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the upload request did not end with the daemon")
	}
	fi, err := os.Stat(tmp)
	if err != nil {
		t.Fatalf("the temp did not outlive the daemon: nothing to replay (%v)", err)
	}
	if fi.Size() >= size {
		t.Fatalf("the temp holds the whole upload (%d bytes): nothing to replay", fi.Size())
	}

	begin := time.Now()
	second := startDaemonIn(t, state, config)
	for deadline := time.Now().Add(20 * time.Second); len(uploadTemps(t, ws)) > 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("upload temps left after the restart: %v", uploadTemps(t, ws))
		}
	}
	t.Logf("recovery: the orphaned upload's temp was gone %v after the restart began", time.Since(begin).Round(time.Millisecond))
	if _, text, code := second.call(t, "exec", scoped("up", map[string]any{"command": "if [ -e /workspace/big.bin ]; then echo present; else echo absent; fi"})); code != 200 || !strings.Contains(text, "absent") {
		t.Fatalf("the interrupted upload's target in the sandbox: %d %q, want absent", code, text)
	}
	_ = filepath.WalkDir(ws, func(p string, e os.DirEntry, err error) error {
		if err == nil && e.Name() == "big.bin" {
			t.Errorf("the interrupted upload created its target: %s", p)
		}
		return nil
	})
	want := bytes.Repeat([]byte("whole\n"), 1<<16)
	req, _ := http.NewRequest(http.MethodPut, "http://sandboxctl/v1/files?agent=up&path=/workspace/small.bin", bytes.NewReader(want))
	resp, err := second.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("upload after the restart: %s", resp.Status)
	}
	var got []byte
	_ = filepath.WalkDir(ws, func(p string, e os.DirEntry, err error) error {
		if err == nil && e.Name() == "small.bin" {
			got, _ = os.ReadFile(p)
		}
		return nil
	})
	if !bytes.Equal(got, want) {
		t.Fatalf("the upload after the restart: %d bytes, want %d", len(got), len(want))
	}
}

// approvalStatus returns the status of approval id as
// GET /v1/approvals lists it.
func approvalStatus(t *testing.T, d *daemonUnderTest, id string) string {
	t.Helper()
	resp, err := d.hc.Get("http://sandboxctl/v1/approvals")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list []struct{ ID, Status string }
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	for _, a := range list {
		if a.ID == id {
			return a.Status
		}
	}
	return ""
}

// resolveApproval decides approval id through d and returns the HTTP status.
func resolveApproval(t *testing.T, d *daemonUnderTest, id, decision string) int {
	t.Helper()
	resp, err := d.hc.Post("http://sandboxctl/v1/approvals/"+id, "application/json", strings.NewReader(`{"decision":"`+decision+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestFaultPendingApprovalAcrossDaemonSIGKILL replays issue 32 item 2: the
// daemon is SIGKILLed while an exec waits for approval. The restarted
// daemon cancels the request (its exec died with the old daemon): it is
// listed as cancelled, refuses a decision (409), and the agent's session
// comes back failed with the reason, with an exit event. The agent's next
// identical exec asks again instead of using an allow-once given after the
// crash, and nothing runs without a decision.
func TestFaultPendingApprovalAcrossDaemonSIGKILL(t *testing.T) {
	state := t.TempDir()
	config := "exec:\n  host: gateway\n  security: full\n  ask: always\n"
	marker := filepath.Join(t.TempDir(), "ran")
	first := startDaemonIn(t, state, config)
	det, text, _ := first.call(t, "exec", map[string]any{"agentId": "ap", "command": "touch " + marker, "background": true})
	approvalID, _ := det["approvalId"].(string)
	sessionID, _ := det["sessionId"].(string)
	if approvalID == "" || sessionID == "" {
		t.Fatalf("exec: %v %q", det, text)
	}
	if err := first.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = first.cmd.Wait()

	begin := time.Now()
	second := startDaemonIn(t, state, config)
	t.Logf("recovery: the next daemon answered %v after its start", time.Since(begin).Round(time.Millisecond))
	if st := approvalStatus(t, second, approvalID); st != "cancelled" {
		t.Errorf("the approval after the restart: status %q, want cancelled", st)
	}
	if code := resolveApproval(t, second, approvalID, "allow-once"); code != http.StatusConflict {
		t.Errorf("allow-once on the cancelled approval: HTTP %d, want 409", code)
	}
	det, text, _ = second.call(t, "process", map[string]any{"agentId": "ap", "action": "poll", "sessionId": sessionID})
	if det["status"] != "failed" || !strings.Contains(stringOf(det["reason"])+text, "daemon restarted") {
		t.Errorf("the waiting session after the restart: %v %q, want failed because the daemon restarted", det, text)
	}
	// The exit event is in the journal.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://sandboxctl/v1/events?since=0", nil)
	resp, err := second.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(resp.Body)
	for {
		var ev struct {
			Type, SessionID, Text string
		}
		if err := dec.Decode(&ev); err != nil {
			t.Errorf("no exit event for session %s: %v", sessionID, err)
			break
		}
		if ev.Type == "exit" && ev.SessionID == sessionID {
			if !strings.Contains(ev.Text, "daemon restarted") {
				t.Errorf("exit event: %q", ev.Text)
			}
			break
		}
	}
	resp.Body.Close()

	// The same exec again asks anew: nothing was left to use.
	det, text, _ = second.call(t, "exec", map[string]any{"agentId": "ap", "command": "touch " + marker, "background": true})
	again, _ := det["approvalId"].(string)
	if det["status"] != "approval-pending" || again == "" || again == approvalID {
		t.Fatalf("the same exec after the restart: %v %q, want a new approval request", det, text)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the command ran without a decision")
	}
	if code := resolveApproval(t, second, again, "allow-once"); code != http.StatusOK {
		t.Fatalf("allow-once on the new request: HTTP %d", code)
	}
	pollUntil(t, second, "ap", stringOf(det["sessionId"]), 20*time.Second, func(all string) bool { return strings.Contains(all, "Process exited with code 0") })
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("the approved command did not run: %v", err)
	}
}

// TestFaultPausedSandboxSessionReadopted replays issue 32 item 5 (paused
// sandbox): a sandbox is paused behind the daemon's back while the daemon
// is down and a command runs in it. The restarted daemon re-adopts the
// session (it does not vanish, and the command does not run on unseen): it
// is listed, and it ends with its whole output.
func TestFaultPausedSandboxSessionReadopted(t *testing.T) {
	cli := requireDocker(t, testImage)
	prefix := "sbxi-paused-" + randSuffix() + "-"
	t.Cleanup(func() { removeByPrefix(cli, prefix) })
	state := t.TempDir()
	config := sandboxDaemonConfig(state, prefix)
	first := startDaemonIn(t, state, config)
	det, text, _ := first.call(t, "exec", scoped("pz", map[string]any{"background": true,
		"command": `i=1; while [ $i -le 20 ]; do echo P$i; i=$((i+1)); sleep 0.2; done`}))
	id, _ := det["sessionId"].(string)
	if id == "" {
		t.Fatalf("exec: %v %q", det, text)
	}
	pollUntil(t, first, "pz", id, 20*time.Second, func(all string) bool { return strings.Contains(all, "P2\n") })
	if err := first.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = first.cmd.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := cli.ContainerPause(ctx, containerOf(t, cli, prefix), client.ContainerPauseOptions{}); err != nil {
		t.Fatal(err)
	}

	begin := time.Now()
	second := startDaemonIn(t, state, config)
	_, list, _ := second.call(t, "process", scoped("pz", map[string]any{"action": "list"}))
	if !strings.Contains(list, id) {
		t.Fatalf("the session of the paused sandbox is not listed after the restart:\n%s", list)
	}
	all := pollUntil(t, second, "pz", id, 30*time.Second, func(all string) bool {
		return strings.Contains(all, "Process exited") || strings.Contains(all, "Process failed") || strings.Contains(all, "No session")
	})
	t.Logf("recovery: the session of the paused sandbox ended %v after the restart began", time.Since(begin).Round(time.Millisecond))
	if !strings.Contains(all, "Process exited with code 0.") {
		t.Fatalf("the session after the restart:\n%s", all)
	}
	_, log, _ := second.call(t, "process", scoped("pz", map[string]any{"action": "log", "sessionId": id, "limit": 1000}))
	for i := 1; i <= 20; i++ {
		if n := strings.Count(log+"\n", fmt.Sprintf("P%d\n", i)); n != 1 {
			t.Fatalf("output: P%d %d times, want once:\n%s", i, n, log)
		}
	}
}

// TestFaultNodeSupervisorEndsWithItsAgent replays issue 32 item 9 (host
// supervisors left behind): a node agent stopped with SIGTERM, as a service
// manager stops it, ends its idle host supervisor; and one whose agent was
// SIGKILLed and whose state directory was then removed (the agent
// restarted with another state directory) ends once idle, instead of
// staying for hours.
func TestFaultNodeSupervisorEndsWithItsAgent(t *testing.T) {
	for _, how := range []string{"sigterm", "sigkill-state-removed"} {
		t.Run(how, func(t *testing.T) {
			state, nodeState := t.TempDir(), t.TempDir()
			addr := loopbackAddr(t)
			d, token := startNodeDaemonIn(t, state, addr)
			agent := startNodeAgent(t, nodeState, addr, token, "ending")
			waitNodeConnected(t, d, "ending")
			if _, text, code := d.call(t, "exec", map[string]any{"agentId": "durable", "command": "echo on-node"}); code != 200 || !strings.Contains(text, "on-node") {
				t.Fatalf("exec on the node: %d %q", code, text)
			}
			supDir := filepath.Join(nodeState, "node", "sup")
			if len(procArgs(t, supDir)) != 1 {
				t.Fatalf("want one host supervisor of %s: %q", supDir, procArgs(t, supDir))
			}
			begin := time.Now()
			switch how {
			case "sigterm":
				if err := agent.cmd.Process.Signal(syscall.SIGTERM); err != nil {
					t.Fatal(err)
				}
				<-agent.exited
			case "sigkill-state-removed":
				agent.kill(t)
				if len(procArgs(t, supDir)) != 1 {
					t.Fatalf("the host supervisor died with its agent: nothing to replay")
				}
				begin = time.Now()
				if err := os.RemoveAll(filepath.Join(nodeState, "node")); err != nil {
					t.Fatal(err)
				}
			}
			for deadline := time.Now().Add(15 * time.Second); len(procArgs(t, supDir)) > 0; time.Sleep(20 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("the node's idle host supervisor is left running: %q", procArgs(t, supDir))
				}
			}
			t.Logf("recovery: the idle host supervisor was gone %v after the %s", time.Since(begin).Round(time.Millisecond), how)
		})
	}
}

// engineProxy forwards a unix socket of the test's own to the Engine's, so
// that a test can make the Engine unreachable for one daemon (down) and
// reachable again (up) without touching the Engine other tests share.
type engineProxy struct {
	path, target string
	mu           sync.Mutex
	ln           net.Listener
	conns        map[net.Conn]struct{}
}

func newEngineProxy(t *testing.T) *engineProxy {
	t.Helper()
	target := "/var/run/docker.sock"
	if h := os.Getenv("DOCKER_HOST"); strings.HasPrefix(h, "unix://") {
		target = strings.TrimPrefix(h, "unix://")
	}
	return newEngineProxyTo(t, target)
}

// newEngineProxyTo is a proxy to the Engine at the unix socket target.
func newEngineProxyTo(t *testing.T, target string) *engineProxy {
	t.Helper()
	dir, err := os.MkdirTemp("/tmp", "sbxp-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	p := &engineProxy{path: filepath.Join(dir, "d.sock"), target: target, conns: map[net.Conn]struct{}{}}
	p.up(t)
	t.Cleanup(p.down)
	return p
}

func (p *engineProxy) env() []string { return []string{"DOCKER_HOST=unix://" + p.path} }

// up listens and forwards every connection to the Engine.
func (p *engineProxy) up(t *testing.T) {
	t.Helper()
	ln, err := net.Listen("unix", p.path)
	if err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			e, err := net.Dial("unix", p.target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns[c], p.conns[e] = struct{}{}, struct{}{}
			p.mu.Unlock()
			go func() { _, _ = io.Copy(e, c); e.Close() }()
			go func() { _, _ = io.Copy(c, e); c.Close() }()
		}
	}()
}

// down closes the socket and every forwarded connection: the Engine does
// not answer through it any more.
func (p *engineProxy) down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
	}
	p.conns = map[net.Conn]struct{}{}
	_ = os.Remove(p.path)
}

// TestFaultEngineDownAtRestartReadopts replays issue 32 item 5 (Engine
// down): the daemon is SIGKILLed while a sandbox command runs, and the next
// daemon starts while the Engine does not answer it. The session does not
// vanish for good: once the Engine answers, it is re-adopted under its id
// and ends with its output.
func TestFaultEngineDownAtRestartReadopts(t *testing.T) {
	cli := requireDocker(t, testImage)
	prefix := "sbxi-engdown-" + randSuffix() + "-"
	t.Cleanup(func() { removeByPrefix(cli, prefix) })
	proxy := newEngineProxy(t)
	state := t.TempDir()
	config := sandboxDaemonConfig(state, prefix)
	first := startDaemonEnv(t, state, config, proxy.env())
	det, text, _ := first.call(t, "exec", scoped("ed", map[string]any{"background": true,
		"command": `echo start; while [ ! -e /workspace/gate ]; do sleep 0.1; done; echo end`}))
	id, _ := det["sessionId"].(string)
	if id == "" {
		t.Fatalf("exec: %v %q", det, text)
	}
	pollUntil(t, first, "ed", id, 20*time.Second, func(all string) bool { return strings.Contains(all, "start") })
	if err := first.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = first.cmd.Wait()
	proxy.down()

	second := startDaemonEnv(t, state, config, proxy.env())
	begin := time.Now()
	proxy.up(t)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		_, list, _ := second.call(t, "process", scoped("ed", map[string]any{"action": "list"}))
		if strings.Contains(list, id) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the session was not re-adopted within 30 s of the Engine answering again:\n%s", list)
		}
	}
	t.Logf("recovery: the session was re-adopted %v after the Engine answered again", time.Since(begin).Round(time.Millisecond))
	if _, text, code := second.call(t, "exec", scoped("ed", map[string]any{"command": "touch /workspace/gate"})); code != 200 {
		t.Fatalf("open the gate: %d %q", code, text)
	}
	all := pollUntil(t, second, "ed", id, 30*time.Second, func(all string) bool {
		return strings.Contains(all, "Process exited") || strings.Contains(all, "Process failed")
	})
	if !strings.Contains(all, "end") || !strings.Contains(all, "Process exited with code 0.") {
		t.Fatalf("the re-adopted session:\n%s", all)
	}
}

// TestFaultCorruptGatewayRecordReported replays issue 32 item 5 (corrupt
// metadata): the daemon and its host supervisor are SIGKILLed while a
// gateway command runs, and the session's record on disk is corrupt. The
// next daemon ends what the command left running and reports the session
// as failed with the reason, instead of letting it vanish.
func TestFaultCorruptGatewayRecordReported(t *testing.T) {
	state := t.TempDir()
	_, pid := gatewayRunThenKillBoth(t, state)
	metas, _ := filepath.Glob(filepath.Join(state, "gateway-supervisor", "*", "meta.json"))
	if len(metas) != 1 {
		t.Fatalf("want one session record: %v", metas)
	}
	if err := os.WriteFile(metas[0], []byte("{\"id\": \x00garbage"), 0o600); err != nil {
		t.Fatal(err)
	}

	begin := time.Now()
	second := startDaemonIn(t, state, gatewayFull)
	waitDead(t, pid, 10*time.Second)
	t.Logf("recovery: the next daemon answered and had ended the command %v after its start", time.Since(begin).Round(time.Millisecond))
	det, list, _ := second.call(t, "process", map[string]any{"action": "list"})
	all, _ := det["sessions"].([]any)
	found := false
	for _, s := range all {
		m, _ := s.(map[string]any)
		found = found || (m["status"] == "failed" && strings.Contains(stringOf(m["reason"]), "record (meta.json) is unreadable"))
	}
	if !found {
		t.Fatalf("the session with a corrupt record after the restart: %v\n%s", det, list)
	}
}
