package nodeexec

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/sandboxctl/sandboxctl/hostexec"
	"github.com/sandboxctl/sandboxctl/sessions/hostapi"
	"github.com/sandboxctl/sandboxctl/vocab"
)

// allowAll is a Guard that runs everything (benchmarks only: it measures the
// link without the guard's approvals.json reads).
type allowAll struct{}

func (allowAll) Check(_ context.Context, req GuardRequest) (GuardVerdict, error) {
	return GuardVerdict{Decision: vocab.DecisionRun, Command: req.Line}, nil
}
func (allowAll) Summary(context.Context) ApprovalSummary                       { return ApprovalSummary{} }
func (allowAll) Approvals(context.Context) ([]Approval, error)                 { return nil, nil }
func (allowAll) Resolve(context.Context, string, vocab.ApprovalDecision) error { return nil }

func reportMedian(b *testing.B, durs []time.Duration) {
	slices.Sort(durs)
	b.ReportMetric(float64(durs[len(durs)/2].Microseconds())/1000, "ms-median")
}

// BenchmarkStartTrue: `true` through Registry.Start on loopback TLS (node
// agent in this process) beside hostexec.Runner.Start on this machine.
func BenchmarkStartTrue(b *testing.B) {
	g := newTestGateway(b, RegistryOptions{Logf: func(string, ...any) {}})
	startAgent(b, AgentOptions{GatewayURL: g.url, TLSFingerprint: g.fingerprint, Name: "policy",
		Config: GuardConfig{Security: "full", Ask: "off"}, Logf: func(string, ...any) {}})
	startAgent(b, AgentOptions{GatewayURL: g.url, TLSFingerprint: g.fingerprint, Name: "noguard",
		Guard: allowAll{}, Logf: func(string, ...any) {}})
	g.waitNode(b, "policy")
	g.waitNode(b, "noguard")
	runner, err := hostexec.NewRunner(context.Background(), hostexec.Options{Shell: "/bin/sh",
		Environ: []string{"PATH=/usr/bin:/bin"}})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.Run("hostexec", func(b *testing.B) {
		durs := make([]time.Duration, 0, b.N)
		for range b.N {
			t0 := time.Now()
			p, err := runner.Start(ctx, hostapi.StartSpec{Command: "true"})
			if err != nil {
				b.Fatal(err)
			}
			go func() { _, _ = p.Stderr().Read(make([]byte, 1)) }()
			buf := make([]byte, 64)
			for {
				if _, err := p.Stdout().Read(buf); err != nil {
					break
				}
			}
			_, _, _ = p.Wait(ctx)
			durs = append(durs, time.Since(t0))
		}
		reportMedian(b, durs)
	})
	for _, node := range []string{"policy", "noguard"} {
		b.Run("node-"+node, func(b *testing.B) {
			durs := make([]time.Duration, 0, b.N)
			for range b.N {
				t0 := time.Now()
				rp, err := g.reg.Start(ctx, node, hostapi.StartSpec{Command: "true"})
				if err != nil {
					b.Fatal(err)
				}
				c := collect(rp)
				_, _, _ = rp.Wait(ctx)
				c.wait()
				durs = append(durs, time.Since(t0))
			}
			reportMedian(b, durs)
		})
	}
}
