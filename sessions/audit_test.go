package sessions

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/sandboxctl/sandboxctl/api"
	"github.com/sandboxctl/sandboxctl/internal/audit"
	"github.com/sandboxctl/sandboxctl/sessions/config"
)

// auditSpy keeps the records it is given; fail makes it answer like a log
// that cannot write under audit.onFailure refuse.
type auditSpy struct {
	mu   sync.Mutex
	recs []audit.Record
	fail bool
}

func (a *auditSpy) Record(ctx context.Context, r audit.Record) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.fail {
		return fmt.Errorf("%w: disk full", audit.ErrUnavailable)
	}
	if r.Actor.Via == "" {
		r.Actor = audit.ActorFrom(ctx)
	}
	a.recs = append(a.recs, r)
	return nil
}

func (a *auditSpy) kinds() []audit.Kind {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []audit.Kind
	for _, r := range a.recs {
		out = append(out, r.Kind)
	}
	return out
}

// TestAuditRefusedRequestNeverStarts: when the exec.request record cannot
// be written (refuse), the command never reaches its host and the error
// says why.
func TestAuditRefusedRequestNeverStarts(t *testing.T) {
	spy := &auditSpy{fail: true}
	m, hosts := newTestManager(t, func(c *config.File) { c.Exec.Host = "sandbox" }, func(o *Options) { o.Audit = spy })
	_, err := m.Exec(t.Context(), api.ExecParams{Command: "touch /x"})
	if !errors.Is(err, audit.ErrUnavailable) || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("got %v", err)
	}
	if n := len(hosts["sandbox"].specs); n != 0 {
		t.Fatalf("the host started %d command(s)", n)
	}
}

// TestAuditRecordsOneRun: a run writes its request, start and exit with
// one request id, the actor of its context and env names only.
func TestAuditRecordsOneRun(t *testing.T) {
	spy := &auditSpy{}
	m, _ := newTestManager(t, func(c *config.File) { c.Exec.Host = "sandbox" }, func(o *Options) { o.Audit = spy })
	uid := 1000
	ctx := audit.WithActor(t.Context(), audit.Actor{Via: "socket", UID: &uid, PID: 42})
	res, err := m.Exec(ctx, api.ExecParams{Command: "echo hi", AgentID: "a", Env: map[string]string{"B_TOKEN": "v1", "A": "v2"}})
	if err != nil || res.Details.Status != api.StatusCompleted {
		t.Fatalf("exec: %v %v", res.Details, err)
	}
	if got := spy.kinds(); !slices.Equal(got, []audit.Kind{audit.KindExecRequest, audit.KindSessionStart, audit.KindSessionExit}) {
		t.Fatalf("kinds %v", got)
	}
	req, start, exit := spy.recs[0], spy.recs[1], spy.recs[2]
	if req.RequestID == "" || start.RequestID != req.RequestID || exit.RequestID != req.RequestID {
		t.Fatalf("request ids %q %q %q", req.RequestID, start.RequestID, exit.RequestID)
	}
	if fmt.Sprint(req.Exec.EnvNames) != "[A B_TOKEN]" || strings.Contains(fmt.Sprintf("%+v", *req.Exec), "v1") {
		t.Fatalf("env in the record: %+v", req.Exec)
	}
	for _, r := range spy.recs {
		if r.Actor.UID == nil || *r.Actor.UID != 1000 || r.Actor.PID != 42 || r.AgentID != "a" {
			t.Fatalf("%s: actor %+v agent %q", r.Kind, r.Actor, r.AgentID)
		}
	}
	if exit.SessionID == "" || exit.SessionID != start.SessionID || exit.Session.ExitCode == nil || *exit.Session.ExitCode != 0 || exit.Session.Status != api.StatusCompleted {
		t.Fatalf("exit %+v %+v", exit, exit.Session)
	}
}

// TestAuditRefusedInputNeverWritten: under refuse, input to a session
// that cannot be recorded is not written (and the record, when it can be,
// has the input's size only).
func TestAuditRefusedInputNeverWritten(t *testing.T) {
	spy := &auditSpy{}
	m, hosts := newTestManager(t, func(c *config.File) { c.Exec.Host = "sandbox" }, func(o *Options) { o.Audit = spy })
	proc := newFakeProc(false)
	hosts["sandbox"].startFunc = func(context.Context, StartSpec) (Process, error) { return proc, nil }
	res, err := m.Exec(t.Context(), api.ExecParams{Command: "cat", Background: true})
	if err != nil {
		t.Fatal(err)
	}
	id := res.Details.SessionID
	if _, err := m.Process(t.Context(), api.ProcessParams{Action: "write", SessionID: id, Data: "pw\n"}); err != nil {
		t.Fatal(err)
	}
	spy.mu.Lock()
	last := spy.recs[len(spy.recs)-1]
	spy.fail = true
	spy.mu.Unlock()
	if last.Kind != audit.KindProcessAction || last.Process.Action != "write" || last.Process.Bytes != 3 || last.SessionID != id {
		t.Fatalf("process.action %+v %+v", last, last.Process)
	}
	if _, err := m.Process(t.Context(), api.ProcessParams{Action: "write", SessionID: id, Data: "second\n"}); !errors.Is(err, audit.ErrUnavailable) {
		t.Fatalf("write under a failing log: %v", err)
	}
	if got := proc.stdinString(); got != "pw\n" {
		t.Fatalf("stdin %q: the refused input was written", got)
	}
	proc.exit(0, "")
}
