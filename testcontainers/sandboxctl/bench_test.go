package sandboxctl_test

import (
	"context"
	"testing"
	"time"

	"github.com/sandboxctl/sandboxctl/internal/dockertest"
	"github.com/sandboxctl/sandboxctl/testcontainers/sandboxctl"
	"github.com/sandboxctl/sandboxctl/testcontainers/sandboxctl/inprocess"
	"github.com/sandboxctl/sandboxctl/testcontainers/sandboxctl/internal/lifecycle"
)

// BenchmarkRunExecTerminate is what a test pays for its sandbox: Run (the
// sandbox created), one command, Terminate (everything removed), in both
// modes side by side (in-process is the baseline of container mode).
//
//	go test -run '^$' -bench RunExecTerminate -benchtime 5x ./sandboxctl/
func BenchmarkRunExecTerminate(b *testing.B) {
	dockertest.Require(b, testImage)
	img, err := buildDaemonImage()
	if err != nil {
		b.Fatal(err)
	}
	modes := []struct {
		name string
		run  func(context.Context, ...sandboxctl.Option) (*sandboxctl.Sandbox, error)
	}{
		{"inprocess", inprocess.Run},
		{"container", inContainer(img)},
	}
	for _, m := range modes {
		b.Run(m.name, func(b *testing.B) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			for b.Loop() {
				sb, err := m.run(ctx, sandboxctl.WithImage(testImage))
				if err != nil {
					b.Fatal(err)
				}
				res, err := sb.Exec(ctx, sandboxctl.ExecParams{Command: "true"})
				if err != nil || !lifecycle.ExitedZero(res) {
					b.Fatalf("exec: %v %v", err, res)
				}
				if err := sb.Terminate(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
