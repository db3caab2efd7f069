package bench

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxctl/sandboxctl/internal/dockertest"
)

// BenchmarkTransfer measures the throughput of the lossless data paths
// beside Docker's own in the same run, on one file of
// SANDBOXCTL_BENCH_BYTES bytes (default 1 GB) of random data:
// `sandboxctl exec -- cat FILE > file` beside `docker exec C cat FILE >
// file`, and `sandboxctl cp` out and in beside `docker cp` out and in.
// The target is docker's figure or better for each. Run with
//
//	go test -run '^$' -bench Transfer -benchtime 1x ./bench/
func BenchmarkTransfer(b *testing.B) {
	if b.N > 1 {
		b.Skip("one pass is the measurement; use -benchtime 1x")
	}
	size, err := strconv.ParseInt(envOr("SANDBOXCTL_BENCH_BYTES", "1000000000"), 10, 64)
	if err != nil || size <= 0 {
		b.Fatalf("SANDBOXCTL_BENCH_BYTES: want a byte count, got %q", os.Getenv("SANDBOXCTL_BENCH_BYTES"))
	}
	dockertest.Require(b, benchImage)
	dir := b.TempDir()
	cliBin, _ := buildBinaries(b, dir)
	state := filepath.Join(dir, "state")
	prefix := "sbxxfer-" + randHex(3) + "-"
	conf := filepath.Join(dir, "sandboxctl.yaml")
	yaml := fmt.Sprintf("exec:\n  host: sandbox\n  security: full\n  ask: \"off\"\nsandbox:\n  workspaceRoot: %s\n  docker:\n    image: %s\n    containerPrefix: %s\n",
		filepath.Join(dir, "ws"), benchImage, prefix)
	if err := os.WriteFile(conf, []byte(yaml), 0o600); err != nil {
		b.Fatal(err)
	}
	sbx := func(args ...string) *exec.Cmd {
		return exec.Command(cliBin, append([]string{"--state", state, "--config", conf}, args...)...)
	}
	run := func(c *exec.Cmd) {
		b.Helper()
		if out, err := c.CombinedOutput(); err != nil {
			b.Fatalf("%v: %v: %s", c.Args, err, out)
		}
	}
	plain := prefix + "docker"
	srv := sbx("serve", "--files-max-bytes", strconv.FormatInt(size+1, 10))
	if err := srv.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() {
		_ = sbx("sandbox", "rm", "--agent", "bench").Run()
		_ = sbx("serve", "stop").Run()
		_ = srv.Wait()
		_ = exec.Command("docker", "rm", "-f", plain).Run()
	}()
	make1 := fmt.Sprintf("head -c %d /dev/urandom > /workspace/f", size)
	run(sbx("exec", "--agent", "bench", "--", make1))
	run(exec.Command("docker", "run", "-d", "--name", plain, "--network", "none", benchImage, "sleep", "infinity"))
	run(exec.Command("docker", "exec", plain, "sh", "-c", "mkdir -p /workspace && "+make1))

	// Every timed run starts with no dirty pages of the one before: the
	// writeback of the last run's 1 GB would otherwise slow the next one
	// (always ours, which goes first).
	settle := func() { syscall.Sync() }
	// timed runs c and returns its throughput in MB/s.
	timed := func(c *exec.Cmd) string {
		b.Helper()
		settle()
		start := time.Now()
		if o, err := c.CombinedOutput(); err != nil {
			b.Fatalf("%v: %v: %s", c.Args, err, o)
		}
		return fmt.Sprintf("%.0f MB/s", float64(size)/1e6/time.Since(start).Seconds())
	}
	// timedTo is timed with c's stdout to the file out, checked for size.
	timedTo := func(c *exec.Cmd, out string) string {
		b.Helper()
		f, err := os.Create(out)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		c.Stdout = f
		settle()
		start := time.Now()
		if err := c.Run(); err != nil {
			b.Fatalf("%v: %v", c.Args, err)
		}
		if fi, err := f.Stat(); err != nil || fi.Size() != size {
			b.Fatalf("%v: %d bytes written, want %d (%v)", c.Args, fi.Size(), size, err)
		}
		return fmt.Sprintf("%.0f MB/s", float64(size)/1e6/time.Since(start).Seconds())
	}
	local := filepath.Join(dir, "local")
	tab := &table{}
	add := func(what, ours, theirs string) { tab.add(what, ours, theirs, "target: >= docker") }

	ours := timedTo(sbx("exec", "--agent", "bench", "--", "cat /workspace/f"), local)
	add("exec cat FILE > file", ours, timedTo(exec.Command("docker", "exec", plain, "cat", "/workspace/f"), local))
	down := filepath.Join(dir, "down")
	_ = os.MkdirAll(down, 0o755)
	ours = timed(sbx("cp", "bench:/workspace/f", filepath.Join(down, "s")))
	add("cp out (sandbox -> host)", ours, timed(exec.Command("docker", "cp", plain+":/workspace/f", filepath.Join(down, "d"))))
	ours = timed(sbx("cp", local, "bench:/workspace/up"))
	add("cp in (host -> sandbox)", ours, timed(exec.Command("docker", "cp", local, plain+":/workspace/up")))
	fmt.Printf("\nTransfer of %d bytes (same run; sandboxctl | docker)\n", size)
	tab.print(os.Stdout)
}
