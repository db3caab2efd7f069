package sessions

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/sandboxctl/sandboxctl/api"

	"github.com/sandboxctl/sandboxctl/hostexec/guard"
	"github.com/sandboxctl/sandboxctl/nodeexec"
	"github.com/sandboxctl/sandboxctl/sessions/output"
	"github.com/sandboxctl/sandboxctl/vocab"
)

var updateWire = flag.Bool("update-wire", false, "rewrite testdata/wire from the current code")

// checkWire compares v's JSON with testdata/wire/name.json: the JSON clients
// see of each result kind and event, recorded before the typed details
// replaced the map, must stay byte for byte what it was.
func checkWire(t *testing.T, name string, v any) {
	t.Helper()
	got, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	path := filepath.Join("testdata", "wire", name+".json")
	if *updateWire {
		if err := os.WriteFile(path, append(got, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want = bytes.TrimSuffix(want, []byte("\n"))
	if !bytes.Equal(got, want) {
		t.Errorf("%s: the JSON on the wire changed:\n got %s\nwant %s", name, got, want)
	}
	// A Go client (and the events journal, replaying from disk) decodes it
	// into the same type without losing a member.
	back := reflect.New(reflect.TypeOf(v))
	if err := json.Unmarshal(want, back.Interface()); err != nil {
		t.Fatalf("%s: decode: %v", name, err)
	}
	again, err := json.Marshal(back.Elem().Interface())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again, want) {
		t.Errorf("%s: decoded and encoded again:\n got %s\nwant %s", name, again, want)
	}
}

// wireSession is a session with fixed values for the golden results.
func wireSession(m *Manager) *session {
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	s := &session{
		id: "sess-1", scope: scopeKey("agent-a", "key-1"), agentID: "agent-a", sessionKey: "key-1",
		command: "echo hi; sleep 5", name: "echo hi", cwd: "/work", host: vocab.HostSandbox, pid: 42,
		startedAt: start, agg: output.NewLog(1 << 20), pendOut: output.NewTail(1 << 20), pendErr: output.NewTail(1 << 20),
		visible: true, done: make(chan struct{}), proc: newFakeProc(true), pty: true,
	}
	s.agg.WriteStream(output.StreamStdout, "hi\nthere\n", 9)
	s.stdinOpen = true
	return s
}

func finish(s *session, status string, code int, sig, reason string) *session {
	s.finished, s.status, s.exitCode, s.signal, s.reason = true, status, code, sig, reason
	s.endedAt = s.startedAt.Add(1500 * time.Millisecond)
	return s
}

func TestWireGoldenResults(t *testing.T) {
	c := newClock()
	c.Advance(90 * time.Second)
	m, _ := newTestManager(t, nil, func(o *Options) { o.Now = c.Now })
	warn := []string{"the workdir /x does not exist; using /work"}
	checkWire(t, "exec-completed", finalResultLocked(finish(wireSession(m), api.StatusCompleted, 0, "", ""), time.Time{}, nil))
	checkWire(t, "exec-completed-code", finalResultLocked(finish(wireSession(m), api.StatusCompleted, 3, "", ""), time.Time{}, warn))
	checkWire(t, "exec-signaled", finalResultLocked(finish(wireSession(m), api.StatusFailed, -1, "SIGTERM", "terminated by signal SIGTERM"), time.Time{}, nil))
	checkWire(t, "exec-timeout", finalResultLocked(finish(wireSession(m), api.StatusFailed, -1, "SIGKILL", "timeout after 5s"), time.Time{}, nil))
	checkWire(t, "exec-killed", finalResultLocked(finish(wireSession(m), api.StatusFailed, -1, "SIGKILL", "killed"), time.Time{}, nil))
	checkWire(t, "exec-lost", finalResultLocked(finish(wireSession(m), api.StatusFailed, -1, "", "lost: the sandbox was removed"), time.Time{}, nil))
	checkWire(t, "exec-running", runningResultLocked(wireSession(m), warn))
	checkWire(t, "exec-denied", deniedResult("security is deny: every command is refused", warn))
	checkWire(t, "not-found", notFoundResult("sess-9"))

	gate := toGuardVerdict(guard.GateVerdict{Decision: vocab.DecisionApprovalPending, Reason: "ask is always", Pending: &guard.Pending{
		ID: "ap-1", Slug: "brave-otter", ExpiresAtMs: 1767323045000, Host: vocab.HostGateway, Command: "rm -rf /tmp/x", Cwd: "/home/u",
		Argv: []string{"/bin/sh", "-c", "rm -rf /tmp/x"}, Env: map[string]string{"A": "1"}, AgentID: "agent-a", SessionKey: "key-1",
		Explain: "rm: removes files",
	}}).Approval
	plan := execPlan{host: vocab.HostGateway}
	ap := approvalResult(gate, plan, "rm -rf /tmp/x", "/home/u", nil)
	ap.Details.SessionID = "sess-2"
	checkWire(t, "exec-approval-pending-gateway", ap)
	node := (&nodeexec.ApprovalPendingError{Node: "n1", Approval: nodeexec.Approval{ApprovalRequest: api.ApprovalRequest{ID: "ap-2", Slug: "calm-fox", ExpiresAtMs: 1767323045000,
		Command: "ls", Cwd: "/srv"}, NodeID: "node-1"}}).Details()
	checkWire(t, "exec-approval-pending-node", approvalResult(node, execPlan{host: vocab.HostNode}, "ls", "/srv", warn))

	// The process tool.
	run := wireSession(m)
	run.mu.Lock()
	checkWire(t, "state-running", run.stateDetailsLocked())
	run.mu.Unlock()
	m.mu.Lock()
	m.sessions[run.id] = run
	m.mu.Unlock()
	checkWire(t, "process-list", m.list(run.scope))
	res, err := m.log(run, api.ProcessParams{})
	if err != nil {
		t.Fatal(err)
	}
	checkWire(t, "process-log", res)
	res, err = m.write(run, []byte("abc"), true, "write")
	if err != nil {
		t.Fatal(err)
	}
	checkWire(t, "process-write", res)
	cols, rows := 100, 40
	res, err = m.resize(t.Context(), run, api.ProcessParams{Cols: &cols, Rows: &rows})
	if err != nil {
		t.Fatal(err)
	}
	checkWire(t, "process-resize", res)
	done := finish(wireSession(m), api.StatusFailed, -1, "SIGKILL", "killed")
	done.mu.Lock()
	checkWire(t, "state-failed", done.stateDetailsLocked())
	checkWire(t, "event-exit", m.exitEventLocked(done))
	done.mu.Unlock()
	res, err = m.clear(done)
	if err != nil {
		t.Fatal(err)
	}
	checkWire(t, "process-clear", res)
	res, err = m.remove(done)
	if err != nil {
		t.Fatal(err)
	}
	checkWire(t, "process-remove", res)
	ok := finish(wireSession(m), api.StatusCompleted, 0, "", "")
	ok.mu.Lock()
	checkWire(t, "event-exit-completed", m.exitEventLocked(ok))
	ok.mu.Unlock()
}

// TestWireGoldenMore: cases recorded from the code before the typed
// details (a gateway approval without env, GET /v1/sessions, a completed
// session's log, an evicted session).
func TestWireGoldenMore(t *testing.T) {
	v := toGuardVerdict(guard.GateVerdict{Decision: vocab.DecisionApprovalPending, Reason: "ask is always", Pending: &guard.Pending{
		ID: "ap-3", Slug: "quiet-owl", ExpiresAtMs: 1767323045000, Host: vocab.HostGateway, Command: "ls", Cwd: "/home/u",
		Argv: []string{"/bin/sh", "-c", "ls"},
	}})
	checkWire(t, "exec-approval-pending-gateway-noenv", approvalResult(v.Approval, execPlan{host: vocab.HostGateway}, "ls", "/home/u", nil))
	checkWire(t, "event-approval-gateway-noenv", api.Event{Type: vocab.EventApproval, AgentID: "a", Details: v.Approval, Text: "Approval requested"})

	c := newClock()
	c.Advance(90 * time.Second)
	m, _ := newTestManager(t, nil, func(o *Options) { o.Now = c.Now })
	done := finish(wireSession(m), api.StatusCompleted, 2, "", "")
	m.mu.Lock()
	m.sessions[done.id] = done
	m.mu.Unlock()
	checkWire(t, "sessions-list", m.Sessions(""))
	res, err := m.log(done, api.ProcessParams{})
	if err != nil {
		t.Fatal(err)
	}
	checkWire(t, "process-log-completed", res)
	r := notFoundResult("sess-8")
	r.Details.Reason = "evicted"
	checkWire(t, "not-found-evicted", r)
}
