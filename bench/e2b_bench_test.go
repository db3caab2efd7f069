package bench

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxctl/sandboxctl/internal/dockertest"
	"github.com/sandboxctl/sandboxctl/internal/testbuild"
	"github.com/sandboxctl/sandboxctl/sandbox/sandboxconfig"
)

// BenchmarkE2BTimeToInteractive times what the public sandbox benchmarks
// call time to interactive: the e2b SDK's Sandbox.create() plus its first
// commands.run('echo'), 50 runs one after the other, against `serve
// --e2b`, without and with the warm pool; beside it, from the same run,
// our own API's figure (one POST /v1/tools/exec of `echo` for a new
// session scope: create and run in one call). Each sandbox is removed
// after its timing. Needs node and the SDK project's npm ci
// (internal/e2b/testdata/sdk).
//
//	go test -run '^$' -bench E2BTimeToInteractive -benchtime 1x ./bench/
func BenchmarkE2BTimeToInteractive(b *testing.B) {
	image := sandboxconfig.DefaultConfig().Docker.Image
	dockertest.Require(b, image)
	sdk, err := filepath.Abs(filepath.Join("..", "internal", "e2b", "testdata", "sdk"))
	if err != nil {
		b.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(sdk, "node_modules", "e2b")); err != nil {
		cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund")
		cmd.Dir = sdk
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("npm ci: %v\n%s", err, out)
		}
	}
	bins, err := testbuild.Build(b.TempDir(), "sandboxctl", "sandboxctld", "sandboxctl-supervisor")
	if err != nil {
		b.Fatal(err)
	}
	const runs, poolSize = 50, 4
	var t table
	for _, pool := range []int{0, poolSize} {
		sdkTimes, ownTimes := e2bRound(b, bins, sdk, pool, runs)
		label := "cold (no pool)"
		if pool > 0 {
			label = fmt.Sprintf("warm pool of %d", pool)
		}
		t.add("e2b SDK create + first run, "+label+", p50/p99 of 50", ms(percentile(sdkTimes, 50))+" / "+ms(percentile(sdkTimes, 99)),
			"own API exec: "+ms(percentile(ownTimes, 50))+" / "+ms(percentile(ownTimes, 99)), "")
		b.ReportMetric(float64(percentile(sdkTimes, 50).Microseconds())/1000, fmt.Sprintf("ms-p50-sdk-pool%d", pool))
		b.ReportMetric(float64(percentile(ownTimes, 50).Microseconds())/1000, fmt.Sprintf("ms-p50-own-pool%d", pool))
	}
	t.print(os.Stdout)
}

// percentile is the nearest-rank p-th percentile of d.
func percentile(d []time.Duration, p int) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	i := (p*len(s)+99)/100 - 1
	return s[max(i, 0)]
}

func freeAddr(b *testing.B) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// e2bRound starts a daemon with a pool of pool sandboxes and times runs
// SDK starts, then runs of our own API.
func e2bRound(b *testing.B, bins []string, sdk string, pool, runs int) (sdkTimes, ownTimes []time.Duration) {
	state := b.TempDir()
	var tag [4]byte
	_, _ = rand.Read(tag[:])
	prefix := "benche2b-" + hex.EncodeToString(tag[:]) + "-"
	cfg := filepath.Join(state, "sandboxctl.yaml")
	body := fmt.Sprintf("sandbox:\n  scope: session\n  maxPerAgent: 64\n  pool:\n    size: %d\n  workspaceRoot: %s\n  docker:\n    containerPrefix: %s\n", pool, filepath.Join(state, "ws"), prefix)
	if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
		b.Fatal(err)
	}
	const key, token = "bench-e2b-key-0123456789", "bench-tool-token-0123456789"
	if err := os.WriteFile(filepath.Join(state, "agent-tokens.json"), []byte(`{"bench":"`+key+`"}`), 0o600); err != nil {
		b.Fatal(err)
	}
	base := []string{"--state", state, "--config", cfg}
	listen, e2bAddr := freeAddr(b), freeAddr(b)
	serve := exec.Command(bins[0], append(base, "serve", "--listen", listen, "--e2b", e2bAddr)...)
	serve.Env = append(os.Environ(), "SANDBOXCTLD="+bins[1], "SANDBOXCTL_SUPERVISOR="+bins[2], "SANDBOXCTL_TOKEN="+token)
	if err := serve.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() {
		_ = serve.Process.Signal(syscall.SIGTERM)
		_ = serve.Wait()
	}()
	api := func(method, path, body string) (int, []byte, error) {
		req, err := http.NewRequest(method, "http://"+listen+path, strings.NewReader(body))
		if err != nil {
			return 0, nil, err
		}
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, nil, err
		}
		defer resp.Body.Close()
		var out bytes.Buffer
		_, _ = out.ReadFrom(resp.Body)
		return resp.StatusCode, out.Bytes(), nil
	}
	// Wait until the daemon answers and its pool is full.
	waitPool := func() {
		deadline := time.Now().Add(3 * time.Minute)
		for {
			code, body, err := api("GET", "/v1/sandboxes", "")
			if err == nil && code == http.StatusOK {
				var list []struct {
					Pool string `json:"pool"`
				}
				_ = json.Unmarshal(body, &list)
				ready := 0
				for _, s := range list {
					if s.Pool == "ready" {
						ready++
					}
				}
				if ready >= pool {
					return
				}
			}
			if time.Now().After(deadline) {
				b.Fatalf("the daemon did not fill its pool of %d", pool)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	waitPool()
	node := exec.Command("node", "bench.mjs", fmt.Sprint(runs))
	node.Dir = sdk
	node.Env = append(os.Environ(), "E2B_API_URL=http://"+e2bAddr, "E2B_SANDBOX_URL=http://"+e2bAddr, "E2B_API_KEY="+key)
	var stdout, stderr bytes.Buffer
	node.Stdout, node.Stderr = &stdout, &stderr
	if err := node.Run(); err != nil {
		b.Fatalf("bench.mjs: %v\n%s", err, stderr.String())
	}
	var msList []float64
	if err := json.Unmarshal(stdout.Bytes(), &msList); err != nil || len(msList) != runs {
		b.Fatalf("bench.mjs printed %q: %v", stdout.String(), err)
	}
	for _, m := range msList {
		sdkTimes = append(sdkTimes, time.Duration(m*float64(time.Millisecond)))
	}
	waitPool()
	for i := range runs {
		session := fmt.Sprintf("own%d", i)
		start := time.Now()
		code, body, err := api("POST", "/v1/tools/exec", fmt.Sprintf(`{"command":"echo","host":"sandbox","agentId":"bench","sessionKey":%q}`, session))
		d := time.Since(start)
		if err != nil || code != http.StatusOK || !strings.Contains(string(body), `"status":"completed"`) {
			b.Fatalf("exec: %d %s %v", code, body, err)
		}
		ownTimes = append(ownTimes, d)
		rm := exec.Command(bins[0], append(base, "sandbox", "rm", "--agent", "bench", "--session", session)...)
		rm.Env = serve.Env
		if out, err := rm.CombinedOutput(); err != nil {
			b.Fatalf("sandbox rm: %v: %s", err, out)
		}
	}
	return sdkTimes, ownTimes
}
