// Command density measures how the cost of sandboxes grows with their
// number: it creates 50, 100 and 200 supervised sandboxes (per image) with
// one in-process sandbox.Manager + sessions.Manager (the daemon's parts),
// and prints, each beside its baseline from the same run:
//
//   - creation rate;
//
//   - memory per idle sandbox including its supervisor (cgroup, without
//     page cache), beside a `sleep infinity` sandbox; the Engine's shim
//     process per sandbox is shown apart (host cost outside the cgroup);
//
//   - this process's (the daemon's) RSS, goroutines and open fds per
//     sandbox, with the supervisor connections up and after they were
//     closed as idle;
//
//   - exec `true` through sessions.Manager, p50/p99, with 1, 50 and 200
//     sandboxes live (Engine API exec at 1 live as the baseline), and
//     8-way concurrent throughput with 200 live.
//
//     go run ./bench/density -n 50,100,200 -images sandboxctl/testbb:1,sandboxctl/sandbox:bookworm
//
// Every container it made is removed at the end (and on Ctrl-C).
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sandboxctl/sandboxctl/api"

	"github.com/moby/moby/client"

	"github.com/sandboxctl/sandboxctl/internal/testbuild"
	"github.com/sandboxctl/sandboxctl/sandbox"
	"github.com/sandboxctl/sandboxctl/sessions"
	"github.com/sandboxctl/sandboxctl/sessions/config"
	"github.com/sandboxctl/sandboxctl/vocab"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "density:", err)
		os.Exit(1)
	}
}

type options struct {
	counts    []int
	images    []string
	runtime   string
	conc      int
	idleClose time.Duration
	samples   int
}

func run() error {
	var o options
	counts := flag.String("n", "50,100,200", "sandbox counts to measure at (ascending)")
	images := flag.String("images", "sandboxctl/testbb:1,sandboxctl/sandbox:bookworm", "images, comma-separated")
	flag.StringVar(&o.runtime, "runtime", "", "sandbox.docker.runtime (\"\": the Engine's default)")
	flag.IntVar(&o.conc, "create-conc", 4, "sandboxes created at once")
	flag.DurationVar(&o.idleClose, "idle-close", 30*time.Second, "supervisor idle-connection close time (longer than a latency run)")
	flag.IntVar(&o.samples, "samples", 400, "exec samples per live count")
	flag.Parse()
	for _, f := range strings.Split(*counts, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return fmt.Errorf("-n: bad count %q", f)
		}
		o.counts = append(o.counts, n)
	}
	sort.Ints(o.counts)
	o.images = strings.Split(*images, ",")

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cli, err := client.New(client.FromEnv)
	if err != nil {
		return err
	}
	defer cli.Close()
	dir, err := os.MkdirTemp("", "sbx-density-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bins, err := testbuild.Build(dir, sandbox.SupervisorBinaryName)
	if err != nil {
		return err
	}
	prefix := "sbx-density-" + randHex(3) + "-"
	defer func() {
		c, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		removeAll(c, cli, prefix)
	}()
	for _, image := range o.images {
		if err := measureImage(ctx, cli, o, strings.TrimSpace(image), bins[0], dir, prefix); err != nil {
			return fmt.Errorf("%s: %w", image, err)
		}
	}
	return nil
}

// removeAll removes every container named with prefix, 8 at a time.
func removeAll(ctx context.Context, cli *client.Client, prefix string) {
	list, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: make(client.Filters).Add("name", prefix)})
	if err != nil {
		fmt.Fprintln(os.Stderr, "density: clean-up:", err)
		return
	}
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for _, c := range list.Items {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			_, _ = cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true})
		}()
	}
	wg.Wait()
}

type table struct{ rows [][4]string }

func (t *table) add(what, value, baseline, target string) {
	t.rows = append(t.rows, [4]string{what, value, baseline, target})
}

