package main_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// lockedBuffer is a bytes.Buffer a process writes while the test reads.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestServeJSONLogAndMetrics: `serve --log-format json` writes one JSON
// object a line (time, level, msg), one access line per request naming the
// caller, and after a real exec /metrics has the build info and the
// command's run time.
func TestServeJSONLogAndMetrics(t *testing.T) {
	e := newEnv(t)
	const token = "log-metrics-tool-token-0123456789"
	base, stderr, stop := startJSONLogDaemon(t, e, token, nil)

	if code, body := callTCP(t, base, token, "POST", "/v1/tools/exec", map[string]any{"command": "echo hi", "host": "gateway"}); code != 200 {
		t.Fatalf("exec: %d %s", code, body)
	}
	code, body := callTCP(t, base, token, "GET", "/metrics", nil)
	if code != 200 {
		t.Fatalf("GET /metrics: %d", code)
	}
	metrics := string(body)
	for _, want := range []string{
		`sandboxctl_build_info{goversion="go`,
		`sandboxctl_command_run_seconds_count{host="gateway",status="completed"} 1`,
		`sandboxctl_approval_decisions_total{by="human",decision="run"} 0`,
		`sandboxctl_approval_decision_seconds_count{by="fallback",decision="deny"} 0`,
		`sandboxctl_warm_pool_total{result="hit"} 0`,
		`sandboxctl_warm_pool_total{result="miss"} 0`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics after an exec has no %q", want)
		}
	}
	if code, _ := callTCP(t, base, "not-the-token-0123456789", "GET", "/v1/sessions", nil); code != 401 {
		t.Errorf("a wrong token: %d, want 401", code)
	}
	stop()

	var access []map[string]any
	sc := bufio.NewScanner(strings.NewReader(stderr.String()))
	for sc.Scan() {
		var line map[string]any
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Errorf("a log line is not JSON: %q (%v)", sc.Text(), err)
			continue
		}
		for _, k := range []string{"time", "level", "msg"} {
			if _, ok := line[k]; !ok {
				t.Errorf("log line %q has no %s", sc.Text(), k)
			}
		}
		if line["level"] == "ERROR" {
			t.Errorf("an error line in a run without errors: %q", sc.Text())
		}
		if line["msg"] == "request" {
			access = append(access, line)
		}
	}
	find := func(method, path string) map[string]any {
		for _, a := range access {
			if a["method"] == method && a["path"] == path {
				return a
			}
		}
		t.Errorf("no access line for %s %s in %v", method, path, access)
		return nil
	}
	if a := find("POST", "/v1/tools/exec"); a != nil {
		if a["caller"] != "tool-token" || a["status"] != float64(200) || a["listener"] != "tcp" || a["remote"] == nil || a["duration_ms"] == nil {
			t.Errorf("access line of the exec: %v", a)
		}
	}
	if a := find("GET", "/v1/sessions"); a != nil && (a["caller"] != "none" || a["status"] != float64(401)) {
		t.Errorf("access line of the refused request: %v", a)
	}
}

// startJSONLogDaemon starts `serve --listen --log-format json` on e's state
// with the tool token token (and extraEnv), waits until it answers on TCP,
// and stops it (SIGTERM) at the test's end or when stop is called. stderr
// is its log.
func startJSONLogDaemon(t *testing.T, e *env, token string, extraEnv []string) (base string, stderr *lockedBuffer, stop func()) {
	t.Helper()
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	serve := exec.Command(binary, "--state", e.state, "--config", e.config, "serve", "--listen", addr, "--log-format", "json")
	serve.Env = append(append(os.Environ(), "SANDBOXCTL_TOKEN="+token), extraEnv...)
	stderr = &lockedBuffer{}
	serve.Stderr = stderr
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = serve.Wait(); close(done) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		_ = serve.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = serve.Process.Kill()
			<-done
			t.Errorf("daemon did not stop on SIGTERM")
		}
	}
	t.Cleanup(stop)
	base = "http://" + addr
	deadline := time.Now().Add(30 * time.Second)
	for {
		if resp, err := http.Get(base + "/healthz"); err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("daemon did not answer on TCP; stderr:\n%s", stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	return base, stderr, stop
}
