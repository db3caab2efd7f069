package kube_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sandboxctl/sandboxctl/api"
	"github.com/sandboxctl/sandboxctl/internal/dockertest"
	"github.com/sandboxctl/sandboxctl/internal/testbuild"
	"github.com/sandboxctl/sandboxctl/sandbox"
	"github.com/sandboxctl/sandboxctl/sessions"
	"github.com/sandboxctl/sandboxctl/sessions/config"
	"github.com/sandboxctl/sandboxctl/vocab"
)

// execTrue runs `true` in agent's sandbox through tools and returns how
// long the call took.
func execTrue(b *testing.B, tools interface {
	Exec(context.Context, api.ExecParams) (api.Result, error)
}, agent string) time.Duration {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	t0 := time.Now()
	r, err := tools.Exec(ctx, api.ExecParams{Host: "sandbox", AgentID: agent, Security: "full", Command: "true"})
	d := time.Since(t0)
	if err != nil {
		b.Fatal(err)
	}
	if r.Details.Status != api.StatusCompleted {
		b.Fatalf("exec true: %+v", r.Details)
	}
	return d
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// warmAndConcurrent measures, on an existing sandbox, the median of 30
// sequential `exec true` and the throughput of 8 callers at once.
func warmAndConcurrent(b *testing.B, tools interface {
	Exec(context.Context, api.ExecParams) (api.Result, error)
}, agent string) (time.Duration, float64) {
	execTrue(b, tools, agent)
	var ds []time.Duration
	for range 30 {
		ds = append(ds, execTrue(b, tools, agent))
	}
	const callers, each = 8, 10
	var wg sync.WaitGroup
	t0 := time.Now()
	for range callers {
		wg.Go(func() {
			for range each {
				execTrue(b, tools, agent)
			}
		})
	}
	wg.Wait()
	return median(ds), callers * each / time.Since(t0).Seconds()
}

// BenchmarkKubeVsDocker (issue 30): the Kubernetes engine on the test
// cluster beside the Docker engine, in the same run, both supervised
// (commands through the in-sandbox supervisor), both with a warm pool of
// one, the same image, memory and CPUs: the first command of a new agent
// from the warm pool and cold (Pod or container create to first command),
// `exec true` on a warm sandbox (median of 30) and 8 concurrent callers'
// throughput.
//
//	SANDBOXCTL_TEST_KUBECONFIG=... go test -run '^$' -bench KubeVsDocker -benchtime 1x -count 3 ./sandbox/kube/
func BenchmarkKubeVsDocker(b *testing.B) {
	kc := os.Getenv("SANDBOXCTL_TEST_KUBECONFIG")
	if kc == "" {
		b.Skip("no Kubernetes cluster (SANDBOXCTL_TEST_KUBECONFIG unset)")
	}
	dockertest.Require(b, "sandboxctl/testbb:1")
	bins, err := testbuild.Build(b.TempDir(), sandbox.SupervisorBinaryName)
	if err != nil {
		b.Fatal(err)
	}
	for range b.N {
		cs := clientset(b, kc)
		ns := namespace(b, cs)
		cfg := testConfig(kc, ns)
		cfg.Sandbox.Pool.Size = 1
		cursors := filepath.Join(b.TempDir(), "cursors.json")
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		k := newDaemon(b, cfg, cursors)
		k.e.StartPool(ctx, 1)

		// From the pool: wait until a warm Pod runs, then a new agent.
		var pool []time.Duration
		for i := range 3 {
			waitPoolReady(b, k)
			pool = append(pool, execTrue(b, k.mgr, fmt.Sprintf("pool-%d", i)))
		}
		// Cold: an Engine without a pool.
		cold := newDaemon(b, testConfig(kc, ns), filepath.Join(b.TempDir(), "c.json"))
		var coldDs []time.Duration
		for i := range 3 {
			coldDs = append(coldDs, execTrue(b, cold.mgr, fmt.Sprintf("cold-%d", i)))
		}
		kWarm, kPar := warmAndConcurrent(b, k.mgr, "pool-0")

		// The Docker engine: the same sandbox settings (image, memory,
		// CPUs), supervised, with a warm pool of one; and one without a
		// pool for its cold figure.
		dm, sm := dockerDaemon(b, cfg, bins[0], 1)
		var dPool []time.Duration
		for i := range 3 {
			for deadline := time.Now().Add(2 * time.Minute); sm.Pool().Ready == 0; time.Sleep(50 * time.Millisecond) {
				if time.Now().After(deadline) {
					b.Fatalf("no warm Docker sandbox in 2 min: %+v", sm.Pool())
				}
			}
			dPool = append(dPool, execTrue(b, dm, fmt.Sprintf("docker-pool-%d", i)))
		}
		dcm, _ := dockerDaemon(b, cfg, bins[0], 0)
		var dCold []time.Duration
		for i := range 3 {
			dCold = append(dCold, execTrue(b, dcm, fmt.Sprintf("docker-cold-%d", i)))
		}
		dWarm, dPar := warmAndConcurrent(b, dm, "docker-pool-0")

		b.ReportMetric(ms(median(pool)), "kube-pool-first-ms")
		b.ReportMetric(ms(median(dPool)), "docker-pool-first-ms")
		b.ReportMetric(ms(median(coldDs)), "kube-cold-first-ms")
		b.ReportMetric(ms(median(dCold)), "docker-cold-first-ms")
		b.ReportMetric(ms(kWarm), "kube-warm-exec-ms")
		b.ReportMetric(ms(dWarm), "docker-warm-exec-ms")
		b.ReportMetric(float64(kWarm)/float64(dWarm), "kube/docker-warm")
		b.ReportMetric(kPar, "kube-8x-exec/s")
		b.ReportMetric(dPar, "docker-8x-exec/s")
		b.Logf("pool kube %v docker %v; cold kube %v docker %v; warm median kube %v docker %v (%.2fx); 8 concurrent kube %.1f/s docker %.1f/s",
			pool, dPool, coldDs, dCold, kWarm, dWarm, float64(kWarm)/float64(dWarm), kPar, dPar)
	}
}

// dockerDaemon is a sessions Manager over a supervised Docker engine with
// the sandbox settings of cfg (image, memory, CPUs) and a warm pool of
// poolSize; the benchmark's end removes its containers.
func dockerDaemon(b *testing.B, cfg config.File, supervisorBin string, poolSize int) (*sessions.Manager, *sandbox.Manager) {
	dcfg := config.Default()
	dcfg.Exec.Host, dcfg.Exec.Security, dcfg.Exec.Ask = "sandbox", "full", "off"
	d := &dcfg.Sandbox.Docker
	d.Image, d.Memory, d.MemorySwap, d.CPUs = cfg.Sandbox.Docker.Image, cfg.Sandbox.Docker.Memory, cfg.Sandbox.Docker.MemorySwap, cfg.Sandbox.Docker.CPUs
	d.ContainerPrefix = "sbxbench-" + randomHex(3) + "-"
	dcfg.Sandbox.WorkspaceRoot = b.TempDir()
	dcfg.Sandbox.Pool.Size = poolSize
	sm, err := sandbox.NewManager(context.Background(), sandbox.Options{Config: dcfg.Sandbox, StateDir: b.TempDir(), Home: b.TempDir(),
		SupervisorBinary: supervisorBin, Labels: map[string]string{"sandboxctl.test": "kube-bench", "sandboxctl.test.prefix": d.ContainerPrefix}})
	if err != nil {
		b.Fatal(err)
	}
	if !sm.Supervised() {
		b.Fatal("the Docker engine is not supervised: the comparison would be against the plain exec path")
	}
	dm, err := sessions.New(sessions.Options{Config: dcfg, Hosts: map[vocab.Host]sessions.Host{"sandbox": sessions.NewSandboxHost(sm)}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = dm.Close(c)
		list, _ := sm.List(c)
		for _, ctr := range list {
			_ = sm.RemoveByName(c, ctr.Name)
		}
		_ = sm.Close() // removes the untaken pooled sandboxes
	})
	sm.StartPool()
	return dm, sm
}

func waitPoolReady(b *testing.B, d daemon) {
	for deadline := time.Now().Add(2 * time.Minute); !d.e.PoolReady(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			b.Fatal("no warm pod in 2 min")
		}
	}
}
