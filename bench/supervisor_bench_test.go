package bench

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandboxctl/sandboxctl/api"

	"github.com/moby/moby/client"

	"github.com/sandboxctl/sandboxctl/internal/dockertest"
	"github.com/sandboxctl/sandboxctl/internal/testbuild"
	"github.com/sandboxctl/sandboxctl/sandbox"
	"github.com/sandboxctl/sandboxctl/sessions"
	"github.com/sandboxctl/sandboxctl/sessions/config"
	"github.com/sandboxctl/sandboxctl/vocab"
)

// benchImage is the busybox test image (`make images`).
var benchImage = envOr("SANDBOXCTL_TEST_IMAGE", "sandboxctl/testbb:1")

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// row is one line of the side-by-side table.
type row struct {
	what, figure, baseline, verdict string
}

type table struct {
	mu   sync.Mutex
	rows []row
}

func (t *table) add(what, figure, baseline, verdict string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.rows = append(t.rows, row{what, figure, baseline, verdict})
}

func (t *table) print(w io.Writer) {
	fmt.Fprintf(w, "\n%-44s | %-22s | %-40s | %s\n", "supervisor figure", "value", "baseline (same run, same container)", "target")
	fmt.Fprintln(w, strings.Repeat("-", 140))
	for _, r := range t.rows {
		fmt.Fprintf(w, "%-44s | %-22s | %-40s | %s\n", r.what, r.figure, r.baseline, r.verdict)
	}
	fmt.Fprintln(w)
}

func median(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d.Microseconds())/1000) }

func check(ok bool, target string) string {
	if ok {
		return "OK   " + target
	}
	return "MISS " + target
}

// sample runs f n times and returns the durations (f's error fails b).
func sample(b *testing.B, n int, f func() error) []time.Duration {
	b.Helper()
	out := make([]time.Duration, 0, n)
	for range n {
		t0 := time.Now()
		if err := f(); err != nil {
			b.Fatalf("sample: %v", err)
		}
		out = append(out, time.Since(t0))
	}
	return out
}

// rate runs total calls of f at the given concurrency and returns calls/s.
func rate(b *testing.B, conc, total int, f func() error) float64 {
	b.Helper()
	var wg sync.WaitGroup
	work := make(chan struct{}, total)
	for range total {
		work <- struct{}{}
	}
	close(work)
	errs := make(chan error, conc)
	t0 := time.Now()
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range work {
				if err := f(); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	el := time.Since(t0)
	close(errs)
	for err := range errs {
		b.Fatalf("rate: %v", err)
	}
	return float64(total) / el.Seconds()
}

func drain(ctx context.Context, p sandbox.Process) (int64, int, error) {
	var n int64
	var wg sync.WaitGroup
	if e := p.Stderr(); e != nil {
		wg.Add(1)
		go func() { defer wg.Done(); _, _ = io.Copy(io.Discard, e) }()
	}
	n, _ = io.Copy(io.Discard, p.Stdout())
	wg.Wait()
	code, _, err := p.Wait(ctx)
	return n, code, err
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// buildBinaries builds sandboxctl, sandboxctld and sandboxctl-supervisor
// side by side, as `make build` does (sandboxctl finds sandboxctld, and the
// daemon the supervisor, next to its executable).
func buildBinaries(b *testing.B, dir string) (cli, sup string) {
	b.Helper()
	bins, err := testbuild.Build(dir, "sandboxctl", "sandboxctld", sandbox.SupervisorBinaryName)
	if err != nil {
		b.Fatal(err)
	}
	return bins[0], bins[2]
}

// memoryOf is the container's memory cgroup usage in bytes, and the same
// without page cache (what `docker stats` shows).
func memoryOf(id string) (usage, noCache int64, err error) {
	base := "/sys/fs/cgroup/memory/docker/" + id
	u, err := os.ReadFile(base + "/memory.usage_in_bytes")
	if err != nil {
		return 0, 0, err
	}
	usage, _ = strconv.ParseInt(strings.TrimSpace(string(u)), 10, 64)
	st, err := os.ReadFile(base + "/memory.stat")
	if err != nil {
		return usage, usage, nil
	}
	for _, line := range strings.Split(string(st), "\n") {
		if v, ok := strings.CutPrefix(line, "total_inactive_file "); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return usage, usage - n, nil
		}
	}
	return usage, usage, nil
}

func mib(n int64) string { return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20)) }

