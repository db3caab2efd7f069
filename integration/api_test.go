package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// daemonUnderTest is a `sandboxctl serve` process with its own state dir,
// reached over its unix socket as an agent runtime would.
type daemonUnderTest struct {
	state string
	cmd   *exec.Cmd
	hc    *http.Client
}

// legacyGateway runs gateway commands as the daemon's user, without the
// envelope (exec.envelope.enabled false), in every daemon these tests start
// whose config does not name exec.envelope: they prove the guard, the
// external-directory confinement and the approval layers as a daemon whose
// commands share its uid sees them, with workspaces and markers in the
// test's own directories. The envelope's own tests are hostexec's
// TestSecurityGateway* and cmd/sandboxctl's TestSecurityDaemonGatewayEnvelope.
const legacyGateway = "  envelope:\n    enabled: false\n"

func startDaemon(t *testing.T, config string) *daemonUnderTest {
	t.Helper()
	return startDaemonIn(t, t.TempDir(), config)
}

// startDaemonIn starts a daemon on an existing state directory (a restart
// when an earlier daemon used it).
func startDaemonIn(t *testing.T, state, config string) *daemonUnderTest {
	t.Helper()
	return startDaemonEnv(t, state, config, nil)
}

// startDaemonEnv is startDaemonIn with extra environment (KEY=VALUE), e.g.
// DOCKER_HOST for an Engine of the test's own.
func startDaemonEnv(t *testing.T, state, config string, env []string) *daemonUnderTest {
	t.Helper()
	bin := buildBinary(t, "sandboxctl")
	cfgPath := filepath.Join(state, "sandboxctl.yaml")
	if !strings.Contains(config, "envelope:") {
		config = strings.Replace(config, "exec:\n", "exec:\n"+legacyGateway, 1)
	}
	if err := os.WriteFile(cfgPath, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--state", state, "--config", cfgPath, "serve")
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	return startDaemonArgs(t, state, cmd)
}

// startDaemonArgs starts cmd, a daemon on state, and waits until it answers.
func startDaemonArgs(t *testing.T, state string, cmd *exec.Cmd) *daemonUnderTest {
	t.Helper()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(state, "sandboxctl.sock")
	d := &daemonUnderTest{state: state, cmd: cmd, hc: &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		}}}}
	t.Cleanup(func() {
		if cmd.ProcessState != nil {
			return // the test already ended it
		}
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-done
			t.Errorf("daemon did not stop on SIGINT")
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := d.hc.Get("http://sandboxctl/healthz")
		if err == nil {
			resp.Body.Close()
			return d
		}
		if time.Now().After(deadline) {
			t.Fatalf("daemon not healthy: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// call posts body to a tool endpoint and returns details and the text.
func (d *daemonUnderTest) call(t *testing.T, tool string, body map[string]any) (map[string]any, string, int) {
	t.Helper()
	b, _ := json.Marshal(body)
	resp, err := d.hc.Post("http://sandboxctl/v1/tools/"+tool, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var res struct {
		Content []struct{ Text string } `json:"content"`
		Details map[string]any          `json:"details"`
		Error   string                  `json:"error"`
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		t.Fatalf("%s: %s", tool, raw)
	}
	text := res.Error
	if len(res.Content) > 0 {
		text = res.Content[0].Text
	}
	return res.Details, text, resp.StatusCode
}

const gatewayFull = "exec:\n  host: gateway\n  security: full\n  ask: \"off\"\n"

// TestScopeIsolationThroughAPI: session B can neither see nor touch session
// A's processes, whatever the action.
func TestScopeIsolationThroughAPI(t *testing.T) {
	d := startDaemon(t, gatewayFull)
	a := map[string]any{"sessionKey": "session-A", "agentId": "agent-1"}
	b := map[string]any{"sessionKey": "session-B", "agentId": "agent-1"}
	with := func(scope map[string]any, kv map[string]any) map[string]any {
		out := map[string]any{}
		for k, v := range scope {
			out[k] = v
		}
		for k, v := range kv {
			out[k] = v
		}
		return out
	}
	det, _, _ := d.call(t, "exec", with(a, map[string]any{"command": "cat", "background": true}))
	id, _ := det["sessionId"].(string)
	if det["status"] != "running" || id == "" {
		t.Fatalf("A's session: %v", det)
	}
	_, text, _ := d.call(t, "process", with(b, map[string]any{"action": "list"}))
	if strings.Contains(text, id) {
		t.Fatalf("B lists A's session: %q", text)
	}
	for _, action := range []map[string]any{
		{"action": "poll", "timeoutMs": 5000}, {"action": "log"}, {"action": "write", "data": "x\n"},
		{"action": "send-keys", "keys": []string{"enter"}}, {"action": "kill"}, {"action": "clear"}, {"action": "remove"},
	} {
		action["sessionId"] = id
		start := time.Now()
		_, text, _ := d.call(t, "process", with(b, action))
		if !strings.Contains(text, "No session found for "+id) {
			t.Errorf("B %s on A's session: %q", action["action"], text)
		}
		if time.Since(start) > 4*time.Second { // below the 5 s a poll would wait
			t.Errorf("B %s took %s (must answer at once)", action["action"], time.Since(start))
		}
	}
	// A's session is untouched: it still runs and still reads its stdin.
	d.call(t, "process", with(a, map[string]any{"action": "write", "sessionId": id, "data": "still-mine\n", "eof": true}))
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, text, _ := d.call(t, "process", with(a, map[string]any{"action": "poll", "sessionId": id, "timeoutMs": 2000}))
		if strings.Contains(text, "exited with code 0") {
			_, log, _ := d.call(t, "process", with(a, map[string]any{"action": "log", "sessionId": id}))
			if !strings.Contains(log, "still-mine") {
				t.Fatalf("A's log %q", log)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("A's session did not finish: %q", text)
		}
	}
}

// TestDaemonMemoryBoundedByOutputCaps streams 1 GB from one command through
// the daemon and checks the daemon's peak RSS stays far below it while the
// aggregated output is capped with a note.
func TestDaemonMemoryBoundedByOutputCaps(t *testing.T) {
	if testing.Short() {
		t.Skip("streams 1 GB")
	}
	d := startDaemon(t, gatewayFull)
	det, _, _ := d.call(t, "exec", map[string]any{"command": "head -c 1000000000 /dev/zero | tr '\\0' a", "background": true})
	id, _ := det["sessionId"].(string)
	deadline := time.Now().Add(5 * time.Minute)
	for {
		_, text, _ := d.call(t, "process", map[string]any{"action": "poll", "sessionId": id, "timeoutMs": 10000})
		if strings.Contains(text, "exited with code 0") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("1 GB did not finish in 5 minutes")
		}
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", d.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	var peakKB int
	for _, line := range strings.Split(string(status), "\n") {
		if strings.HasPrefix(line, "VmHWM:") {
			peakKB, _ = strconv.Atoi(strings.Fields(line)[1])
		}
	}
	t.Logf("daemon peak RSS after 1 GB of output: %d MiB", peakKB/1024)
	if peakKB == 0 || peakKB > 256*1024 {
		t.Fatalf("daemon peak RSS %d KiB; want bounded well below the 1 GB streamed", peakKB)
	}
	logDet, logText, _ := d.call(t, "process", map[string]any{"action": "log", "sessionId": id})
	if logDet["truncated"] != true && !strings.Contains(logText, "dropped") {
		t.Fatalf("aggregated output not capped: %v", logDet)
	}
	if len(logText) > 250000 {
		t.Fatalf("log returned %d chars; the cap is 200000", len(logText))
	}
}

// TestApprovalRequestedEventOnStream: an operator's UI following
// GET /v1/events sees an "approval" event when a command waits for a human.
func TestApprovalRequestedEventOnStream(t *testing.T) {
	d := startDaemon(t, "exec:\n  host: gateway\n  security: allowlist\n  ask: on-miss\n")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://sandboxctl/v1/events", nil)
	resp, err := d.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	events := make(chan map[string]any, 16)
	go func() {
		dec := json.NewDecoder(resp.Body)
		for {
			var ev map[string]any
			if dec.Decode(&ev) != nil {
				close(events)
				return
			}
			events <- ev
		}
	}()
	det, text, _ := d.call(t, "exec", map[string]any{"command": "touch " + filepath.Join(t.TempDir(), "M"), "agentId": "ops"})
	if det["status"] != "approval-pending" {
		t.Fatalf("%v %q", det, text)
	}
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatal("event stream ended")
			}
			if ev["type"] != "approval" {
				continue
			}
			evd, _ := ev["details"].(map[string]any)
			if evd["approvalId"] != det["approvalId"] || ev["agentId"] != "ops" {
				t.Fatalf("approval event %v for request %v", ev, det)
			}
			return
		case <-ctx.Done():
			t.Fatal("no approval event on the stream")
		}
	}
}
