package sandbox

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"
)

// settleSessions waits until the supervisor of container id runs no
// session: every command it was handed has ended. Frames on one connection
// are ordered, so a List answered after an Open was sent covers it.
func settleSessions(t *testing.T, m *Manager, id string) {
	t.Helper()
	ctx := ctxT(t)
	deadline := time.Now().Add(30 * time.Second)
	for {
		cl, err := m.supervisorClient(ctx, id)
		if err == nil {
			infos, lerr := cl.List(ctx)
			if lerr == nil {
				running := 0
				for _, in := range infos {
					if in.Running {
						running++
					}
				}
				if running == 0 {
					return
				}
			}
			err = lerr
		}
		if time.Now().After(deadline) {
			t.Fatalf("supervisor of %s did not settle: %v", short(id), err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestFaultRestartedContainerRunsOnce replays issue 13 item 1: the first
// command after the sandbox's container was stopped (or killed) and started
// again must run exactly once. A marker file in the workspace counts runs.
func TestFaultRestartedContainerRunsOnce(t *testing.T) {
	for _, fault := range []string{"stop", "kill", "stop", "kill"} {
		t.Run(fault, func(t *testing.T) {
			m := newTestManager(t, nil)
			s := Scope{AgentID: "a1"}
			st := startCmd(t, m, s, "true", nil)
			mustSupervised(t, st)
			drain(t, st.Process)
			id := st.Ensure.ID
			ctx := ctxT(t)
			switch fault {
			case "stop":
				timeout := 1
				if _, err := m.cli.ContainerStop(ctx, id, client.ContainerStopOptions{Timeout: &timeout}); err != nil {
					t.Fatal(err)
				}
			case "kill":
				if _, err := m.cli.ContainerKill(ctx, id, client.ContainerKillOptions{Signal: "KILL"}); err != nil {
					t.Fatal(err)
				}
				waitStopped(t, m, id)
			}
			st2, err := m.Start(ctx, s, ExecOptions{Cmd: []string{"sh", "-c", "echo T >> /workspace/runs.txt"}})
			if err != nil {
				// Refusing is allowed (it may not know whether it ran);
				// running twice is not.
				t.Logf("second command refused: %v", err)
			} else {
				_, _, code, _ := drain(t, st2.Process)
				t.Logf("second command: code %d warnings %q (%T)", code, st2.Warnings, st2.Process)
			}
			settleSessions(t, m, id)
			data, _ := os.ReadFile(filepath.Join(st.Ensure.Workspace, "runs.txt"))
			if n := strings.Count(string(data), "T\n"); n > 1 || (err == nil && n != 1) {
				t.Fatalf("the command ran %d times (runs.txt %q, start error %v)", n, data, err)
			}
		})
	}
}

// waitStopped waits until the Engine reports container id not running.
func waitStopped(t *testing.T, m *Manager, id string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		insp, err := m.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
		if err != nil {
			t.Fatalf("inspect: %v", err)
		}
		if insp.Container.State == nil || !insp.Container.State.Running {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatal("container still running")
		case <-time.After(20 * time.Millisecond):
		}
	}
}
