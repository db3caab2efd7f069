package sandbox

import (
	"testing"
	"time"

	"github.com/moby/moby/client"
)

func paused(t *testing.T, m *Manager, id string) bool {
	t.Helper()
	insp, err := m.first().cli.ContainerInspect(ctxT(t), id, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return insp.Container.State != nil && insp.Container.State.Paused
}

// TestPauseIdleAndResume: a sandbox idle for pauseAfterMinutes is paused by
// the Engine (frozen, its state kept); the next command resumes it and
// sees that state; a sandbox running a command is never paused.
func TestPauseIdleAndResume(t *testing.T) {
	m := newTestManager(t, func(c *Config) { c.PauseAfterMinutes = 0.005 }) // 300 ms
	s := Scope{AgentID: "pause"}
	st := startCmd(t, m, s, `echo kept > /tmp/state`, nil)
	drain(t, mustSupervised(t, st))
	id := st.Ensure.ID
	waitUntil(t, func() bool { return paused(t, m, id) })

	st = startCmd(t, m, s, `cat /tmp/state`, nil)
	if out, _, code, _ := drain(t, mustSupervised(t, st)); out != "kept\n" || code != 0 || !st.Ensure.Resumed {
		t.Fatalf("after the pause: %q %d resumed %v", out, code, st.Ensure.Resumed)
	}

	// Busy: a command runs past the idle time; PauseIdle leaves it alone.
	st = startCmd(t, m, s, `sleep 2; echo done`, nil)
	p := mustSupervised(t, st)
	time.Sleep(700 * time.Millisecond) // past pauseAfter since the last use
	if _, err := m.PauseIdle(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if paused(t, m, id) {
		t.Fatal("a sandbox running a command was paused")
	}
	if out, _, code, _ := drain(t, p); out != "done\n" || code != 0 {
		t.Fatalf("command across the idle time: %q %d", out, code)
	}
}
