package sandbox

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/moby/moby/client"
	"testing"

	"github.com/sandboxctl/sandboxctl/sandbox/supervisor"
)

// forgedFrames is what a process of the sandbox writes into every
// descriptor it can open that is not its own: an Open on the current
// connection, then a Hello taking the connection over and another Open,
// each Open running a command that leaves a marker in the workspace and
// claiming another agent in its meta.
func forgedFrames(t *testing.T) []byte {
	t.Helper()
	open := func(id string) []byte {
		b, err := json.Marshal(supervisor.OpenSpec{
			ID: id, Argv: []string{"sh", "-c", "echo " + id + " >> /workspace/FORGED"},
			Env:  []string{"PATH=/usr/bin:/bin"},
			Meta: map[string]string{"agentId": "intruder", "sessionKey": "main", "sessionId": id},
		})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	hello, _ := json.Marshal(supervisor.Hello{Version: supervisor.ProtocolVersion, Client: "intruder"})
	var b []byte
	b = supervisor.AppendFrame(b, supervisor.FrameOpen, 0x7ffffff1, open("forged-a"))
	b = supervisor.AppendFrame(b, supervisor.FrameHello, 0, hello)
	b = supervisor.AppendFrame(b, supervisor.FrameOpen, 0x7ffffff2, open("forged-b"))
	return b
}

// injectScript tries every descriptor of every process of the sandbox that
// the daemon did not start (no SANDBOXCTL_RUN in its environment, or an
// environment it cannot read: docker-init, the supervisor), fds 0-9 and
// whatever /proc lists, for writing (the frames) and for reading. It prints
// TRIED for each path and WRITE-OK / READ-OK for each that opened.
const injectScript = `
echo "$FRAMES" | base64 -d > /tmp/frames
for p in /proc/[0-9]*; do
  pid=${p#/proc/}
  [ "$pid" = "$$" ] && continue
  grep -q SANDBOXCTL_RUN= $p/environ 2>/dev/null && continue
  for n in 0 1 2 3 4 5 6 7 8 9 $(ls $p/fd 2>/dev/null); do
    f=$p/fd/$n
    echo "TRIED $f"
    if timeout 2 sh -c 'cat /tmp/frames > "$1"' _ "$f" 2>/dev/null; then echo "WRITE-OK $f"; fi
    if timeout 2 sh -c 'exec 3< "$1" && echo opened' _ "$f" 2>/dev/null | grep -q opened; then echo "READ-OK $f"; fi
  done
done
echo ATTACK-DONE
`

// TestSecuritySandboxCannotInjectControlFrames replays issue 12 item 3: a
// command of the sandbox opens the supervisor's control stream through
// /proc (docker-init's fd 0 on main) and injects an Open with a forged
// agentId and a Hello that takes the daemon's connection over. Nothing of
// that stream may be openable, no forged command may run, the daemon's
// running session must be unaffected, and a restarted daemon must adopt
// nothing into another agent.
func TestSecuritySandboxCannotInjectControlFrames(t *testing.T) {
	for _, tc := range []struct {
		name       string
		attachOnly bool
		user       string
	}{{"local socket", false, ""}, {"attach stream", true, ""}, {"attach stream, sandbox user root", true, "0"}} {
		t.Run(tc.name, func(t *testing.T) {
			m := newManagerOpts(t, func(o *Options) {
				o.SupervisorAttachOnly = tc.attachOnly
				o.Config.Docker.User = tc.user
			})
			injectionAttempt(t, m)
		})
	}
}

// injectionAttempt runs the attack of TestSecuritySandboxCannotInjectControlFrames
// against m's sandbox and checks its outcome.
func injectionAttempt(t *testing.T, m *Manager) {
	s := Scope{AgentID: "victim", SessionKey: "main"}
	ctx := ctxT(t)

	victim := mustSupervised(t, startCmd(t, m, s, `sleep 3; echo victim-done`, func(o *ExecOptions) {
		o.Meta = map[string]string{"agentId": "victim", "sessionKey": "main"}
	}))
	if held := streamHolders(t, m, victim.containerID); len(held) > 0 {
		t.Errorf("processes of the sandbox hold the control stream: %q", held)
	}
	attack := startCmd(t, m, s, injectScript, func(o *ExecOptions) {
		o.Env = []string{"FRAMES=" + base64.StdEncoding.EncodeToString(forgedFrames(t))}
		o.Meta = map[string]string{"agentId": "victim", "sessionKey": "main"}
	})
	out, errs, code, err := drainErr(t, mustSupervised(t, attack))
	if err != nil {
		t.Errorf("the attack command's own session failed: %v (output %q)", err, out)
	} else if code != 0 || !strings.Contains(out, "ATTACK-DONE") || !strings.Contains(out, "TRIED /proc/1/fd/0") {
		t.Fatalf("attack script did not run through: code %d out %q err %q", code, out, errs)
	}
	var opened []string
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "WRITE-OK ") || strings.HasPrefix(line, "READ-OK ") {
			opened = append(opened, line)
		}
	}

	// The daemon's session runs on and ends normally on its connection.
	vout, _, vcode, err := drainErr(t, victim)
	if err != nil || vcode != 0 || vout != "victim-done\n" {
		t.Errorf("victim session after the attack: code %d out %q err %v (want 0, victim-done)", vcode, vout, err)
	}
	// A command started after the attack ended goes through the same
	// stdin after every injected frame, so once it ran the supervisor has
	// seen (and, if it could, run) the forged Opens.
	after := mustSupervised(t, startCmd(t, m, s, `echo after`, nil))
	if aout, _, acode, err := drainErr(t, after); err != nil || acode != 0 || aout != "after\n" {
		t.Errorf("command after the attack: code %d out %q err %v", acode, aout, err)
	}
	ws := workspaceOf(m, s)
	if data, err := os.ReadFile(filepath.Join(ws, "FORGED")); err == nil {
		t.Errorf("forged commands ran: FORGED holds %q", data)
	}
	if len(opened) > 0 {
		t.Errorf("a sandbox process opened the control stream: %q", opened)
	}

	// A restarted daemon adopts nothing into another agent.
	m2 := sibling(t, m, func(*Config) {}, nil)
	found, err := m2.Sessions(ctx)
	if err != nil {
		t.Fatalf("sessions after restart: %v", err)
	}
	for _, rs := range found {
		if rs.AgentID != "victim" || strings.HasPrefix(rs.ID, "forged") {
			t.Errorf("after restart: session %s %q adopted into agent %q", rs.ID, rs.Argv, rs.AgentID)
		}
	}
	if len(found) < 3 {
		t.Errorf("after restart: %d sessions, want the victim, the attack and the one after", len(found))
	}
}

