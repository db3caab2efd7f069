package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sandboxctl/sandboxctl/sandbox"
	"github.com/sandboxctl/sandboxctl/sessions"
	"github.com/sandboxctl/sandboxctl/sessions/config"
	"github.com/sandboxctl/sandboxctl/sessions/hosttest"
)

// newSandboxStack returns a sandbox.Manager on the busybox test image and a
// sessions.Manager whose default host is that sandbox (security full, ask
// off, as the conformance suite expects). Everything is removed at the end.
func newSandboxStack(t *testing.T, mutate func(*config.File)) (*sandbox.Manager, *sessions.Manager) {
	t.Helper()
	requireDocker(t, testImage)
	cfg := config.Default()
	cfg.Exec.Host = "sandbox"
	cfg.Exec.Security = "full"
	cfg.Exec.Ask = "off"
	cfg.Sandbox.Docker.Image = testImage
	cfg.Sandbox.Docker.ContainerPrefix = "sbxi-" + randSuffix() + "-"
	cfg.Sandbox.WorkspaceRoot = t.TempDir()
	if mutate != nil {
		mutate(&cfg)
	}
	ctx := context.Background()
	sm, err := sandbox.NewManager(ctx, sandbox.Options{
		Config: cfg.Sandbox, StateDir: t.TempDir(), Home: t.TempDir(),
		Labels: map[string]string{testLabel: "integration", testLabel + ".prefix": cfg.Sandbox.Docker.ContainerPrefix},
	})
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := sessions.New(sessions.Options{Config: cfg, Hosts: map[string]sessions.Host{"sandbox": sessions.NewSandboxHost(sm)}, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = mgr.Close(cctx)
		list, _ := sm.List(cctx)
		for _, c := range list {
			_ = sm.RemoveByName(cctx, c.Name)
		}
		_ = sm.Close()
	})
	return sm, mgr
}

func randSuffix() string {
	return fmt.Sprintf("%06x", time.Now().UnixNano()&0xffffff)
}

// TestSandboxHostConformance runs the Host conformance suite against the
// sandbox host on the plain Engine exec path: one container serves every
// case, as one agent's sandbox serves all its commands.
func TestSandboxHostConformance(t *testing.T) {
	sm, mgr := newSandboxStack(t, nil)
	const agent = "conformance"
	if _, err := sm.Ensure(context.Background(), sandbox.Scope{AgentID: agent}); err != nil {
		t.Fatal(err)
	}
	hosttest.Run(t, func(t *testing.T) hosttest.Target {
		return hosttest.Target{
			Tools:      mgr,
			Host:       "sandbox",
			AgentID:    agent,
			SessionKey: "s-" + strings.ReplaceAll(t.Name(), "/", "-"),
			Scratch:    "/workspace",
			Inspect: func(ctx context.Context, command string) (string, error) {
				out, code, err := sm.Run(ctx, sandbox.Scope{AgentID: agent}, []string{"sh", "-c", command})
				if err == nil && code != 0 {
					err = fmt.Errorf("exit %d", code)
				}
				return out, err
			},
		}
	})
}
