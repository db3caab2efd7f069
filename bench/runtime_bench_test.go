package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandboxctl/sandboxctl/api"

	"github.com/moby/moby/client"

	"github.com/sandboxctl/sandboxctl/internal/dockertest"
	"github.com/sandboxctl/sandboxctl/sandbox"
	"github.com/sandboxctl/sandboxctl/sessions"
	"github.com/sandboxctl/sandboxctl/sessions/config"
	"github.com/sandboxctl/sandboxctl/vocab"
)

// runtimes are the columns of BenchmarkRuntimes.
var runtimes = []string{"runc", sandbox.RuntimeRunsc}

// rtTable is a table with one value column per runtime.
type rtTable struct {
	rows []rtRow
}

type rtRow struct {
	what   string
	values map[string]string
	note   string
}

func (t *rtTable) add(what string, values map[string]string, note string) {
	t.rows = append(t.rows, rtRow{what, values, note})
}

func (t *rtTable) print() {
	fmt.Printf("\n%-52s", "figure (same run)")
	for _, rt := range runtimes {
		fmt.Printf(" | %-18s", rt)
	}
	fmt.Printf(" | %s\n%s\n", "baseline / target", strings.Repeat("-", 150))
	for _, r := range t.rows {
		fmt.Printf("%-52s", r.what)
		for _, rt := range runtimes {
			fmt.Printf(" | %-18s", r.values[rt])
		}
		fmt.Printf(" | %s\n", r.note)
	}
	fmt.Println()
}