// drainErr is drain that returns the error of Wait instead of failing,
// and fails with the container's state when the command has not ended
// within drainDeadline.
func drainErr(t *testing.T, p Process) (string, string, int, error) {
	t.Helper()
	var out, errb bytes.Buffer
	done := make(chan struct{})
	go func() {
		defer close(done)
		var wg sync.WaitGroup
		if p.Stderr() != nil {
			wg.Add(1)
			go func() { defer wg.Done(); _, _ = io.Copy(&errb, p.Stderr()) }()
		}
		_, _ = io.Copy(&out, p.Stdout())
		wg.Wait()
	}()
	select {
	case <-done:
	case <-time.After(drainDeadline):
		state := "?"
		if se, ok := p.(*SupervisedExec); ok {
			if insp, err := se.m.cli.ContainerInspect(context.Background(), se.containerID, clientInspect()); err == nil && insp.Container.State != nil {
				cs := insp.Container.State
				state = fmt.Sprintf("running %v exit %d oomKilled %v error %q", cs.Running, cs.ExitCode, cs.OOMKilled, cs.Error)
			}
		}
		t.Fatalf("command %s did not end within %s; container: %s", p.Tag(), drainDeadline, state)
	}
	code, _, err := p.Wait(ctxT(t))
	return out.String(), errb.String(), code, err
}

// streamHolders looks from the host (this test runs where the Engine's
// processes are visible, as root) at every process of the container but
// its main process, and returns the descriptors that are the main
// process's stdin, stdout or stderr (the attach stream). It fails when the
// main process's descriptors cannot be read, rather than find nothing.
func streamHolders(t *testing.T, m *Manager, containerID string) []string {
	t.Helper()
	insp, err := m.first().cli.ContainerInspect(ctxT(t), containerID, clientInspect())
	if err != nil || insp.Container.State == nil || insp.Container.State.Pid <= 0 {
		t.Fatalf("inspect %s: %v", containerID, err)
	}
	initPID := insp.Container.State.Pid
	stream := map[string]bool{}
	for fd := 0; fd <= 2; fd++ {
		l, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%d", initPID, fd))
		if err != nil {
			t.Fatalf("the attach stream of the sandbox's pid 1 (host pid %d) is not readable from the test: %v", initPID, err)
		}
		stream[l] = true
	}
	ents, _ := os.ReadDir("/proc")
	var held []string
	for _, e := range ents {
		pid := e.Name()
		if pid == fmt.Sprint(initPID) || pid[0] < '0' || pid[0] > '9' {
			continue
		}
		cg, err := os.ReadFile("/proc/" + pid + "/cgroup")
		if err != nil || !strings.Contains(string(cg), containerID) {
			continue
		}
		fds, _ := os.ReadDir("/proc/" + pid + "/fd")
		for _, fd := range fds {
			l, err := os.Readlink("/proc/" + pid + "/fd/" + fd.Name())
			if err == nil && stream[l] {
				held = append(held, fmt.Sprintf("pid %s fd %s -> %s", pid, fd.Name(), l))
			}
		}
	}
	return held
}

// drainDeadline bounds drainErr.
const drainDeadline = 90 * time.Second