func (t *table) print(title string) {
	fmt.Printf("\n%s\n%-50s | %-24s | %-36s | %s\n%s\n", title, "figure", "value", "baseline (same run)", "target", strings.Repeat("-", 140))
	for _, r := range t.rows {
		fmt.Printf("%-50s | %-24s | %-36s | %s\n", r[0], r[1], r[2], r[3])
	}
	fmt.Println()
}

func check(ok bool, target string) string {
	if ok {
		return "OK   " + target
	}
	return "MISS " + target
}

func measureImage(ctx context.Context, cli *client.Client, o options, image, supBin, dir, prefix string) error {
	tag := strings.NewReplacer("/", "-", ":", "-").Replace(image)
	cfg := config.Default()
	cfg.Exec.Host, cfg.Exec.Security, cfg.Exec.Ask = "sandbox", "full", "off"
	cfg.Sandbox.Docker.Image = image
	cfg.Sandbox.Docker.Runtime = o.runtime
	cfg.Sandbox.Docker.ContainerPrefix = prefix + tag + "-"
	cfg.Sandbox.WorkspaceRoot = filepath.Join(dir, "ws-"+tag)
	cfg.Sandbox.Prune = sandbox.PruneConfig{}
	m, err := sandbox.NewManager(ctx, sandbox.Options{
		Config: cfg.Sandbox, StateDir: filepath.Join(dir, "state-"+tag), Client: cli,
		SupervisorBinary: supBin, SupervisorIdleClose: o.idleClose,
	})
	if err != nil {
		return err
	}
	defer m.Close()
	smgr, err := sessions.New(sessions.Options{Config: cfg, Hosts: map[vocab.Host]sessions.Host{vocab.HostSandbox: sessions.NewSandboxHost(m)}})
	if err != nil {
		return err
	}
	defer func() {
		c, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = smgr.Close(c)
	}()
	tab := &table{}
	agent := func(i int) string { return fmt.Sprintf("d%03d", i) }
	execTrue := func(i int) error {
		r, err := smgr.Exec(ctx, api.ExecParams{Command: "true", Host: "sandbox", AgentID: agent(i), Security: "full", Ask: "off"})
		if err != nil {
			return err
		}
		if r.Details.Status != api.StatusCompleted {
			return fmt.Errorf("exec in %s: %v", agent(i), r.Details)
		}
		if w := r.Details.Warnings; len(w) > 0 {
			return fmt.Errorf("exec in %s: warnings %v", agent(i), w)
		}
		return nil
	}

	// The first sandbox (builds the supervised image), and the baselines.
	if err := execTrue(0); err != nil {
		return err
	}
	first, err := m.Ensure(ctx, sandbox.Scope{AgentID: agent(0)})
	if err != nil {
		return err
	}
	plainCfg := cfg.Sandbox
	plainCfg.Docker.ContainerPrefix = prefix + tag + "-plain-"
	mp, err := sandbox.NewManager(ctx, sandbox.Options{Config: plainCfg, StateDir: filepath.Join(dir, "state-plain-"+tag), Client: cli, DisableSupervisor: true})
	if err != nil {
		return err
	}
	defer mp.Close()
	plain, err := mp.Ensure(ctx, sandbox.Scope{AgentID: "plain"})
	if err != nil {
		return err
	}
	apiTrue := func() error {
		e, err := m.ExecIn(ctx, first.ID, sandbox.ExecOptions{Cmd: []string{"true"}})
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, e.Stdout())
		_, _, err = e.Wait(ctx)
		return err
	}
	apiLat, err := latencies(50, func(int) error { return apiTrue() })
	if err != nil {
		return err
	}
	lat1, err := latencies(o.samples, func(int) error { return execTrue(0) })
	if err != nil {
		return err
	}
	tab.add("exec `true` p50 / p99, 1 live (sessions)", pp(lat1), "Engine API exec "+pp(apiLat), check(pct(lat1, 99) <= 20*time.Millisecond, "p99 <= 20 ms"))
	time.Sleep(o.idleClose + 2*time.Second)
	plainMem, _ := memoryOf(plain.ID)
	base := sample()
	live := 1
	for _, n := range o.counts {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		t0 := time.Now()
		if err := createN(ctx, o.conc, live, n, execTrue); err != nil {
			return err
		}
		el := time.Since(t0)
		made := n - live
		live = n
		tab.add(fmt.Sprintf("creation rate, %d -> %d sandboxes (%d at once)", n-made, n, o.conc), fmt.Sprintf("%.2f /s (%.0f ms each)", float64(made)/el.Seconds(), float64(el.Milliseconds())/float64(made)), "", "")
		// One command in each: every supervisor connected (those closed
		// as idle during the creation connect again), timed.
		reconnect, err := latencies(n, func(i int) error { return execTrue(i) })
		if err != nil {
			return err
		}
		connected := sample()
		if n == 50 || n == o.counts[len(o.counts)-1] {
			// Round robin over connected sandboxes, within the idle time.
			lat, err := latencies(o.samples, func(i int) error { return execTrue(i % n) })
			if err != nil {
				return err
			}
			tab.add(fmt.Sprintf("exec `true` p50 / p99, %d live (round robin)", n), pp(lat), "1 live "+pp(lat1), check(pct(lat, 99) <= 20*time.Millisecond, "p99 <= 20 ms"))
			tab.add(fmt.Sprintf("  first exec after an idle close (reconnect), %d", n), pp(reconnect), "", "")
		}
		// The idle close runs every idleClose/4: wait for a full round.
		time.Sleep(o.idleClose + o.idleClose/4 + 2*time.Second)
		idle := sample()
		list, err := m.List(ctx)
		if err != nil {
			return err
		}
		var cg, shim int64
		var cgN, shimN int
		for _, c := range list {
			if v, err := memoryOf(c.ID); err == nil {
				cg += v
				cgN++
			}
			if v := shimRSS(c.ID); v > 0 {
				shim += v
				shimN++
			}
		}
		per := int64(0)
		if cgN > 0 {
			per = cg / int64(cgN)
		}
		tab.add(fmt.Sprintf("memory per idle sandbox incl. supervisor, %d", n), mib(per), "`sleep infinity` sandbox "+mib(plainMem), check(per <= 3<<20, "<= 3 MiB"))
		if shimN > 0 {
			tab.add(fmt.Sprintf("  + Engine shim process per sandbox (host), %d", n), mib(shim/int64(shimN)), "(containerd-shim, outside the cgroup)", "")
		}
		tab.add(fmt.Sprintf("daemon RSS, %d sandboxes (idle conns closed)", n), mib(idle.rss), fmt.Sprintf("before any: %s; connected: %s", mib(base.rss), mib(connected.rss)), "")
		dn := float64(n)
		tab.add(fmt.Sprintf("daemon goroutines per sandbox, %d", n),
			fmt.Sprintf("%.3f (idle)", float64(idle.goroutines-base.goroutines)/dn),
			fmt.Sprintf("%.2f while connected (%d -> %d)", float64(connected.goroutines-base.goroutines)/dn, base.goroutines, connected.goroutines),
			check(idle.goroutines-base.goroutines < 20, "O(1): < 20 in all"))
		tab.add(fmt.Sprintf("daemon fds per sandbox, %d", n),
			fmt.Sprintf("%.3f (idle)", float64(idle.fds-base.fds)/dn),
			fmt.Sprintf("%.2f while connected (%d -> %d)", float64(connected.fds-base.fds)/dn, base.fds, connected.fds), "")
	}
	// 8-way throughput with everything live (connected first).
	if _, err := latencies(live, func(i int) error { return execTrue(i) }); err != nil {
		return err
	}
	total := 400
	work := make(chan int, total)
	for i := range total {
		work <- i
	}
	close(work)
	var wg sync.WaitGroup
	errc := make(chan error, 8)
	t0 := time.Now()
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				if err := execTrue(i % live); err != nil {
					errc <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	if err := <-errc; err != nil {
		return err
	}
	tab.add(fmt.Sprintf("exec `true`, 8 concurrent, %d live", live), fmt.Sprintf("%.0f cmds/s", float64(total)/time.Since(t0).Seconds()), "", "")
	tab.print(fmt.Sprintf("density: %s, runtime %q, %d CPUs", image, o.runtime, runtime.NumCPU()))
	return nil
}

