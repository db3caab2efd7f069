// Command soak drives a sandboxctl daemon with N agents x M concurrent
// commands for a fixed time while it injects faults into the agents'
// sandboxes (docker kill, docker stop, SIGKILL of the supervisor), then
// prints errors, latency percentiles, commands that ran more than once,
// the daemon's RSS, fds and goroutines, and containers left behind.
//
//	go build -o /tmp/soak ./bench/soak && /tmp/soak -sandboxctl bin/sandboxctl -agents 4 -m 4 -duration 60s
//
// Every command appends a unique token to a file in its workspace; a token
// found twice is a command that ran twice.
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sandboxctl/sandboxctl/api"

	"github.com/moby/moby/client"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(1)
	}
}

type options struct {
	bin        string
	image      string
	agents, m  int
	duration   time.Duration
	faultEvery time.Duration
	keep       bool
}

func run() error {
	var o options
	flag.StringVar(&o.bin, "sandboxctl", "sandboxctl", "the sandboxctl binary (sandboxctld and sandboxctl-supervisor beside it)")
	flag.StringVar(&o.image, "image", "sandboxctl/testbb:1", "sandbox image")
	flag.IntVar(&o.agents, "agents", 4, "agents (one sandbox each)")
	flag.IntVar(&o.m, "m", 4, "concurrent commands per agent")
	flag.DurationVar(&o.duration, "duration", time.Minute, "how long to run")
	flag.DurationVar(&o.faultEvery, "fault-every", 5*time.Second, "mean time between faults (0: none)")
	flag.BoolVar(&o.keep, "keep", false, "keep the state directory and containers")
	flag.Parse()

	cli, err := client.New(client.FromEnv)
	if err != nil {
		return err
	}
	defer cli.Close()
	state, err := os.MkdirTemp("", "sbx-soak-")
	if err != nil {
		return err
	}
	prefix := "sbx-soak-" + randHex(3) + "-"
	cfgPath := filepath.Join(state, "sandboxctl.yaml")
	cfg := fmt.Sprintf("exec:\n  host: sandbox\n  security: full\n  ask: \"off\"\nsandbox:\n  workspaceRoot: %s\n  docker:\n    image: %s\n    containerPrefix: %s\n",
		filepath.Join(state, "ws"), o.image, prefix)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		return err
	}
	daemon := exec.Command(o.bin, "--state", state, "--config", cfgPath, "serve")
	logf, err := os.Create(filepath.Join(state, "serve.log"))
	if err != nil {
		return err
	}
	daemon.Stdout, daemon.Stderr = logf, logf
	if err := daemon.Start(); err != nil {
		return err
	}
	defer func() {
		_ = daemon.Process.Signal(os.Interrupt)
		_ = daemon.Wait()
		if !o.keep {
			removePrefix(cli, prefix)
			_ = os.RemoveAll(state)
		}
	}()
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: o.agents * o.m,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", filepath.Join(state, "sandboxctl.sock"))
		}}}
	if err := waitHealthy(hc); err != nil {
		return err
	}
	fmt.Printf("soak: %d agents x %d commands for %s, a fault every ~%s; state %s\n", o.agents, o.m, o.duration, o.faultEvery, state)

	var st stats
	ctx, cancel := context.WithTimeout(context.Background(), o.duration)
	defer cancel()
	var wg sync.WaitGroup
	for a := range o.agents {
		for range o.m {
			wg.Add(1)
			go func() {
				defer wg.Done()
				worker(ctx, hc, fmt.Sprintf("soak%d", a), &st)
			}()
		}
	}
	faults := map[string]int{}
	if o.faultEvery > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			injectFaults(ctx, cli, prefix, o.faultEvery, faults)
		}()
	}
	wg.Wait()

	// Report.
	fmt.Printf("commands: %d ok, %d failed/refused\n", st.ok, st.failed)
	fmt.Printf("faults injected: %v\n", faults)
	lat := st.latencies
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	fmt.Printf("latency: p50 %s p90 %s p99 %s max %s\n", pct(lat, 50), pct(lat, 90), pct(lat, 99), pct(lat, 100))
	errs := make([]string, 0, len(st.errors))
	for e, n := range st.errors {
		errs = append(errs, fmt.Sprintf("%6d  %s", n, e))
	}
	sort.Strings(errs)
	for _, e := range errs {
		fmt.Println("error:", e)
	}
	dups, runs := duplicateTokens(filepath.Join(state, "ws"))
	fmt.Printf("ran twice: %d of %d tokens found in workspaces (ok answers: %d)\n", dups, runs, st.ok)
	pid := daemon.Process.Pid
	fmt.Printf("daemon: RSS %s, %d fds, %s goroutines\n", procStatus(pid, "VmRSS"), countFDs(pid), metric(hc, "go_goroutines"))
	fmt.Printf("containers: %d for %d agents\n", countPrefix(cli, prefix), o.agents)
	if dups > 0 {
		return errors.New("some commands ran more than once")
	}
	return nil
}