// BenchmarkRuntimes measures, for runc and for gVisor (runsc), the first
// command of a new agent through sessions.Manager from the warm pool and
// cold, beside `docker run` of the same image, plus the warm exec figures.
// Run with
//
//	go test -run '^$' -bench Runtimes -benchtime 1x ./bench/
func BenchmarkRuntimes(b *testing.B) {
	if b.N > 1 {
		b.Skip("one pass is the measurement; use -benchtime 1x")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	cli := dockertest.Require(b, benchImage)
	dir := b.TempDir()
	_, supBin := buildBinaries(b, dir)
	prefix := "sbxbench-" + randHex(3) + "-"
	defer func() {
		c2, cancel2 := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel2()
		list, _ := cli.ContainerList(c2, client.ContainerListOptions{All: true, Filters: make(client.Filters).Add("name", prefix)})
		for _, c := range list.Items {
			_, _ = cli.ContainerRemove(c2, c.ID, client.ContainerRemoveOptions{Force: true})
		}
	}()
	const samples = 12
	tab := &rtTable{}
	vals := func() map[string]string { return map[string]string{} }
	dockerRun, pooled, cold, warm, thr, mem, resume := vals(), vals(), vals(), vals(), vals(), vals(), vals()
	var pooledMed = map[string]time.Duration{}
	for _, rt := range runtimes {
		// docker run --rm, the Engine's own cold start.
		args := []string{"run", "--rm", "--network", "none", "--runtime", rt, benchImage, "true"}
		_ = exec.Command("docker", args...).Run() // warm-up
		dr := median(sample(b, 6, func() error {
			out, err := exec.Command("docker", args...).CombinedOutput()
			if err != nil {
				return fmt.Errorf("docker run: %v: %s", err, out)
			}
			return nil
		}))
		dockerRun[rt] = ms(dr)

		newMgr := func(poolSize int, tag string, pauseAfterMin float64) (*sandbox.Manager, *sessions.Manager) {
			cfg := config.Default()
			cfg.Exec.Host, cfg.Exec.Security, cfg.Exec.Ask = "sandbox", "full", "off"
			cfg.Sandbox.Docker.Image = benchImage
			cfg.Sandbox.Docker.ContainerPrefix = prefix + tag + "-"
			cfg.Sandbox.Docker.Runtime = rt
			cfg.Sandbox.WorkspaceRoot = filepath.Join(dir, "ws-"+tag)
			cfg.Sandbox.Pool.Size = poolSize
			cfg.Sandbox.PauseAfterMinutes = pauseAfterMin
			m, err := sandbox.NewManager(ctx, sandbox.Options{Config: cfg.Sandbox, StateDir: filepath.Join(dir, "state-"+tag), SupervisorBinary: supBin, Client: cli})
			if err != nil {
				b.Fatal(err)
			}
			sm, err := sessions.New(sessions.Options{Config: cfg, Hosts: map[vocab.Host]sessions.Host{vocab.HostSandbox: sessions.NewSandboxHost(m)}})
			if err != nil {
				b.Fatal(err)
			}
			return m, sm
		}
		closeMgr := func(m *sandbox.Manager, sm *sessions.Manager) {
			c2, c := context.WithTimeout(context.Background(), time.Minute)
			defer c()
			_ = sm.Close(c2)
			list, _ := m.List(c2)
			for _, s := range list {
				if s.Pool != sandbox.PoolReady {
					_ = m.RemoveByName(c2, s.Name)
				}
			}
			_ = m.Close()
		}
		n := 0
		firstCmd := func(sm *sessions.Manager) error {
			n++
			r, err := sm.Exec(ctx, api.ExecParams{Command: "true", Host: "sandbox", AgentID: fmt.Sprintf("agent-%d", n), Security: "full", Ask: "off"})
			if err != nil {
				return err
			}
			if r.Details.Status != api.StatusCompleted {
				return fmt.Errorf("result %+v", r)
			}
			return nil
		}

		// Cold: no pool (the derived image is built by a first sandbox).
		mc, smc := newMgr(0, rt+"-cold", 0)
		if err := firstCmd(smc); err != nil {
			b.Fatal(err)
		}
		coldMed := median(sample(b, samples/2, func() error { return firstCmd(smc) }))
		cold[rt] = ms(coldMed)

		// Warm exec in one sandbox, and 8-way throughput.
		warmTrue := func() error {
			r, err := smc.Exec(ctx, api.ExecParams{Command: "true", Host: "sandbox", AgentID: "agent-1", Security: "full", Ask: "off"})
			if err == nil && r.Details.Status != api.StatusCompleted {
				err = fmt.Errorf("result %+v", r)
			}
			return err
		}
		for range 5 {
			_ = warmTrue()
		}
		warm[rt] = ms(median(sample(b, 100, warmTrue)))
		thr[rt] = fmt.Sprintf("%.0f cmds/s", rate(b, 8, 200, warmTrue))
		if ens, err := mc.Ensure(ctx, sandbox.Scope{AgentID: "agent-1"}); err == nil {
			time.Sleep(2 * time.Second)
			if u, nc, err := memoryOf(ens.ID); err == nil {
				mem[rt] = fmt.Sprintf("%s (%s)", mib(nc), mib(u))
			} else {
				mem[rt] = "n/a: " + err.Error()
			}
		}
		closeMgr(mc, smc)

		// From the pool: the pool is full before each sample (what a
		// daemon that is not starting agents faster than it refills sees).
		mp, smp := newMgr(2, rt+"-pool", 0)
		var ds []time.Duration
		for range samples {
			wctx, c := context.WithTimeout(ctx, 2*time.Minute)
			err := mp.WaitPool(wctx)
			c()
			if err != nil {
				b.Fatal(err)
			}
			ds = append(ds, sample(b, 1, func() error { return firstCmd(smp) })...)
		}
		pooledMed[rt] = median(ds)
		pooled[rt] = ms(pooledMed[rt])
		closeMgr(mp, smp)
		b.ReportMetric(float64(pooledMed[rt].Microseconds())/1000, "pool-first-ms-"+rt)

		// Resume: a sandbox paused as idle (pauseAfterMinutes 0.01 =
		// 600 ms), then one command.
		mz, smz := newMgr(0, rt+"-pause", 0.01)
		if err := firstCmd(smz); err != nil {
			b.Fatal(err)
		}
		pausedAgent := fmt.Sprintf("agent-%d", n)
		ens, err := mz.Ensure(ctx, sandbox.Scope{AgentID: pausedAgent})
		if err != nil {
			b.Fatal(err)
		}
		var rs []time.Duration
		for range 6 {
			deadline := time.Now().Add(30 * time.Second)
			for {
				insp, err := cli.ContainerInspect(ctx, ens.ID, client.ContainerInspectOptions{})
				if err != nil {
					b.Fatal(err)
				}
				if insp.Container.State.Paused {
					break
				}
				if time.Now().After(deadline) {
					b.Fatal("sandbox not paused as idle")
				}
				time.Sleep(50 * time.Millisecond)
			}
			rs = append(rs, sample(b, 1, func() error {
				r, err := smz.Exec(ctx, api.ExecParams{Command: "true", Host: "sandbox", AgentID: pausedAgent, Security: "full", Ask: "off"})
				if err == nil && r.Details.Status != api.StatusCompleted {
					err = fmt.Errorf("result %+v", r)
				}
				return err
			})...)
		}
		resume[rt] = ms(median(rs))
		closeMgr(mz, smz)
	}
	tab.add("docker run --rm --network none IMAGE true", dockerRun, "the Engine's own cold start")
	tab.add("first command, new agent, cold (sessions.Manager)", cold, "")
	tab.add("first command, new agent, warm pool (sessions)", pooled,
		fmt.Sprintf("%s runc, %s runsc (<= 50 ms)", check(pooledMed["runc"] <= 50*time.Millisecond, ""), check(pooledMed[sandbox.RuntimeRunsc] <= 50*time.Millisecond, "")))
	tab.add("exec `true`, warm sandbox (sessions, median)", warm, "")
	tab.add("exec `true`, 8 concurrent (sessions)", thr, "")
	tab.add("first command after an idle pause (resume)", resume, "exec `true` in a warm sandbox (row above)")
	tab.add("idle sandbox memory, cgroup no cache (usage)", mem, "runsc: the gVisor sentry is in the cgroup")
	tab.print()
	_ = os.Stdout.Sync()
}
