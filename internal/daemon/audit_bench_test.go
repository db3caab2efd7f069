package daemon

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/sandboxctl/sandboxctl/api"
	"github.com/sandboxctl/sandboxctl/hostexec"
	"github.com/sandboxctl/sandboxctl/internal/audit"
	"github.com/sandboxctl/sandboxctl/sessions"
	"github.com/sandboxctl/sandboxctl/sessions/config"
	"github.com/sandboxctl/sandboxctl/sessions/toolapi"
	"github.com/sandboxctl/sandboxctl/vocab"
)

// BenchmarkAuditExecTrue is the cost of the audit log on the exec path:
// `true` through the daemon's socket on the gateway host, 8 at once, with
// and without the log (each run writes exec.request, session.start and
// session.exit). It reports the log's bytes per record.
func BenchmarkAuditExecTrue(b *testing.B) {
	for _, on := range []bool{false, true} {
		name := "audit=off"
		if on {
			name = "audit=on"
		}
		b.Run(name, func(b *testing.B) {
			runner, err := hostexec.NewRunner(b.Context(), hostexec.Options{
				Shell: "/bin/sh", Environ: []string{"PATH=/usr/bin:/bin", "HOME=" + b.TempDir()}, Logf: b.Logf,
			})
			if err != nil {
				b.Skipf("gateway host not available: %v", err)
			}
			cfg := config.Default()
			cfg.Exec.Host, cfg.Exec.Security, cfg.Exec.Ask = "gateway", "full", "off"
			opts := sessions.Options{Config: cfg, Logf: b.Logf,
				Hosts: map[vocab.Host]sessions.Host{"gateway": sessions.NewGatewayHost(runner, b.TempDir())}}
			dir := filepath.Join(b.TempDir(), "audit")
			var log *audit.Log
			if on {
				if log, err = audit.Open(dir, audit.Options{}); err != nil {
					b.Fatal(err)
				}
				opts.Audit = log
			}
			mgr, err := sessions.New(opts)
			if err != nil {
				b.Fatal(err)
			}
			r := startServer(b, Options{Tools: mgr, Streams: mgr, IsInvalidInput: toolapi.IsInvalidInput})
			b.SetParallelism(max(1, 8/max(1, runtimeProcs())))
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					res, err := r.client.Exec(b.Context(), api.ExecParams{Command: "true"})
					if err != nil {
						b.Error(err)
						return
					}
					if res.Details.Status != api.StatusCompleted {
						b.Errorf("details %v", res.Details)
						return
					}
				}
			})
			b.StopTimer()
			if log != nil {
				_ = log.Close()
				rep, err := audit.Verify(dir, nil, false)
				if err != nil || rep.Problem != nil {
					b.Fatalf("verify: %+v %v", rep, err)
				}
				var size int64
				ents, _ := os.ReadDir(dir)
				for _, e := range ents {
					if fi, err := e.Info(); err == nil {
						size += fi.Size()
					}
				}
				if rep.Records > 0 {
					b.ReportMetric(float64(size)/float64(rep.Records), "bytes/record")
					b.ReportMetric(float64(rep.Records)/float64(b.N), "records/op")
				}
			}
		})
	}
}

func runtimeProcs() int { return runtime.GOMAXPROCS(0) }