// BenchmarkSupervisor measures every figure of issue 5 in one run, on one
// container, each beside its baseline, and prints the table. Run with
//
//	go test -run '^$' -bench Supervisor -benchtime 1x ./bench/
func BenchmarkSupervisor(b *testing.B) {
	if b.N > 1 {
		b.Skip("one pass is the measurement; use -benchtime 1x")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cli := dockertest.Require(b, benchImage)
	dir := b.TempDir()
	cliBin, supBin := buildBinaries(b, dir)
	state := filepath.Join(dir, "state")
	prefix := "sbxbench-" + randHex(3) + "-"
	cfg := config.Default()
	cfg.Exec.Host, cfg.Exec.Security, cfg.Exec.Ask = "sandbox", "full", "off"
	cfg.Sandbox.Docker.Image = benchImage
	cfg.Sandbox.Docker.ContainerPrefix = prefix
	cfg.Sandbox.WorkspaceRoot = filepath.Join(dir, "ws")
	defer func() {
		// Remove every container of this run (daemon-made ones included).
		c2, cancel2 := context.WithTimeout(context.Background(), time.Minute)
		defer cancel2()
		list, _ := cli.ContainerList(c2, client.ContainerListOptions{All: true, Filters: make(client.Filters).Add("name", prefix)})
		for _, c := range list.Items {
			_, _ = cli.ContainerRemove(c2, c.ID, client.ContainerRemoveOptions{Force: true})
		}
	}()

	m, err := sandbox.NewManager(ctx, sandbox.Options{Config: cfg.Sandbox, StateDir: state, SupervisorBinary: supBin, Client: cli})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	scope := sandbox.Scope{AgentID: "bench"}
	t0 := time.Now()
	res, err := m.Ensure(ctx, scope)
	if err != nil {
		b.Fatal(err)
	}
	firstReady := time.Since(t0)
	if !res.Supervised {
		b.Fatalf("sandbox not supervised: %s", res.SupervisorNote)
	}
	ctr := res.Name
	tab := &table{}
	tab.add("new sandbox incl. building the derived image", ms(firstReady), "(once per base image and supervisor build)", "")

	startTrue := func() error {
		st, err := m.Start(ctx, scope, sandbox.ExecOptions{Cmd: []string{"true"}})
		if err != nil {
			return err
		}
		if _, ok := st.Process.(*sandbox.SupervisedExec); !ok {
			return fmt.Errorf("plain path: %q", st.Warnings)
		}
		_, code, err := drain(ctx, st.Process)
		if err == nil && code != 0 {
			err = fmt.Errorf("exit %d", code)
		}
		return err
	}
	apiTrue := func() error {
		e, err := m.ExecIn(ctx, res.ID, sandbox.ExecOptions{Cmd: []string{"true"}})
		if err != nil {
			return err
		}
		_, _, err = drain(ctx, e)
		return err
	}
	dockerTrue := func() error { return exec.Command("docker", "exec", ctr, "true").Run() }

	// Warm-up, then the baselines.
	for range 5 {
		if err := startTrue(); err != nil {
			b.Fatal(err)
		}
	}
	cliMed := median(sample(b, 30, dockerTrue))
	apiMed := median(sample(b, 30, apiTrue))
	supMed := median(sample(b, 200, startTrue))
	tab.add("sandbox.Manager.Start `true` (supervisor)", ms(supMed), "API exec "+ms(apiMed)+", docker exec CLI "+ms(cliMed), fmt.Sprintf("x%.1f faster than API exec", float64(apiMed)/float64(supMed)))

	// Through sessions.Manager.
	smgr, err := sessions.New(sessions.Options{Config: cfg, Hosts: map[vocab.Host]sessions.Host{"sandbox": sessions.NewSandboxHost(m)}})
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		c2, c := context.WithTimeout(context.Background(), 10*time.Second)
		defer c()
		_ = smgr.Close(c2)
	}()
	sessTrue := func() error {
		r, err := smgr.Exec(ctx, api.ExecParams{Command: "true", Host: "sandbox", AgentID: "bench", Security: "full", Ask: "off"})
		if err != nil {
			return err
		}
		if r.Details.Status != api.StatusCompleted {
			return fmt.Errorf("result %+v", r)
		}
		if w := r.Details.Warnings; len(w) > 0 {
			return fmt.Errorf("warnings: %v", w)
		}
		return nil
	}
	for range 5 {
		if err := sessTrue(); err != nil {
			b.Fatal(err)
		}
	}
	sessMed := median(sample(b, 200, sessTrue))
	tab.add("sessions.Manager exec `true` (median)", ms(sessMed), "API exec "+ms(apiMed)+", docker exec CLI "+ms(cliMed), check(sessMed <= 10*time.Millisecond, "<= 10 ms"))
	b.ReportMetric(float64(sessMed.Microseconds())/1000, "sessions-ms/op")

	apiRate := rate(b, 8, 40, apiTrue)
	for _, conc := range []int{1, 8, 32} {
		r := rate(b, conc, 300, sessTrue)
		tab.add(fmt.Sprintf("throughput, %d concurrent (sessions)", conc), fmt.Sprintf("%.0f cmds/s", r), fmt.Sprintf("API exec at 8: %.1f cmds/s", apiRate), check(r >= 100, ">= 100/s"))
		b.ReportMetric(r, fmt.Sprintf("cmds/s@%d", conc))
	}

	// 100 MB of non-TTY output: zeros (dd, 1 MB blocks: busybox head is
	// itself slower than 300 MB/s here), and incompressible bytes (a
	// random file on the container's tmpfs).
	const outBytes = 100_000_000
	measureOut := func(start func() (sandbox.Process, error)) float64 {
		t0 := time.Now()
		p, err := start()
		if err != nil {
			b.Fatal(err)
		}
		n, _, err := drain(ctx, p)
		if err != nil || n != outBytes {
			b.Fatalf("output: %d bytes, %v", n, err)
		}
		return float64(n) / 1e6 / time.Since(t0).Seconds()
	}
	for _, out := range []struct {
		name, script string
	}{
		{"zeros", "dd if=/dev/zero bs=1000000 count=100 2>/dev/null"},
		{"random", "cat /tmp/bench-random"},
	} {
		if out.name == "random" {
			if _, code, err := m.Run(ctx, scope, []string{"sh", "-c", "head -c " + strconv.Itoa(outBytes) + " /dev/urandom > /tmp/bench-random"}); err != nil || code != 0 {
				b.Fatalf("random file: %d %v", code, err)
			}
		}
		cmd := []string{"sh", "-c", out.script}
		supOut := measureOut(func() (sandbox.Process, error) {
			st, err := m.Start(ctx, scope, sandbox.ExecOptions{Cmd: cmd})
			if err != nil {
				return nil, err
			}
			return st.Process, nil
		})
		apiOut := measureOut(func() (sandbox.Process, error) {
			return m.ExecIn(ctx, res.ID, sandbox.ExecOptions{Cmd: cmd})
		})
		tab.add("100 MB non-TTY output, "+out.name+" (supervisor)", fmt.Sprintf("%.0f MB/s", supOut), fmt.Sprintf("Engine exec attach %.0f MB/s", apiOut), check(supOut >= 300, ">= 300 MB/s"))
		b.ReportMetric(supOut, "MB/s-"+out.name)
	}
	_, _, _ = m.Run(ctx, scope, []string{"rm", "-f", "/tmp/bench-random"})

	// Memory of idle sandboxes: supervised vs `sleep infinity`.
	plainCfg := cfg.Sandbox
	plainCfg.Docker.ContainerPrefix = prefix + "plain-"
	mp, err := sandbox.NewManager(ctx, sandbox.Options{Config: plainCfg, StateDir: filepath.Join(dir, "state-plain"), DisableSupervisor: true, Client: cli})
	if err != nil {
		b.Fatal(err)
	}
	defer mp.Close()
	// First command in a new sandbox (derived image already built).
	firstCmd := func(mm *sandbox.Manager) (sandbox.EnsureResult, time.Duration) {
		t0 := time.Now()
		st, err := mm.Start(ctx, sandbox.Scope{AgentID: "idle"}, sandbox.ExecOptions{Cmd: []string{"true"}})
		if err != nil {
			b.Fatal(err)
		}
		if _, _, err := drain(ctx, st.Process); err != nil {
			b.Fatal(err)
		}
		return st.Ensure, time.Since(t0)
	}
	idleSup, supReady := firstCmd(m)
	idlePlain, plainReady := firstCmd(mp)
	tab.add("first command in a new sandbox (supervisor)", ms(supReady), "plain path, sleep infinity: "+ms(plainReady), check(supReady <= 600*time.Millisecond, "<= 600 ms"))
	time.Sleep(3 * time.Second) // let both settle (the supervisor stays connected)
	su, sn, err1 := memoryOf(idleSup.ID)
	pu, pn, err2 := memoryOf(idlePlain.ID)
	if err1 == nil && err2 == nil {
		tab.add("idle sandbox memory (cgroup, no cache)", mib(sn), "sleep infinity: "+mib(pn), check(sn <= 8<<20, "<= 8 MiB"))
		tab.add("idle sandbox memory (cgroup usage)", mib(su), "sleep infinity: "+mib(pu), check(su <= 8<<20, "<= 8 MiB"))
	} else {
		tab.add("idle sandbox memory", "n/a", fmt.Sprintf("%v %v", err1, err2), "")
	}

	// The daemon: socket round trip, and `sandboxctl exec` as a process.
	daemonFigures(ctx, b, tab, cliBin, dir, state, cfg, cliMed, dockerTrue)
	tab.print(os.Stdout)
}