// createN makes sandboxes from..n-1 (their first command), conc at once.
func createN(ctx context.Context, conc, from, n int, execTrue func(int) error) error {
	work := make(chan int, n-from)
	for i := from; i < n; i++ {
		work <- i
	}
	close(work)
	var wg sync.WaitGroup
	errc := make(chan error, conc)
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				if ctx.Err() != nil {
					return
				}
				if err := execTrue(i); err != nil {
					errc <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	return <-errc
}

func latencies(n int, f func(i int) error) ([]time.Duration, error) {
	out := make([]time.Duration, 0, n)
	for i := range n {
		t0 := time.Now()
		if err := f(i); err != nil {
			return nil, err
		}
		out = append(out, time.Since(t0))
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out, nil
}

// pct is the p-th percentile of sorted d.
func pct(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	i := (len(d)*p + 99) / 100
	return d[min(max(i-1, 0), len(d)-1)]
}

func pp(d []time.Duration) string {
	return fmt.Sprintf("%.1f / %.1f ms", float64(pct(d, 50).Microseconds())/1000, float64(pct(d, 99).Microseconds())/1000)
}

func mib(n int64) string { return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20)) }

type procSample struct {
	rss        int64
	goroutines int
	fds        int
}

func sample() procSample {
	runtime.GC()
	s := procSample{goroutines: runtime.NumGoroutine(), rss: statusKB("/proc/self/status", "VmRSS:") << 10}
	if ents, err := os.ReadDir("/proc/self/fd"); err == nil {
		s.fds = len(ents)
	}
	return s
}

