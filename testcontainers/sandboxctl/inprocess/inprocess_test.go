package inprocess_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/testcontainers/testcontainers-go"

	"github.com/sandboxctl/sandboxctl/internal/dockertest"
	"github.com/sandboxctl/sandboxctl/sessions/config"
	"github.com/sandboxctl/sandboxctl/testcontainers/sandboxctl"
	"github.com/sandboxctl/sandboxctl/testcontainers/sandboxctl/inprocess"
	"github.com/sandboxctl/sandboxctl/testcontainers/sandboxctl/internal/lifecycle"
)

const testImage = "sandboxctl/testbb:1"

// TestInProcessSandboxLifecycle: see lifecycle.Check.
func TestInProcessSandboxLifecycle(t *testing.T) {
	cli := dockertest.Require(t, testImage)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sb, err := inprocess.Run(ctx, lifecycle.Options(testImage)...)
	if err != nil {
		t.Fatal(err)
	}
	lifecycle.Check(ctx, t, cli, sb, 0)
}

// TestInProcessBadOptions: bad options are refused by name before anything
// starts.
func TestInProcessBadOptions(t *testing.T) {
	ctx := context.Background()
	for name, opt := range map[string]sandboxctl.Option{
		"host":   sandboxctl.WithHost("node"),
		"label":  sandboxctl.WithLabels(map[string]string{"sandboxctl.agentId": "mallory"}),
		"config": sandboxctl.WithConfigYAML([]byte("exec: [")),
	} {
		if _, err := inprocess.Run(ctx, opt); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: error %v, want one naming %s", name, err, name)
		}
	}
	// A config key this sandboxctl does not know is named with its line.
	_, err := inprocess.Run(ctx, sandboxctl.WithConfigYAML([]byte("exec:\n  hots: gateway\n")))
	if err == nil || !strings.Contains(err.Error(), "exec.hots") {
		t.Fatalf("unknown key: %v", err)
	}
	// A testcontainers option has no container to customise here: refused,
	// not ignored.
	_, err = sandboxctl.Run(ctx, "", sandboxctl.WithLauncher(inprocess.Mode{}), testcontainers.WithEnv(map[string]string{"X": "1"}))
	if !errors.Is(err, sandboxctl.ErrInvalidOption) || !strings.Contains(err.Error(), "testcontainers option") {
		t.Fatalf("generic option in-process: %v", err)
	}
}

// TestInProcessGateway runs on the gateway host (this machine) with
// security full, and copies a file through the local file system.
func TestInProcessGateway(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sb, err := inprocess.Run(ctx, sandboxctl.WithHost("gateway"), sandboxctl.WithTB(t),
		sandboxctl.WithConfigYAML([]byte("exec:\n  security: full\n  ask: \"off\"\n")))
	if err != nil {
		t.Fatal(err)
	}
	// No daemon in this mode: no endpoint to point a client at.
	if _, err := sb.Endpoint(); !cerrdefs.IsNotImplemented(err) {
		t.Fatalf("in-process Endpoint: %v, want not implemented", err)
	}
	dir := t.TempDir()
	if err := sb.CopyToContainer(ctx, []byte("x"), dir+"/in", 0o600); err != nil {
		t.Fatal(err)
	}
	res, err := sb.Exec(ctx, sandboxctl.ExecParams{Command: fmt.Sprintf("cat %s/in > %s/out; echo $$", dir, dir)})
	if err != nil || !lifecycle.ExitedZero(res) {
		t.Fatalf("exec: %v %v", err, res.Details)
	}
	rc, err := sb.CopyFileFromContainer(ctx, dir+"/out")
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if b, _ := io.ReadAll(rc); string(b) != "x" {
		t.Fatalf("copied out %q", b)
	}
}

// TestInProcessRuntimeReachesTheConfig: WithRuntime is
// sandbox.docker.runtime in the config the run uses. A sandboxctl without
// that key refuses it by name; one with it runs the sandbox under that
// runtime (the Engine's default runc here).
func TestInProcessRuntimeReachesTheConfig(t *testing.T) {
	dockertest.Require(t, testImage)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sb, err := inprocess.Run(ctx, sandboxctl.WithImage(testImage), sandboxctl.WithRuntime("runc"), sandboxctl.WithTB(t))
	if err != nil {
		if !strings.Contains(err.Error(), "sandbox.docker.runtime") {
			t.Fatalf("runc: %v, want success or a refusal naming sandbox.docker.runtime", err)
		}
		t.Logf("this sandboxctl has no sandbox.docker.runtime yet: %v", err)
		return
	}
	ex, err := sb.Explain(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(ex.Raw), `"runc"`) {
		t.Fatalf("explanation does not mention the runtime: %s", ex.Raw)
	}
}

// TestInProcessConfigStruct: WithConfig takes a config.File (marshalled to
// the YAML it was loaded from); its settings are in force.
func TestInProcessConfigStruct(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg := config.Default()
	cfg.Exec.Host = "gateway"
	cfg.Exec.Security = "full"
	cfg.Exec.Ask = "off"
	cfg.Exec.Cwd = t.TempDir()
	sb, err := inprocess.Run(ctx, sandboxctl.WithConfig(cfg), sandboxctl.WithTB(t))
	if err != nil {
		t.Fatal(err)
	}
	res, err := sb.Exec(ctx, sandboxctl.ExecParams{Command: "pwd"})
	if err != nil || !lifecycle.ExitedZero(res) || strings.TrimSpace(fmt.Sprint(*res.Details.Aggregated)) != cfg.Exec.Cwd {
		t.Fatalf("exec on the configured gateway cwd %s: %v %v", cfg.Exec.Cwd, err, res)
	}
}
