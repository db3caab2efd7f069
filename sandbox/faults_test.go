package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
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
		cl, err := m.first().supervisorClient(ctx, id)
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
				if _, err := m.first().cli.ContainerStop(ctx, id, client.ContainerStopOptions{Timeout: &timeout}); err != nil {
					t.Fatal(err)
				}
			case "kill":
				if _, err := m.first().cli.ContainerKill(ctx, id, client.ContainerKillOptions{Signal: "KILL"}); err != nil {
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
		insp, err := m.first().cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
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

// TestFaultDeadContainerFailsCommands replays issue 13 item 2: after the
// sandbox's container is killed, removed, or loses its supervisor, a
// running command fails within 2 s with a reason that names what happened,
// and a removed container is forgotten.
func TestFaultDeadContainerFailsCommands(t *testing.T) {
	cases := []struct {
		fault, want string
	}{
		{"kill", "exit code 137 \\(signal 9\\)"},
		{"rm", "exit code 137|was removed"},
		{"supervisor", "exited with exit code"},
	}
	for _, tc := range cases {
		t.Run(tc.fault, func(t *testing.T) {
			var logs strings.Builder
			var logMu sync.Mutex
			m := newManagerOpts(t, func(o *Options) {
				o.Logf = func(f string, a ...any) {
					logMu.Lock()
					fmt.Fprintf(&logs, f+"\n", a...)
					logMu.Unlock()
				}
			})
			s := Scope{AgentID: "a1"}
			st := startCmd(t, m, s, "echo up; sleep 300", nil)
			p := mustSupervised(t, st)
			line := newLineReader(p.Stdout())
			if got := line.next(t); got != "up" {
				t.Fatalf("first line %q", got)
			}
			id := st.Ensure.ID
			ctx := ctxT(t)
			cl, err := m.first().supervisorClient(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			switch tc.fault {
			case "kill":
				if _, err := m.first().cli.ContainerKill(ctx, id, client.ContainerKillOptions{Signal: "KILL"}); err != nil {
					t.Fatal(err)
				}
			case "rm":
				if _, err := m.first().cli.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true}); err != nil {
					t.Fatal(err)
				}
			case "supervisor":
				killSupervisorFromHost(t, m, id)
			}
			injected := time.Now()
			select {
			case <-p.Done():
			case <-time.After(10 * time.Second):
				t.Fatalf("the command still runs 10 s after its container died (%s)", tc.fault)
			}
			took := time.Since(injected)
			_, _, err = p.Wait(ctx)
			t.Logf("%s: noticed after %s: %v", tc.fault, took.Round(time.Millisecond), err)
			if took > 2*time.Second {
				t.Errorf("noticed after %s, want within 2 s", took)
			}
			if !errors.Is(err, ErrContainerGone) || !regexp.MustCompile(tc.want).MatchString(err.Error()) {
				t.Fatalf("wait error %v, want ErrContainerGone naming %q", err, tc.want)
			}
			// A kill now answers at once: nothing is left to end.
			kctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			if err := p.Kill(kctx); err != nil {
				t.Fatalf("kill after death: %v", err)
			}
			// The connection has ended for good: nothing keeps dialing (and
			// inspecting) a dead container.
			select {
			case <-cl.Done():
			case <-time.After(20 * time.Second):
				t.Fatalf("the supervisor client of the dead container still runs (err %v)", cl.Err())
			}
			if tc.fault == "rm" {
				waitUntil(t, func() bool { return !slices.Contains(m.first().clients.ids(), id) })
			}
		})
	}
}

// killSupervisorFromHost SIGKILLs the supervisor of container id: the
// first child of the container's init, as this host's /proc shows it.
func killSupervisorFromHost(t *testing.T, m *Manager, id string) {
	t.Helper()
	insp, err := m.first().cli.ContainerInspect(ctxT(t), id, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The supervisor is the container's pid 1 (no docker-init).
	pid := insp.Container.State.Pid
	if pid <= 0 {
		t.Fatalf("the sandbox has no init pid: %+v", insp.Container.State)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill supervisor pid %d: %v", pid, err)
	}
}

// TestFaultOtherStateDirLeftAlone replays issue 13 item 4 (second half):
// two Managers with different state directories and the same
// containerPrefix on one Engine. The second neither runs in, recreates,
// lists nor removes the first one's sandbox, and the first one's command
// keeps running.
func TestFaultOtherStateDirLeftAlone(t *testing.T) {
	a := newTestManager(t, nil)
	s := Scope{AgentID: "a1"}
	st := startCmd(t, a, s, "echo up; sleep 60", nil)
	p := mustSupervised(t, st)
	if got := newLineReader(p.Stdout()).next(t); got != "up" {
		t.Fatalf("first line %q", got)
	}
	cfg := a.cfg
	cfg.Docker.Env = map[string]string{"OTHER": "1"} // another config hash too
	b, err := NewManager(context.Background(), Options{Config: cfg, StateDir: t.TempDir(), Home: t.TempDir(), Labels: a.first().labels})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	ctx := ctxT(t)
	_, err = b.Start(ctx, s, ExecOptions{Cmd: []string{"sh", "-c", "echo T >> /workspace/runs.txt"}})
	if !errors.Is(err, ErrOtherStateDir) {
		t.Fatalf("second state dir's start: %v, want ErrOtherStateDir", err)
	}
	t.Logf("refused: %v", err)
	if err := b.RemoveByName(ctx, st.Ensure.Name); !errors.Is(err, ErrOtherStateDir) {
		t.Fatalf("second state dir's remove: %v", err)
	}
	if list, err := b.List(ctx); err != nil || len(list) != 0 {
		t.Fatalf("second state dir lists %v (%v)", list, err)
	}
	if _, err := os.Stat(filepath.Join(st.Ensure.Workspace, "runs.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the refused command ran: %v", err)
	}
	select {
	case <-p.Done():
		_, _, err := p.Wait(ctx)
		t.Fatalf("the first state dir's command ended: %v", err)
	default:
	}
	// Still the same container, still answering.
	if out, code := run(t, a, s, "echo alive"); code != 0 || out != "alive\n" {
		t.Fatalf("first sandbox: %q %d", out, code)
	}
}

// TestSignalBothPaths: Signal delivers the chosen signal to the command's
// tree on the supervisor path and on the plain Engine exec path.
func TestSignalBothPaths(t *testing.T) {
	for _, plain := range []bool{false, true} {
		t.Run(fmt.Sprintf("plain=%v", plain), func(t *testing.T) {
			m := newManagerOpts(t, func(o *Options) { o.DisableSupervisor = plain })
			st := startCmd(t, m, Scope{AgentID: "sig"}, `trap 'echo usr1' USR1; echo ready; while :; do sleep 0.05; done`, nil)
			if e := st.Process.Stderr(); e != nil {
				go func() { _, _ = io.Copy(io.Discard, e) }()
			}
			lines := newLineReader(st.Process.Stdout())
			if got := lines.next(t); got != "ready" {
				t.Fatalf("first line %q", got)
			}
			ctx := ctxT(t)
			if err := st.Process.Signal(ctx, syscall.SIGUSR1); err != nil {
				t.Fatal(err)
			}
			if got := lines.next(t); got != "usr1" {
				t.Fatalf("after SIGUSR1: %q", got)
			}
			if err := st.Process.Signal(ctx, syscall.SIGINT); err != nil {
				t.Fatal(err)
			}
			code, sig, err := st.Process.Wait(ctx)
			if err != nil || (sig != "SIGINT" && code != 130) {
				t.Fatalf("after SIGINT: code %d signal %q err %v", code, sig, err)
			}
		})
	}
}