// workspaceOf is the host directory mounted at /workspace for s.
func workspaceOf(m *Manager, s Scope) string {
	scopeKey, name, _, _ := m.Layout(s)
	return m.first().layoutFor(scopeKey, name).WorkspaceHost
}

// TestSecurityRecoverOwnerFromLabels: a session whose kept metadata names
// another agent than the sandbox it runs in (what a forged Open carried on
// main) is not adopted by a restarted daemon, and the others are adopted
// into the sandbox's agent whatever their metadata says.
func TestSecurityRecoverOwnerFromLabels(t *testing.T) {
	m := newTestManager(t, nil)
	s := Scope{AgentID: "owner", SessionKey: "k1"}
	forged := mustSupervised(t, startCmd(t, m, s, `sleep 30`, func(o *ExecOptions) {
		o.Meta = map[string]string{"agentId": "intruder", "sessionKey": "main"}
	}))
	honest := mustSupervised(t, startCmd(t, m, s, `sleep 30`, func(o *ExecOptions) {
		o.Meta = map[string]string{"agentId": "owner", "sessionKey": "k2"}
	}))
	m2 := sibling(t, m, func(*Config) {}, nil)
	found, err := m2.Sessions(ctxT(t))
	if !errors.Is(err, ErrOwnerMismatch) || !strings.Contains(err.Error(), forged.ID()) {
		t.Errorf("Sessions error = %v, want ErrOwnerMismatch naming %s", err, forged.ID())
	}
	var ids []string
	for _, rs := range found {
		ids = append(ids, rs.ID)
		if rs.AgentID != "owner" {
			t.Errorf("session %s adopted into agent %q", rs.ID, rs.AgentID)
		}
	}
	if len(found) != 1 || found[0].ID != honest.ID() || found[0].SessionKey != "k2" {
		t.Errorf("adopted %q, want only %s (key k2)", ids, honest.ID())
	}
	for _, p := range []*SupervisedExec{forged, honest} {
		_ = p.Kill(ctxT(t))
	}
}

func TestSessionOwner(t *testing.T) {
	agent := map[string]string{LabelScopeKey: "agent:a1", LabelAgentID: "a1", LabelSessionKey: "x"}
	session := map[string]string{LabelScopeKey: "session:k", LabelAgentID: "a1", LabelSessionKey: "k"}
	shared := map[string]string{LabelScopeKey: "shared", LabelAgentID: "a1"}
	for _, tc := range []struct {
		name         string
		labels, meta map[string]string
		agent, key   string
		mismatch     bool
	}{
		{"agent scope", agent, map[string]string{"agentId": "a1", "sessionKey": "k9"}, "a1", "k9", false},
		{"agent scope, other agent", agent, map[string]string{"agentId": "a2"}, "", "", true},
		{"agent scope, no agent in meta", agent, map[string]string{}, "a1", "", false},
		{"agent scope, empty agent in meta", agent, map[string]string{"agentId": ""}, "", "", true},
		{"session scope", session, map[string]string{"agentId": "a1", "sessionKey": "k"}, "a1", "k", false},
		{"session scope, no meta", session, map[string]string{}, "a1", "k", false},
		{"session scope, other key", session, map[string]string{"agentId": "a1", "sessionKey": "k2"}, "", "", true},
		{"session scope, other agent", session, map[string]string{"agentId": "a2", "sessionKey": "k"}, "", "", true},
		{"shared", shared, map[string]string{"agentId": "a2", "sessionKey": "k"}, "a2", "k", false},
		{"no labels", map[string]string{}, map[string]string{"agentId": "a1"}, "", "", true},
	} {
		a, k, err := sessionOwner(tc.labels, tc.meta)
		if tc.mismatch != errors.Is(err, ErrOwnerMismatch) || a != tc.agent || k != tc.key {
			t.Errorf("%s: got %q %q %v", tc.name, a, k, err)
		}
	}
}

// TestSupervisorPID1StopsOnSIGTERM: as pid 1 the supervisor handles the
// SIGTERM of `docker stop` itself (pid 1 gets no default action): it ends
// the running commands and exits well before the Engine's SIGKILL.
func TestSupervisorPID1StopsOnSIGTERM(t *testing.T) {
	m := newTestManager(t, nil)
	s := Scope{AgentID: "stop"}
	st := startCmd(t, m, s, `sleep 300`, nil)
	mustSupervised(t, st)
	timeout := 20
	start := time.Now()
	if _, err := m.first().cli.ContainerStop(ctxT(t), st.Ensure.ID, client.ContainerStopOptions{Timeout: &timeout}); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("docker stop took %s: the supervisor ignored SIGTERM", took)
	}
	insp, err := m.first().cli.ContainerInspect(ctxT(t), st.Ensure.ID, clientInspect())
	if err != nil {
		t.Fatal(err)
	}
	if st := insp.Container.State; st.Running || st.ExitCode == 137 {
		t.Errorf("after stop: running %v exit %d (137: killed, not stopped)", st.Running, st.ExitCode)
	}
}
