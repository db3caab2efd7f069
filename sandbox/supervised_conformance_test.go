package sandbox_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandboxctl/sandboxctl/internal/dockertest"
	"github.com/sandboxctl/sandboxctl/sandbox"
	"github.com/sandboxctl/sandboxctl/sessions"
	"github.com/sandboxctl/sandboxctl/sessions/config"
	"github.com/sandboxctl/sandboxctl/sessions/hosttest"
	"github.com/sandboxctl/sandboxctl/vocab"
)

// TestSandboxConformanceBothPaths runs the Host conformance suite against
// the sandbox host on the supervisor path (over its local socket and over
// the Engine's attach stream; under runc and under gVisor) and on the
// plain Engine exec path
// (DisableSupervisor: the path a fallback takes, without the fallback's
// warning, which hosttest's exact "Command still running" prefix check does
// not allow); one sandbox per path serves every case.
func TestSandboxConformanceBothPaths(t *testing.T) {
	if testing.Short() {
		t.Skip("the conformance suite runs ~20 s per path")
	}
	image := os.Getenv("SANDBOXCTL_TEST_IMAGE")
	if image == "" {
		image = "sandboxctl/testbb:1"
	}
	dockertest.Require(t, image)
	for _, path := range []struct {
		name       string
		disable    bool
		attachOnly bool
		runtime    string
	}{
		{name: "supervisor"}, // over its local socket (this host runs the Engine)
		{name: "supervisor-attach", attachOnly: true},
		{name: "plain", disable: true},
		// gVisor: the supervisor over the attach stream (its socket is
		// in the gVisor kernel); `make docker-up` registers runsc.
		{name: "supervisor-runsc", runtime: sandbox.RuntimeRunsc},
	} {
		t.Run(path.name, func(t *testing.T) {
			b := make([]byte, 3)
			_, _ = rand.Read(b)
			cfg := config.Default()
			cfg.Exec.Host, cfg.Exec.Security, cfg.Exec.Ask = "sandbox", "full", "off"
			cfg.Sandbox.Docker.Image = image
			cfg.Sandbox.Docker.Runtime = path.runtime
			cfg.Sandbox.Docker.ContainerPrefix = "sbxt-" + hex.EncodeToString(b) + "-"
			cfg.Sandbox.WorkspaceRoot = t.TempDir()
			opts := sandbox.Options{
				Config: cfg.Sandbox, StateDir: t.TempDir(), Home: t.TempDir(), DisableSupervisor: path.disable, SupervisorAttachOnly: path.attachOnly, Logf: t.Logf,
				Labels: sandbox.TestLabels(),
			}
			cursors := filepath.Join(opts.StateDir, "cursors.json") // the daemon's, kept across its restart
			sm, err := sandbox.NewManager(context.Background(), opts)
			if err != nil {
				t.Fatal(err)
			}
			// restart stands for a new daemon on the same state: its own
			// sandbox Manager and sessions Manager, which recovers what the
			// supervisors kept. The plain path keeps nothing.
			var restart func(t *testing.T) hosttest.Tools
			if !path.disable {
				restart = func(t *testing.T) hosttest.Tools {
					sm2, err := sandbox.NewManager(context.Background(), opts)
					if err != nil {
						t.Fatal(err)
					}
					mgr2, err := sessions.New(sessions.Options{Config: cfg, Hosts: map[vocab.Host]sessions.Host{"sandbox": sessions.NewSandboxHost(sm2)}, CursorFile: cursors})
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() {
						c, cancel := context.WithTimeout(context.Background(), time.Minute)
						defer cancel()
						_ = mgr2.Close(c)
						_ = sm2.Close()
					})
					if _, err := mgr2.Recover(context.Background()); err != nil {
						t.Fatalf("Recover: %v", err)
					}
					return mgr2
				}
			}
			host := sessions.NewSandboxHost(sm)
			mgr, err := sessions.New(sessions.Options{Config: cfg, Hosts: map[vocab.Host]sessions.Host{"sandbox": host}, CursorFile: cursors})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				c, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				_ = mgr.Close(c)
				list, _ := sm.List(c)
				for _, ctr := range list {
					_ = sm.RemoveByName(c, ctr.Name)
				}
				_ = sm.Close()
			})
			const agent = "conformance"
			res, err := sm.Ensure(context.Background(), sandbox.Scope{AgentID: agent})
			if err != nil {
				t.Fatal(err)
			}
			if res.Supervised != !path.disable {
				t.Fatalf("supervised = %v on the %s path (%s)", res.Supervised, path.name, res.SupervisorNote)
			}
			hosttest.Run(t, func(t *testing.T) hosttest.Target {
				return hosttest.Target{
					Tools:      mgr,
					Restart:    restart,
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
		})
	}
}
