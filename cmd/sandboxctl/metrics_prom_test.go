package main_test

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// promServer is a private Prometheus (Debian's prometheus package, from
// scripts/toolchain.sh) scraping one target every second.
type promServer struct {
	base string
}

func startPrometheus(t *testing.T, target, token string) *promServer {
	t.Helper()
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Fatal("prometheus is not installed: run scripts/toolchain.sh (make toolchain)")
	}
	dir := t.TempDir()
	cfg := fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: sandboxctl
    authorization:
      credentials: %q
    static_configs:
      - targets: [%q]
`, token, target)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	cmd := exec.Command(bin, "--config.file="+filepath.Join(dir, "prometheus.yml"), "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn")
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	p := &promServer{base: "http://" + addr}
	p.waitFor(t, "prometheus ready", func() bool {
		resp, err := http.Get(p.base + "/-/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	return p
}

// query runs an instant query and returns each series' labels and value.
func (p *promServer) query(t *testing.T, q string) []map[string]string {
	t.Helper()
	resp, err := http.Get(p.base + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Status string `json:"status"`
		Data   struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		} `json:"data"`
		Error string `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || body.Status != "success" {
		t.Fatalf("query %s: %v %s", q, err, body.Error)
	}
	var out []map[string]string
	for _, r := range body.Data.Result {
		m := r.Metric
		if m == nil {
			m = map[string]string{}
		}
		m["__value"], _ = r.Value[1].(string)
		out = append(out, m)
	}
	return out
}

// value is the single value of q, "" when q has no result.
func (p *promServer) value(t *testing.T, q string) string {
	t.Helper()
	res := p.query(t, q)
	if len(res) == 0 {
		return ""
	}
	if len(res) > 1 {
		t.Fatalf("query %s: %d series", q, len(res))
	}
	return res[0]["__value"]
}

func (p *promServer) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); !cond(); time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// TestMetricsScrapedByPrometheus scrapes a real daemon with Prometheus:
// every series of the fixed label sets exists, the host label is the host
// that ran the command, and 20 calls with random host values and 20 with
// random actions add no series (they count under "invalid").
func TestMetricsScrapedByPrometheus(t *testing.T) {
	e := newEnv(t)
	const token = "metrics-tool-token-0123456789"
	base := serveTCP(t, e, "SANDBOXCTL_TOKEN="+token)
	prom := startPrometheus(t, strings.TrimPrefix(base, "http://"), token)

	if code, body := callTCP(t, base, token, "POST", "/v1/tools/exec", map[string]any{"command": "echo hi"}); code != 200 {
		t.Fatalf("exec: %d %s", code, body)
	}
	prom.waitFor(t, "the first exec scraped", func() bool {
		return prom.value(t, `sandboxctl_exec_total{host="gateway",status="completed"}`) == "1"
	})
	for _, name := range []string{"sandboxctl_sandboxes", "sandboxctl_sessions_running", "sandboxctl_approvals_pending",
		"sandboxctl_supervisor_fallbacks_total", "sandboxctl_sandbox_create_seconds_count", "sandboxctl_image_build_seconds_count",
		"sandboxctl_output_bytes_total", "sandboxctl_engine_errors_total", "sandboxctl_process_total", "sandboxctl_exec_call_seconds_count"} {
		if len(prom.query(t, name)) == 0 {
			t.Errorf("series %s missing", name)
		}
	}
	if v := prom.value(t, `sandboxctl_output_bytes_total{tool="exec"}`); v == "" || v == "0" {
		t.Errorf("output bytes after an exec: %q", v)
	}
	before := prom.value(t, `count({__name__=~"sandboxctl_.+"})`)

	rnd := func() string {
		b := make([]byte, 6)
		_, _ = rand.Read(b)
		return hex.EncodeToString(b)
	}
	for range 20 {
		if code, _ := callTCP(t, base, token, "POST", "/v1/tools/exec", map[string]any{"command": "true", "host": "h-" + rnd()}); code != 400 {
			t.Fatalf("exec with a random host: %d", code)
		}
		if code, _ := callTCP(t, base, token, "POST", "/v1/tools/process", map[string]any{"action": "a-" + rnd(), "sessionId": "x"}); code != 400 {
			t.Fatalf("process with a random action: %d", code)
		}
	}
	prom.waitFor(t, "the hostile calls scraped", func() bool {
		return prom.value(t, `sum(sandboxctl_exec_total{status="invalid"})`) == "20" &&
			prom.value(t, `sum(sandboxctl_process_total{outcome="invalid"})`) == "20"
	})
	if after := prom.value(t, `count({__name__=~"sandboxctl_.+"})`); after != before {
		t.Fatalf("hostile input changed the number of series: %s → %s", before, after)
	}
	if n, _ := strconv.Atoi(before); n == 0 || n > 400 {
		t.Fatalf("series count %s", before)
	}
	if prom.value(t, `sandboxctl_exec_total{host="none",status="invalid"}`) != "20" ||
		prom.value(t, `sandboxctl_process_total{action="invalid",outcome="invalid"}`) != "20" {
		t.Fatal("the hostile calls are not counted under invalid")
	}
	for _, q := range []string{`{host=~"h-.*"}`, `{action=~"a-.*"}`} {
		if res := prom.query(t, q); len(res) != 0 {
			t.Fatalf("%s: hostile label values became series: %v", q, res)
		}
	}
}
