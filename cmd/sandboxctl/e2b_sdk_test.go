package main_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxctl/sandboxctl/internal/dockertest"
	"github.com/sandboxctl/sandboxctl/internal/testbuild"
	"github.com/sandboxctl/sandboxctl/sandbox/sandboxconfig"
)

// e2bSDKDir holds the e2b SDK test project (package.json, lockfile).
var e2bSDKDir = filepath.Join("..", "..", "internal", "e2b", "testdata", "sdk")

const (
	e2bAliceKey = "e2b-alice-key-0123456789"
	e2bBobKey   = "e2b-bob-key-0123456789"
)

// e2bEnv is a state directory whose config gives every E2B sandbox its
// own container (scope session) and two API keys (agent tokens).
func e2bEnv(t *testing.T) (*env, string) {
	t.Helper()
	dockertest.Require(t, sandboxconfig.DefaultConfig().Docker.Image)
	e := newEnv(t)
	prefix := fmt.Sprintf("sbxe2b-%d-", time.Now().UnixNano()%1e6)
	cfg := fmt.Sprintf("sandbox:\n  scope: session\n  maxPerAgent: 2\n  templates:\n    small:\n      memory: 256m\n      env:\n        FLAVOR: small\n  workspaceRoot: %s\n  docker:\n    containerPrefix: %s\n", filepath.Join(e.state, "ws"), prefix)
	if err := os.WriteFile(e.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	tokens := fmt.Sprintf(`{"alice":%q,"bob":%q}`, e2bAliceKey, e2bBobKey)
	if err := os.WriteFile(filepath.Join(e.state, "agent-tokens.json"), []byte(tokens), 0o600); err != nil {
		t.Fatal(err)
	}
	sup, err := testbuild.Package(t.TempDir(), "cmd/sandboxctl-supervisor")
	if err != nil {
		t.Fatal(err)
	}
	return e, sup
}

// startE2B runs `serve --listen L --e2b A` in the foreground and waits for
// both; it returns the process and the two base URLs.
func startE2B(t *testing.T, e *env, sup, listen, e2bAddr string) *exec.Cmd {
	t.Helper()
	serve := exec.Command(binary, "--state", e.state, "--config", e.config, "serve", "--listen", listen, "--e2b", e2bAddr)
	serve.Env = append(os.Environ(), "SANDBOXCTL_TOKEN="+filesToolToken, "SANDBOXCTL_SUPERVISOR="+sup)
	serve.Stderr = os.Stderr
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = serve.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = serve.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = serve.Process.Kill()
			<-done
			t.Errorf("daemon did not stop on SIGTERM")
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + e2bAddr + "/health")
		if err == nil {
			resp.Body.Close()
			return serve
		}
		if time.Now().After(deadline) {
			t.Fatal("the E2B API did not answer")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

var sandboxIDLine = regexp.MustCompile(`(?m)^sandbox-id: (\S+)$`)

// runE2BScript runs a script of the SDK project against e2bAddr and
// returns its stdout; it fails the test unless the script ends with
// E2B-SDK-OK (or wantOK is false). Every sandbox it created is removed
// at the end of the test.
func runE2BScript(t *testing.T, e *env, e2bAddr string, wantOK bool, args ...string) string {
	t.Helper()
	cmd := exec.Command("node", args...)
	cmd.Dir = e2bSDKDir
	cmd.Env = append(os.Environ(), "E2B_API_URL=http://"+e2bAddr, "E2B_SANDBOX_URL=http://"+e2bAddr,
		"E2B_API_KEY="+e2bAliceKey, "OTHER_API_KEY="+e2bBobKey)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(4 * time.Minute):
		_ = cmd.Process.Kill()
		err = <-done
		t.Errorf("node %v did not finish", args)
	}
	for _, m := range sandboxIDLine.FindAllStringSubmatch(stdout.String(), -1) {
		id := m[1]
		t.Cleanup(func() { e.run(t, "sandbox", "rm", "--agent", "alice", "--session", id) })
	}
	if err != nil || (wantOK && !strings.HasSuffix(stdout.String(), "E2B-SDK-OK\n")) {
		t.Fatalf("node %v: %v\nstdout:\n%s\nstderr:\n%s", args, err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// TestE2BSDK runs the official e2b npm SDK, unchanged, against
// `sandboxctl serve --e2b`: its quickstart and more (quickstart.mjs), the
// envd API's authentication, and a background command that outlives a
// daemon SIGKILL and is found again with commands.connect.
func TestE2BSDK(t *testing.T) {
	e, sup := e2bEnv(t)
	npmCI(t, e2bSDKDir, "e2b")
	listen := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	e2bAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	serve := startE2B(t, e, sup, listen, e2bAddr)

	t.Run("quickstart", func(t *testing.T) {
		runE2BScript(t, e, e2bAddr, true, "quickstart.mjs")
	})

	t.Run("envd refuses a wrong access token and an unknown sandbox", func(t *testing.T) {
		out := runE2BScript(t, e, e2bAddr, false, "restart.mjs", "start")
		var started struct {
			SandboxID string `json:"sandboxId"`
			PID       int    `json:"pid"`
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if err := json.Unmarshal([]byte(lines[len(lines)-1]), &started); err != nil || started.SandboxID == "" {
			t.Fatalf("restart.mjs start: %v: %s", err, out)
		}
		rpc := func(id, token string) int {
			req, _ := http.NewRequest("POST", "http://"+e2bAddr+"/process.Process/List", strings.NewReader("{}"))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("E2b-Sandbox-Id", id)
			req.Header.Set("X-Access-Token", token)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			return resp.StatusCode
		}
		if code := rpc(started.SandboxID, "wrong-token"); code != http.StatusUnauthorized {
			t.Errorf("a wrong access token: %d, want 401", code)
		}
		if code := rpc("inosuchsandbox", "x"); code != http.StatusBadGateway {
			t.Errorf("an unknown sandbox: %d, want 502", code)
		}
		// The process is one of our sessions: the daemon's own API lists
		// it under alice with the sandbox id as its session key.
		code, body := callTCP(t, "http://"+listen, filesToolToken, "GET", "/v1/sessions?agent=alice", nil)
		if code != http.StatusOK || !strings.Contains(string(body), `"sessionKey":"`+started.SandboxID+`"`) {
			t.Fatalf("GET /v1/sessions: %d %s", code, body)
		}

		// SIGKILL the daemon; the restarted one finds the process again.
		if err := serve.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(20 * time.Second)
		for {
			if _, err := http.Get("http://" + e2bAddr + "/health"); err != nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the killed daemon still answers")
			}
			time.Sleep(50 * time.Millisecond)
		}
		startE2B(t, e, sup, listen, e2bAddr)
		runE2BScript(t, e, e2bAddr, true, "restart.mjs", "connect", started.SandboxID, fmt.Sprint(started.PID))
	})
}
