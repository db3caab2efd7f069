package sandbox

import (
	"bytes"
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/sandboxctl/sandboxctl/sandbox/sandboxconfig"
)

// TestFaultStalledSingleEngine replays issue 32 item 3 on a one-Engine
// config: with its dockerd stopped (SIGSTOP; a private dockerd of the
// test's own, never the shared one), there was no health check at all
// (sandboxctl_engine_up stayed 1) and an exec on an existing sandbox
// waited ~28 s. Now the Engine is reported down within a few seconds, a
// start fails at once naming it, and both recover once it answers again.
func TestFaultStalledSingleEngine(t *testing.T) {
	run, base := testEnginesDir(t, "sbxstall-")
	d := newTestDockerd(t, base, "st", run, "", sharedContainerd(t, base))
	d.start(t)
	t.Cleanup(func() { d.stop(t) })
	cli := d.waitUp(t, 60*time.Second)
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	mainCli, err := client.New(client.FromEnv)
	if err != nil {
		t.Fatal(err)
	}
	defer mainCli.Close()
	saved, err := mainCli.ImageSave(ctx, []string{testImage})
	if err != nil {
		t.Fatalf("save %s: %v", testImage, err)
	}
	var tarball bytes.Buffer
	_, err = tarball.ReadFrom(saved)
	_ = saved.Close()
	if err != nil {
		t.Fatal(err)
	}
	res, err := cli.ImageLoad(ctx, bytes.NewReader(tarball.Bytes()), client.ImageLoadWithQuiet(true))
	if err != nil {
		t.Fatalf("load %s: %v", testImage, err)
	}
	_, _ = new(bytes.Buffer).ReadFrom(res)
	_ = res.Close()

	cfg := DefaultConfig()
	cfg.Docker.Image = testImage
	cfg.Docker.ContainerPrefix = "sbxt-" + randHex(3) + "-"
	cfg.WorkspaceRoot = t.TempDir()
	cfg.Engines = []sandboxconfig.EngineConfig{{Name: "st", Address: d.unixHost}}
	m, err := NewManager(context.Background(), Options{Config: cfg, StateDir: t.TempDir(), Home: t.TempDir(), Labels: testLabels(),
		EngineHealthInterval: 500 * time.Millisecond, Logf: t.Logf})
	if err != nil {
		t.Fatalf("NewManager: %v", err)
	}
	t.Cleanup(func() { _ = m.Close() })
	scope := Scope{AgentID: "stall"}
	runOnce := func() error {
		st, err := m.Start(ctx, scope, ExecOptions{Cmd: []string{"true"}})
		if err != nil {
			return err
		}
		_, _, err = st.Wait(ctx)
		return err
	}
	if err := runOnce(); err != nil {
		t.Fatalf("first command: %v", err)
	}
	up := func() bool { return m.Engines()[0].Healthy }
	if !up() {
		t.Fatal("the Engine is reported down before the stall")
	}

	pid := d.cmd.Process.Pid
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := true
	cont := func() {
		if stopped {
			_ = syscall.Kill(pid, syscall.SIGCONT)
			stopped = false
		}
	}
	t.Cleanup(cont)
	t0 := time.Now()
	for up() {
		if time.Since(t0) > 15*time.Second {
			t.Fatal("a stalled Engine is still reported up after 15 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("stalled Engine reported down after %v", time.Since(t0).Round(time.Millisecond))
	t1 := time.Now()
	err = runOnce()
	took := time.Since(t1)
	t.Logf("a start on the stalled Engine answered after %v: %v", took.Round(time.Millisecond), err)
	if !errors.Is(err, ErrEngineDown) {
		t.Fatalf("start on a stalled Engine: %v, want ErrEngineDown", err)
	}
	if took > 3*time.Second {
		t.Fatalf("start on a stalled Engine took %v", took)
	}

	cont()
	t2 := time.Now()
	for !up() {
		if time.Since(t2) > 30*time.Second {
			t.Fatal("the Engine is still reported down 30 s after it was resumed")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := runOnce(); err != nil {
		t.Fatalf("a command after the Engine resumed: %v", err)
	}
	t.Logf("recovered (up, and a command ran) %v after SIGCONT", time.Since(t2).Round(time.Millisecond))
}
