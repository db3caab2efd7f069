package sessions

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandboxctl/sandboxctl/api"
)

// doubtingProc is a fakeProc whose host can lose sight of it
// (Started.Doubt), as a sandbox command does while its Engine stalls.
type doubtingProc struct {
	*fakeProc
	mu    sync.Mutex
	doubt string
}

func (p *doubtingProc) Doubt() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.doubt
}

func (p *doubtingProc) setDoubt(s string) {
	p.mu.Lock()
	p.doubt = s
	p.mu.Unlock()
}

// TestDoubtedSessionNotFailed: a session whose host says its state is
// unknown (issue 32 item 3: its Engine stopped answering) is polled and
// listed as running with the doubt as its reason, never failed, and ends
// with its true exit once the host sees it again.
func TestDoubtedSessionNotFailed(t *testing.T) {
	m, hosts := newTestManager(t, nil)
	p := &doubtingProc{fakeProc: newFakeProc(false)}
	hosts["sandbox"].startFunc = func(context.Context, StartSpec) (Process, error) { return p, nil }
	r, err := m.Exec(context.Background(), api.ExecParams{Command: "work", Background: true})
	if err != nil {
		t.Fatal(err)
	}
	id := r.Details.SessionID
	p.say("begin\n")
	const why = `unknown: sandbox Engine "e2" at unix:///x is not answering (no answer); the command may still be running`
	p.setDoubt(why)
	poll, err := m.Process(context.Background(), api.ProcessParams{Action: "poll", SessionID: id})
	if err != nil {
		t.Fatal(err)
	}
	if poll.Details.Status != api.StatusRunning || poll.Details.Reason != why || !strings.Contains(text(poll), "Process state "+why) {
		t.Fatalf("poll of a session in doubt: %v %q", poll.Details, text(poll))
	}
	list, _ := m.Process(context.Background(), api.ProcessParams{Action: "list"})
	if infos := list.Details.Sessions; len(infos) != 1 || infos[0].Status != api.StatusRunning || infos[0].Reason != why {
		t.Fatalf("list of a session in doubt: %v", list.Details)
	}

	p.setDoubt("")
	p.say("end\n")
	p.exit(7, "")
	deadline := time.Now().Add(10 * time.Second)
	for {
		poll, err = m.Process(context.Background(), api.ProcessParams{Action: "poll", SessionID: id})
		if err != nil {
			t.Fatal(err)
		}
		if poll.Details.Status != api.StatusRunning || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if poll.Details.Status != api.StatusCompleted || !exitedWith(poll.Details, 7) || poll.Details.Reason != "" {
		t.Fatalf("the session after its host sees it again: %v %q", poll.Details, text(poll))
	}
}

// lateHost is a fakeHost whose sessions come back late (HostCaps.Later).
type lateHost struct {
	*fakeHost
	late chan RecoveredSession
}

func (h *lateHost) Recover(context.Context) ([]RecoveredSession, error) { return nil, nil }
func (h *lateHost) Later(context.Context) <-chan RecoveredSession       { return h.late }
func (h *lateHost) Caps() HostCaps                                      { return HostCaps{Recover: h.Recover, Later: h.Later} }

// TestAwaitedSessionsAfterRestart: a background session of a host whose
// sessions come back late is shown by the next Manager on the same state,
// before its host brings it back, as a running session in doubt (never
// "No session found"); it becomes the real one when the host delivers it,
// and one the host no longer holds fails as lost, with the reason.
func TestAwaitedSessionsAfterRestart(t *testing.T) {
	file := t.TempDir() + "/awaited.json"
	first := &lateHost{fakeHost: &fakeHost{}, late: make(chan RecoveredSession)}
	m1, _ := newTestManager(t, nil, func(o *Options) { o.AwaitedFile = file; o.Hosts["sandbox"] = first })
	var ids []string
	for range 2 {
		p := newFakeProc(false)
		first.startFunc = func(context.Context, StartSpec) (Process, error) { return p, nil }
		r, err := m1.Exec(context.Background(), api.ExecParams{Command: "long job", Background: true, AgentID: "ag"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.Details.SessionID)
	}
	// m1 "crashes": it is left as it is (closed only at the test's end).

	second := &lateHost{fakeHost: &fakeHost{}, late: make(chan RecoveredSession)}
	m2, _ := newTestManager(t, nil, func(o *Options) { o.AwaitedFile = file; o.Hosts["sandbox"] = second })
	if _, err := m2.Recover(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		poll, err := m2.Process(context.Background(), api.ProcessParams{Action: "poll", SessionID: id, AgentID: "ag"})
		if err != nil {
			t.Fatal(err)
		}
		if poll.Details.Status != api.StatusRunning || !strings.Contains(poll.Details.Reason, "not answering since the daemon restarted") {
			t.Fatalf("poll of an awaited session: %v %q", poll.Details, text(poll))
		}
		if other, _ := m2.Process(context.Background(), api.ProcessParams{Action: "poll", SessionID: id, AgentID: "other"}); !strings.Contains(text(other), "No session found") {
			t.Fatalf("another agent polls the awaited session: %q", text(other))
		}
		if _, err := m2.Process(context.Background(), api.ProcessParams{Action: "kill", SessionID: id, AgentID: "ag"}); err == nil {
			t.Fatal("a kill of an awaited session was accepted")
		}
	}
	back := newFakeProc(false)
	second.late <- RecoveredSession{ID: ids[0], Command: "long job", AgentID: "ag", Started: Started{Process: back}}
	back.say("more\n")
	back.exit(0, "")
	deadline := time.Now().Add(10 * time.Second)
	// A poll answers only the output that is new since the one before, so a
	// poll between the output and the exit takes "more" and the final one
	// says "(no new output)": the whole output is what the polls said together.
	var said strings.Builder
	for {
		poll, _ := m2.Process(context.Background(), api.ProcessParams{Action: "poll", SessionID: ids[0], AgentID: "ag"})
		said.WriteString(text(poll))
		if poll.Details.Status == api.StatusCompleted {
			if !strings.Contains(said.String(), "more") {
				t.Fatalf("the session brought back: %q", said.String())
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the session brought back did not end: %v %q", poll.Details, text(poll))
		}
		time.Sleep(10 * time.Millisecond)
	}
	close(second.late) // the host has brought back all it holds
	for {
		poll, _ := m2.Process(context.Background(), api.ProcessParams{Action: "poll", SessionID: ids[1], AgentID: "ag"})
		if poll.Details.Status == api.StatusFailed {
			if !strings.Contains(poll.Details.Reason, "lost") {
				t.Fatalf("the session its host no longer holds: %v", poll.Details)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the session its host no longer holds is still awaited: %v", poll.Details)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// exitedWith reports whether d is an exit with code.
func exitedWith(d api.Details, code int) bool {
	n, ok := d.ExitCode.Int()
	return ok && n == code
}
