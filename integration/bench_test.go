package integration

import (
	"context"
	"io"
	"os/exec"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/sandboxctl/sandboxctl/api"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"

	"github.com/sandboxctl/sandboxctl/hostexec"
	"github.com/sandboxctl/sandboxctl/hostexec/hostsup"
	"github.com/sandboxctl/sandboxctl/internal/dockertest"
	"github.com/sandboxctl/sandboxctl/internal/testbuild"
	"github.com/sandboxctl/sandboxctl/sandbox"
	"github.com/sandboxctl/sandboxctl/sessions"
	"github.com/sandboxctl/sandboxctl/sessions/config"
	"github.com/sandboxctl/sandboxctl/vocab"
)

// timed runs op b.N times and reports the median and p90 latency beside
// go test's mean, since a few slow outliers skew means on a noisy machine.
func timed(b *testing.B, op func() error) {
	b.Helper()
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		if err := op(); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "ms-median")
	b.ReportMetric(float64(lat[len(lat)*9/10].Microseconds())/1000, "ms-p90")
}

// BenchmarkRoundTrip measures one `true` round trip on a warm sandbox through
// sessions.Manager (plain Engine exec path and supervisor path, each on its
// own warm container of the same image), beside the raw Engine exec API,
// the `docker exec` CLI on the same container, the gateway host through
// sessions.Manager, and a bare local fork/exec — all in one run:
//
//	go test -run '^$' -bench RoundTrip -benchtime 50x ./integration/
func BenchmarkRoundTrip(b *testing.B) {
	requireDockerB(b)
	ctx := context.Background()
	sm, mgr := newSandboxStackB(b, true)
	res, err := sm.Ensure(ctx, sandbox.Scope{AgentID: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	cli := sm.Client()
	_, supMgr := newSandboxStackB(b, false)
	for _, c := range []struct {
		name string
		mgr  *sessions.Manager
	}{{"sessions-sandbox-plain", mgr}, {"sessions-sandbox-supervisor", supMgr}} {
		b.Run(c.name, func(b *testing.B) {
			timed(b, func() error {
				r, err := c.mgr.Exec(ctx, api.ExecParams{Command: "true", AgentID: "bench"})
				if err == nil && (r.Details.Status != "completed" || r.Details.Warnings != nil) {
					b.Fatalf("result %v", r.Details)
				}
				return err
			})
		})
	}
	b.Run("engine-exec-raw", func(b *testing.B) {
		timed(b, func() error {
			ex, err := cli.ExecCreate(ctx, res.ID, client.ExecCreateOptions{Cmd: []string{"true"}, AttachStdout: true, AttachStderr: true})
			if err != nil {
				return err
			}
			att, err := cli.ExecAttach(ctx, ex.ID, client.ExecAttachOptions{})
			if err != nil {
				return err
			}
			_, _ = stdcopy.StdCopy(io.Discard, io.Discard, att.Reader)
			att.Close()
			for {
				in, err := cli.ExecInspect(ctx, ex.ID, client.ExecInspectOptions{})
				if err != nil {
					return err
				}
				if !in.Running {
					return nil
				}
				time.Sleep(time.Millisecond)
			}
		})
	})
	b.Run("docker-exec-cli", func(b *testing.B) {
		timed(b, func() error { return exec.Command("docker", "exec", res.ID, "true").Run() })
	})
	b.Run("sessions-gateway", func(b *testing.B) {
		gm := newGatewayManagerB(b)
		timed(b, func() error {
			_, err := gm.Exec(ctx, api.ExecParams{Command: "true"})
			return err
		})
	})
	b.Run("sessions-gateway-host-supervisor", func(b *testing.B) {
		gm := newSupervisedGatewayManagerB(b)
		timed(b, func() error {
			_, err := gm.Exec(ctx, api.ExecParams{Command: "true"})
			return err
		})
	})
	b.Run("local-fork-exec", func(b *testing.B) {
		timed(b, func() error { return exec.Command("true").Run() })
	})
}

func requireDockerB(b *testing.B) {
	b.Helper()
	dockertest.Require(b)
}

// newSandboxStackB builds a sandbox + sessions stack on the test image;
// plain keeps the sandbox on the Engine exec path (no supervisor).
func newSandboxStackB(b *testing.B, plain bool) (*sandbox.Manager, *sessions.Manager) {
	b.Helper()
	cfg := config.Default()
	cfg.Exec.Security, cfg.Exec.Ask = "full", "off"
	cfg.Sandbox.Docker.Image = testImage
	cfg.Sandbox.Docker.ContainerPrefix = "sbxb-" + randSuffix() + "-"
	cfg.Sandbox.WorkspaceRoot = b.TempDir()
	sm, err := sandbox.NewManager(context.Background(), sandbox.Options{Config: cfg.Sandbox, StateDir: b.TempDir(), Home: b.TempDir(),
		Labels: map[string]string{testLabel: "integration"}, DisableSupervisor: plain})
	if err != nil {
		b.Fatal(err)
	}
	mgr, err := sessions.New(sessions.Options{Config: cfg, Hosts: map[vocab.Host]sessions.Host{"sandbox": sessions.NewSandboxHost(sm)}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = mgr.Close(ctx)
		list, _ := sm.List(ctx)
		for _, c := range list {
			_ = sm.RemoveByName(ctx, c.Name)
		}
		_ = sm.Close()
	})
	return sm, mgr
}

func newGatewayManagerB(b *testing.B) *sessions.Manager {
	b.Helper()
	r, err := hostexec.NewRunner(context.Background(), hostexec.Options{})
	if err != nil {
		b.Fatal(err)
	}
	return newGatewayManagerWithHost(b, sessions.NewGatewayHost(r, b.TempDir()))
}

// newSupervisedGatewayManagerB is the gateway as the daemon runs it: its
// commands in a host supervisor process.
func newSupervisedGatewayManagerB(b *testing.B) *sessions.Manager {
	b.Helper()
	r, err := hostexec.NewRunner(context.Background(), hostexec.Options{})
	if err != nil {
		b.Fatal(err)
	}
	bins, err := testbuild.Build(b.TempDir(), "sandboxctld")
	if err != nil {
		b.Fatal(err)
	}
	dir := filepath.Join(b.TempDir(), "host-supervisor")
	sup, err := hostsup.New(hostsup.Options{Dir: dir, Command: []string{bins[0], "serve", "host-supervisor", "--dir", dir}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = sup.Stop(context.Background()) }) // after the Manager's Close below
	return newGatewayManagerWithHost(b, sessions.NewSupervisedGatewayHost(r, b.TempDir(), sup))
}

func newGatewayManagerWithHost(b *testing.B, host sessions.Host) *sessions.Manager {
	b.Helper()
	cfg := config.Default()
	cfg.Exec.Host, cfg.Exec.Security, cfg.Exec.Ask = "gateway", "full", "off"
	mgr, err := sessions.New(sessions.Options{Config: cfg, Hosts: map[vocab.Host]sessions.Host{"gateway": host}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = mgr.Close(context.Background()) })
	return mgr
}
