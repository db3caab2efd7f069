package bench

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/sandboxctl/sandboxctl/internal/dockertest"
	"github.com/sandboxctl/sandboxctl/internal/testbuild"
	"github.com/sandboxctl/sandboxctl/sandbox/sandboxconfig"
)

// BenchmarkFirstExec (issue 15 item 6) times a whole first `sandboxctl
// exec -- true` on a fresh state directory, with the sandbox image (and
// its derived supervised image) already built: the CLI process, the
// daemon's auto-start, the sandbox's creation and the command. Beside it,
// from the same run, `docker run --rm IMAGE true` of the same image.
//
//	go test -run '^$' -bench FirstExec -benchtime 1x ./bench/
func BenchmarkFirstExec(b *testing.B) {
	image := sandboxconfig.DefaultConfig().Docker.Image
	network := sandboxconfig.DefaultConfig().Docker.Network // as the sandbox
	dockertest.Require(b, image)
	docker, err := exec.LookPath("docker")
	if err != nil {
		b.Fatalf("docker CLI (the baseline) is required: %v", err)
	}
	bins, err := testbuild.Build(b.TempDir(), "sandboxctl", "sandboxctld", "sandboxctl-supervisor")
	if err != nil {
		b.Fatal(err)
	}
	cli := bins[0]
	env := append(os.Environ(), "SANDBOXCTLD="+bins[1])
	var tag [4]byte
	_, _ = rand.Read(tag[:])
	prefix := "benchfx-" + hex.EncodeToString(tag[:]) + "-"

	run := func(name string, args ...string) error {
		cmd := exec.Command(name, args...)
		cmd.Env = env
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("%s %v: %w: %s", name, args, err, out.Bytes())
		}
		return nil
	}
	// firstExec runs one first exec on a fresh state directory and
	// removes what it made (outside the timing).
	firstExec := func(i int) (time.Duration, error) {
		state := b.TempDir()
		cfg := filepath.Join(state, "sandboxctl.yaml")
		body := fmt.Sprintf("sandbox:\n  workspaceRoot: %s\n  docker:\n    containerPrefix: %s%d-\n", filepath.Join(state, "ws"), prefix, i)
		if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
			return 0, err
		}
		base := []string{"--state", state, "--config", cfg}
		agent := fmt.Sprintf("%s%d", prefix, i)
		start := time.Now()
		err := run(cli, append(base, "exec", "--agent", agent, "--", "true")...)
		d := time.Since(start)
		rmErr := run(cli, append(base, "sandbox", "rm", "--agent", agent)...)
		stopErr := run(cli, append(base, "serve", "stop")...)
		return d, errors.Join(err, rmErr, stopErr)
	}
	// Warm-up: builds the derived image once, if no earlier run did.
	if _, err := firstExec(0); err != nil {
		b.Fatal(err)
	}
	const n = 5
	var ours, base []time.Duration
	for i := 1; i <= n; i++ {
		d, err := firstExec(i)
		if err != nil {
			b.Fatal(err)
		}
		ours = append(ours, d)
		start := time.Now()
		if err := run(docker, "run", "--rm", "--network", network, "--label", "sandboxctl.bench="+prefix, image, "true"); err != nil {
			b.Fatal(err)
		}
		base = append(base, time.Since(start))
	}
	mo, mb := median(ours), median(base)
	var t table
	t.add("first exec, fresh state dir (median of 5)", ms(mo), "docker run --rm --network "+network+": "+ms(mb), fmt.Sprintf("ratio %.2fx", float64(mo)/float64(mb)))
	t.print(os.Stdout)
	b.ReportMetric(float64(mo.Milliseconds()), "ms/first-exec")
	b.ReportMetric(float64(mb.Milliseconds()), "ms/docker-run")
}