func statusKB(path, key string) int64 {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, key); ok {
			f := strings.Fields(v)
			if len(f) > 0 {
				n, _ := strconv.ParseInt(f[0], 10, 64)
				return n
			}
		}
	}
	return 0
}

// memoryOf is a container's memory cgroup usage without page cache (what
// `docker stats` shows), cgroup v1 or v2.
func memoryOf(id string) (int64, error) {
	for _, p := range []struct{ usage, stat, inactive string }{
		{"/sys/fs/cgroup/memory/docker/" + id + "/memory.usage_in_bytes", "/sys/fs/cgroup/memory/docker/" + id + "/memory.stat", "total_inactive_file "},
		{"/sys/fs/cgroup/system.slice/docker-" + id + ".scope/memory.current", "/sys/fs/cgroup/system.slice/docker-" + id + ".scope/memory.stat", "inactive_file "},
		{"/sys/fs/cgroup/docker/" + id + "/memory.current", "/sys/fs/cgroup/docker/" + id + "/memory.stat", "inactive_file "},
	} {
		u, err := os.ReadFile(p.usage)
		if err != nil {
			continue
		}
		usage, _ := strconv.ParseInt(strings.TrimSpace(string(u)), 10, 64)
		st, _ := os.ReadFile(p.stat)
		for _, line := range strings.Split(string(st), "\n") {
			if v, ok := strings.CutPrefix(line, p.inactive); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				usage -= n
			}
		}
		return usage, nil
	}
	return 0, fmt.Errorf("no memory cgroup found for %s", id[:12])
}

// shimRSS is the RSS of the containerd shim serving container id (0 when
// not found: shims may serve several containers, or run elsewhere).
func shimRSS(id string) int64 {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		cmd, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || !strings.Contains(string(cmd), "containerd-shim") || !strings.Contains(string(cmd), id) {
			continue
		}
		return statusKB("/proc/"+e.Name()+"/status", "VmRSS:") << 10
	}
	return 0
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
