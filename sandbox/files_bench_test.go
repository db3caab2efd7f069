package sandbox

import (
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"testing"
)

// BenchmarkFilesTransfer moves 32 MiB into and out of a sandbox's
// /workspace through the supervisor's file tool and, as the baseline of the
// same run, through the Engine archive API (docker cp's path).
//
//	go test -run XXX -bench FilesTransfer -benchtime 5x -count 3 ./sandbox/
func BenchmarkFilesTransfer(b *testing.B) {
	data := make([]byte, 32<<20)
	_, _ = rand.Read(data)
	for _, name := range []string{"supervisor", "engine"} {
		b.Run(name, func(b *testing.B) {
			m := benchManager(b, name == "engine")
			ctx := context.Background()
			s := Scope{AgentID: "bench"}
			b.Run("write", func(b *testing.B) {
				b.SetBytes(int64(len(data)))
				for range b.N {
					if err := m.WriteFile(ctx, s, "/workspace/big.bin", 0o644, 1<<30, bytes.NewReader(data)); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("read", func(b *testing.B) {
				b.SetBytes(int64(len(data)))
				for range b.N {
					if err := m.ReadFiles(ctx, s, "/workspace/big.bin", 1<<30, io.Discard); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}

// benchManager is newManagerOpts for a benchmark.
func benchManager(b *testing.B, plain bool) *Manager {
	b.Helper()
	return benchManagerOpts(b, func(o *Options) { o.DisableSupervisor = plain })
}

// benchManagerOpts is benchManager with its Options changed by mutate.
func benchManagerOpts(b *testing.B, mutate func(*Options)) *Manager {
	b.Helper()
	cfg := DefaultConfig()
	cfg.Docker.Image = testImage
	cfg.Docker.ContainerPrefix = "sbxb-" + randHex(3) + "-"
	cfg.WorkspaceRoot = b.TempDir()
	o := Options{Config: cfg, StateDir: b.TempDir(), Home: b.TempDir()}
	mutate(&o)
	o.Labels = testLabels(testLabel+".prefix", o.Config.Docker.ContainerPrefix)
	m, err := NewManager(context.Background(), o)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		list, _ := m.List(context.Background())
		for _, c := range list {
			_ = m.first().removeID(context.Background(), c.ID)
		}
		_ = m.Close()
	})
	return m
}