// daemonFigures starts `sandboxctl serve` on the bench's state dir and
// config (same container), then times the socket and the CLI.
func daemonFigures(ctx context.Context, b *testing.B, tab *table, cliBin, dir, state string, cfg config.File, cliMed time.Duration, dockerTrue func() error) {
	conf := filepath.Join(dir, "sandboxctl.yaml")
	yaml := fmt.Sprintf("exec:\n  host: sandbox\n  security: full\n  ask: \"off\"\nsandbox:\n  workspaceRoot: %s\n  docker:\n    image: %s\n    containerPrefix: %s\n",
		cfg.Sandbox.WorkspaceRoot, cfg.Sandbox.Docker.Image, cfg.Sandbox.Docker.ContainerPrefix)
	if err := os.WriteFile(conf, []byte(yaml), 0o600); err != nil {
		b.Fatal(err)
	}
	var logs bytes.Buffer
	srv := exec.CommandContext(ctx, cliBin, "--state", state, "--config", conf, "serve")
	srv.Stdout, srv.Stderr = &logs, &logs
	srv.Env = append(os.Environ(), "SANDBOXCTL_SUPERVISOR=")
	if err := srv.Start(); err != nil {
		tab.add("daemon", "n/a", "serve: "+err.Error(), "")
		return
	}
	defer func() {
		_ = exec.Command(cliBin, "--state", state, "--config", conf, "serve", "stop").Run()
		done := make(chan struct{})
		go func() { _ = srv.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = srv.Process.Kill()
			<-done
		}
	}()
	sock := filepath.Join(state, "sandboxctl.sock")
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}}
	call := func() error {
		body, _ := json.Marshal(api.ExecParams{Command: "true", AgentID: "bench", Security: "full", Ask: "off"})
		resp, err := hc.Post("http://sandboxctl/v1/tools/exec", "application/json", bytes.NewReader(body))
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		var r api.Result
		if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
			return fmt.Errorf("status %s: %w", resp.Status, err)
		}
		if r.Details.Status != api.StatusCompleted {
			return fmt.Errorf("result %+v", r)
		}
		if w := r.Details.Warnings; len(w) > 0 {
			return fmt.Errorf("warnings: %v", w)
		}
		return nil
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		err := call()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			tab.add("daemon socket", "n/a", fmt.Sprintf("%v; log: %s", err, lastLine(logs.String())), "")
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	for range 5 {
		_ = call()
	}
	sockMed := median(sample(b, 100, call))
	tab.add("daemon socket exec `true` (median)", ms(sockMed), "docker exec CLI "+ms(cliMed), check(sockMed <= 15*time.Millisecond, "<= 15 ms"))
	b.ReportMetric(float64(sockMed.Microseconds())/1000, "socket-ms/op")

	// Run the same way as dockerTrue: output to /dev/null, no pipes; an
	// installed copy, as docker's CLI is (installCopy).
	cliArgs := []string{"--state", state, "--config", conf, "exec", "--agent", "bench", "--security", "full", "--ask", "off", "--", "true"}
	installed := installCopy(b, cliBin)
	cliExec := func() error {
		if err := exec.Command(installed, cliArgs...).Run(); err != nil {
			out, _ := exec.Command(installed, cliArgs...).CombinedOutput()
			return fmt.Errorf("%v: %s", err, out)
		}
		return nil
	}
	if err := cliExec(); err != nil {
		tab.add("sandboxctl exec (process)", "n/a", err.Error(), "")
		return
	}
	// Interleaved with docker exec, so both see the same machine load; a
	// pause after each lets the Engine finish its own after-work (exec
	// clean-up in dockerd and the shim) before the next sample starts.
	var ours, theirs []time.Duration
	for range 40 {
		ours = append(ours, sample(b, 1, cliExec)...)
		time.Sleep(150 * time.Millisecond)
		theirs = append(theirs, sample(b, 1, dockerTrue)...)
		time.Sleep(150 * time.Millisecond)
	}
	cliExecMed, dockerMed := median(ours), median(theirs)
	ratio := float64(cliExecMed) / float64(dockerMed)
	tab.add("`sandboxctl exec -- true` (whole process)", ms(cliExecMed), "docker exec CLI "+ms(dockerMed)+" (interleaved)", check(ratio <= 0.10, fmt.Sprintf("ratio %.3f <= 0.10", ratio)))
	b.ReportMetric(ratio, "cli-ratio")
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}