type stats struct {
	mu        sync.Mutex
	ok        int
	failed    int
	latencies []time.Duration
	errors    map[string]int
}

func (s *stats) add(d time.Duration, err string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == "" {
		s.ok++
		s.latencies = append(s.latencies, d)
		return
	}
	s.failed++
	if s.errors == nil {
		s.errors = map[string]int{}
	}
	if len(err) > 160 {
		err = err[:160]
	}
	s.errors[err]++
}

// worker runs commands for one agent until ctx ends.
func worker(ctx context.Context, hc *http.Client, agent string, st *stats) {
	for ctx.Err() == nil {
		token := randHex(8)
		body, _ := json.Marshal(map[string]any{"agentId": agent, "command": "echo " + token + " >> /workspace/soak.log && echo " + token, "timeout": 30})
		began := time.Now()
		req, _ := http.NewRequestWithContext(context.WithoutCancel(ctx), http.MethodPost, "http://sandboxctl/v1/tools/exec", bytes.NewReader(body))
		resp, err := hc.Do(req)
		if err != nil {
			st.add(0, err.Error())
			continue
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var res struct {
			Details api.Details `json:"details"`
			Error   string      `json:"error"`
		}
		_ = json.Unmarshal(raw, &res)
		switch {
		case resp.StatusCode != http.StatusOK:
			st.add(0, fmt.Sprintf("HTTP %d: %s", resp.StatusCode, res.Error))
		case res.Details.Status != "completed":
			st.add(0, fmt.Sprintf("%v: %v", res.Details.Status, res.Details.Reason))
		default:
			st.add(time.Since(began), "")
		}
	}
}

// injectFaults picks a random sandbox every ~every and kills it, stops it,
// or SIGKILLs its supervisor.
func injectFaults(ctx context.Context, cli *client.Client, prefix string, every time.Duration, counts map[string]int) {
	for {
		d := time.Duration(float64(every) * (0.5 + mrand.Float64()))
		select {
		case <-ctx.Done():
			return
		case <-time.After(d):
		}
		list, err := cli.ContainerList(ctx, client.ContainerListOptions{Filters: make(client.Filters).Add("name", prefix)})
		if err != nil || len(list.Items) == 0 {
			continue
		}
		c := list.Items[mrand.IntN(len(list.Items))]
		kind := []string{"kill", "stop", "supervisor"}[mrand.IntN(3)]
		switch kind {
		case "kill":
			_, err = cli.ContainerKill(ctx, c.ID, client.ContainerKillOptions{Signal: "KILL"})
		case "stop":
			timeout := 1
			_, err = cli.ContainerStop(ctx, c.ID, client.ContainerStopOptions{Timeout: &timeout})
		case "supervisor":
			err = killSupervisor(ctx, cli, c.ID)
		}
		if err == nil {
			counts[kind]++
		} else {
			counts[kind+" failed"]++
		}
	}
}

// killSupervisor SIGKILLs the first child of the container's init.
func killSupervisor(ctx context.Context, cli *client.Client, id string) error {
	insp, err := cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if err != nil {
		return err
	}
	pid := insp.Container.State.Pid
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	if err != nil {
		return err
	}
	f := strings.Fields(string(data))
	if len(f) == 0 {
		return errors.New("no supervisor")
	}
	sup, _ := strconv.Atoi(f[0])
	return syscall.Kill(sup, syscall.SIGKILL)
}

func duplicateTokens(ws string) (dups, total int) {
	files, _ := filepath.Glob(filepath.Join(ws, "*", "soak.log"))
	seen := map[string]int{}
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			seen[sc.Text()]++
		}
		fh.Close()
	}
	for _, n := range seen {
		total++
		if n > 1 {
			dups++
		}
	}
	return dups, total
}

func pct(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p/100*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))].Round(time.Millisecond)
}

func waitHealthy(hc *http.Client) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := hc.Get("http://sandboxctl/healthz")
		if err == nil {
			resp.Body.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("daemon not healthy: %w", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func procStatus(pid int, key string) string {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return "?"
	}
	for _, l := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(l, key+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "?"
}

func countFDs(pid int) int {
	ents, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	return len(ents)
}

// metric reads one gauge from the daemon's /metrics.
func metric(hc *http.Client, name string) string {
	resp, err := hc.Get("http://sandboxctl/metrics")
	if err != nil {
		return "?"
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			return v
		}
	}
	return "?"
}

func countPrefix(cli *client.Client, prefix string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	list, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: make(client.Filters).Add("name", prefix)})
	if err != nil {
		return -1
	}
	return len(list.Items)
}

func removePrefix(cli *client.Client, prefix string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	list, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true,
		Filters: make(client.Filters).Add("label", "sandboxctl.managed=1").Add("name", prefix)})
	if err != nil {
		return
	}
	for _, c := range list.Items {
		_, _ = cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
	}
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
