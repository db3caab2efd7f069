package sessions

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"syscall"
	"time"

	"github.com/sandboxctl/sandboxctl/api"

	"github.com/sandboxctl/sandboxctl/vocab"
)

// CancelledApproval is a request GuardCaps.CancelUnused cancelled, with the sessions
// that waited on it.
type CancelledApproval struct {
	Slug                string
	SessionIDs          []string
	AgentID, SessionKey string
	Command, Cwd        string
	Host                vocab.Host
	CreatedAt           time.Time
	// Decision is what a human decided, if anyone did, before the restart.
	Decision vocab.ApprovalDecision
}

// approvalCancelReason is why a restarted daemon cancels the requests of
// the previous one.
const approvalCancelReason = "the daemon restarted while the command waited for approval; the request was cancelled and the command did not run (run it again to ask again)"

// errKilledAwaitingApproval ends a session killed before its approval.
var errKilledAwaitingApproval = errors.New("killed while waiting for approval")

// approvalProcess stands in for a command that waits for a human. It is a
// Process from the start, so the session machinery (poll, log, kill, TTL)
// treats it like any other; once the command starts, the real process's
// streams are copied through and its exit is reported.
type approvalProcess struct {
	pty        bool
	outR, errR *io.PipeReader
	outW, errW *io.PipeWriter
	cancel     context.CancelFunc // ends the wait for a decision

	mu          sync.Mutex
	proc        Process
	sendSignal  func(ctx context.Context, sig syscall.Signal) error // the started command's (Started.Signal)
	ready       chan struct{}                                       // closed by attach or fail
	failErr     error
	stdinClosed bool
	cols, rows  int
	note        string
}

func newApprovalProcess(pty bool, note string, cancel context.CancelFunc) *approvalProcess {
	a := &approvalProcess{pty: pty, cancel: cancel, ready: make(chan struct{}), note: note}
	a.outR, a.outW = io.Pipe()
	if !pty {
		a.errR, a.errW = io.Pipe()
	}
	return a
}

func (a *approvalProcess) started() Process {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.proc
}

// StatusNote says why a running session shows no progress yet.
func (a *approvalProcess) StatusNote() string {
	if a.started() != nil {
		return ""
	}
	return a.note
}

func (a *approvalProcess) PID() int {
	if p := a.started(); p != nil {
		return p.PID()
	}
	return 0
}

func (a *approvalProcess) Stdout() io.Reader { return a.outR }

func (a *approvalProcess) Stderr() io.Reader {
	if a.errR == nil {
		return nil
	}
	return a.errR
}

func (a *approvalProcess) Write(b []byte) (int, error) {
	if p := a.started(); p != nil {
		return p.Write(b)
	}
	return 0, errors.New("the command is waiting for approval and has not started; nothing reads its stdin yet")
}

func (a *approvalProcess) CloseStdin() error {
	a.mu.Lock()
	p := a.proc
	if p == nil {
		a.stdinClosed = true
	}
	a.mu.Unlock()
	if p != nil {
		return p.CloseStdin()
	}
	return nil
}

func (a *approvalProcess) Resize(ctx context.Context, cols, rows int) error {
	a.mu.Lock()
	p := a.proc
	if p == nil {
		a.cols, a.rows = cols, rows
	}
	a.mu.Unlock()
	if p != nil {
		return p.Resize(ctx, cols, rows)
	}
	if !a.pty {
		return errors.New("resize needs a PTY session")
	}
	return nil
}

func (a *approvalProcess) Wait(ctx context.Context) (int, string, error) {
	select {
	case <-ctx.Done():
		return 0, "", ctx.Err()
	case <-a.ready:
	}
	a.mu.Lock()
	p, err := a.proc, a.failErr
	a.mu.Unlock()
	if errors.Is(err, errKilledAwaitingApproval) {
		return -1, "SIGKILL", nil
	}
	if err != nil {
		return -1, "", err
	}
	return p.Wait(ctx)
}

// Signal delivers sig once the approved command runs; before that there is
// nothing to signal.
func (a *approvalProcess) Signal(ctx context.Context, sig syscall.Signal) error {
	a.mu.Lock()
	p, send := a.proc, a.sendSignal
	a.mu.Unlock()
	if p == nil {
		return errors.New("the command has not started (it awaits approval); kill without a signal cancels it")
	}
	if send == nil {
		return errSignalUnsupported
	}
	return send(ctx, sig)
}

func (a *approvalProcess) Kill(ctx context.Context) error {
	if p := a.started(); p != nil {
		return p.Kill(ctx)
	}
	a.cancel()
	a.fail(errKilledAwaitingApproval)
	return nil
}

// attach hands over to the started command; false when the wait already
// ended (killed), in which case the caller must kill proc.
func (a *approvalProcess) attach(st Started) bool {
	proc := st.Process
	a.mu.Lock()
	select {
	case <-a.ready:
		a.mu.Unlock()
		return false
	default:
	}
	a.proc, a.sendSignal = proc, st.Signal
	closeStdin, cols, rows := a.stdinClosed, a.cols, a.rows
	close(a.ready)
	a.mu.Unlock()
	if closeStdin {
		_ = proc.CloseStdin()
	}
	if cols > 0 && rows > 0 {
		_ = proc.Resize(context.Background(), cols, rows)
	}
	pump := func(w *io.PipeWriter, r io.Reader) {
		if r == nil {
			_ = w.Close()
			return
		}
		_, err := io.Copy(w, r)
		_ = w.CloseWithError(err)
	}
	go pump(a.outW, proc.Stdout())
	if a.errW != nil {
		go pump(a.errW, proc.Stderr())
	}
	return true
}

// fail ends the wait without a command: the session fails with err.
func (a *approvalProcess) fail(err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	select {
	case <-a.ready:
		return
	default:
	}
	a.failErr = err
	_ = a.outW.Close()
	if a.errW != nil {
		_ = a.errW.Close()
	}
	close(a.ready)
}

// startAfterApproval keeps an approval-pending exec as a background session
// and starts its command once the guard's approval is decided.
func (m *Manager) startAfterApproval(v GuardVerdict, plan execPlan, host Host, spec StartSpec, warnings []string) (api.Result, error) {
	id, err := m.reserveID(plan.p.AgentID)
	if err != nil {
		return api.Result{}, err
	}
	spec.SessionID = id
	waitCtx, cancel := context.WithCancel(m.ctx)
	slug := v.Approval.ApprovalSlug
	proc := newApprovalProcess(spec.PTY, "waiting for approval "+slug, cancel)
	s := m.newSession(plan.p, plan.host, spec.Dir, plan.p.Command, Started{Process: proc, Signal: proc.Signal}, plan.keepStdin)
	s.id = id
	s.reqID, s.actor, s.node = plan.reqID, plan.actor, m.nodeOf(plan)
	s.visible = true
	s.awaitingApproval = true
	if err := m.register(s); err != nil {
		cancel()
		return api.Result{}, err
	}
	if attach := v.Pending.Attach; attach != nil {
		// Without the record, a restart still cancels the request; only
		// this session would not come back to say so.
		if err := attach(m.ctx, id); err != nil {
			m.logf("sessions: approval %s: record session %s: %v", slug, id, err)
		}
	}
	if plan.explicitTimeout {
		s.mu.Lock()
		m.armTimeoutLocked(s, plan.timeout)
		s.mu.Unlock()
	}
	m.run(s)
	if plan.started != nil {
		plan.started(newStartedFollower(m, s))
	}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		defer cancel()
		final, err := v.Pending.Await(waitCtx)
		s.mu.Lock()
		s.awaitingApproval = false
		s.mu.Unlock()
		if err == nil {
			_ = m.record(m.ctx, outcomeRecord(s, v, final))
			m.publishApprovalOutcome(s, v, final)
		}
		switch {
		case err != nil && waitCtx.Err() != nil:
			proc.fail(errKilledAwaitingApproval)
			return
		case err != nil:
			proc.fail(fmt.Errorf("approval: %w", err))
			return
		case final.Decision != vocab.DecisionRun:
			proc.fail(fmt.Errorf("denied: %s", final.Reason))
			return
		}
		if final.Command != "" {
			spec.Command = final.Command
		}
		spec.Confine = final.Confine
		real, err := host.Start(m.ctx, spec)
		if err != nil {
			proc.fail(fmt.Errorf("start after approval: %w", err))
			return
		}
		if !proc.attach(real) {
			kctx, kcancel := context.WithTimeout(context.Background(), killCallTimeout)
			_ = real.Kill(kctx)
			kcancel()
			return
		}
		s.mu.Lock()
		s.pid = real.PID()
		s.forget = real.Forget
		s.mu.Unlock()
		m.recordStart(m.ctx, s, spec.Command)
	}()
	r := approvalResult(v.Approval, plan, plan.command, spec.Dir, warnings)
	r.Details.SessionID = id
	r.Content[0].Text += fmt.Sprintf("\n\nOnce approved, the command runs as session %s: follow it with process poll %s.", id, id)
	return r, nil
}

// publishApprovalOutcome announces the final verdict on session s's
// pending approval v: approval-decided, or approval-expired when the
// request expired and askFallback decided.
func (m *Manager) publishApprovalOutcome(s *session, v, final GuardVerdict) {
	typ, what := vocab.EventApprovalDecided, "decided"
	if final.Expired {
		typ, what = vocab.EventApprovalExpired, "expired"
	}
	decision := "deny"
	if final.Decision == vocab.DecisionRun {
		decision = "run"
	}
	if m.obs != nil {
		s.mu.Lock()
		waited := time.Since(s.startedReal)
		s.mu.Unlock()
		verdict := vocab.DecisionDeny
		if final.Decision == vocab.DecisionRun {
			verdict = vocab.DecisionRun
		}
		m.obs.ApprovalDecided(verdict, final.Expired, waited)
	}
	details := api.Details{
		ApprovalID: v.Approval.ApprovalID, ApprovalSlug: v.Approval.ApprovalSlug,
		Decision: decision, Reason: final.Reason, SessionID: s.id,
	}
	m.Publish(api.Event{Type: typ, SessionID: s.id, AgentID: s.agentID, SessionKey: s.sessionKey, Time: m.now(), Details: details,
		Text: fmt.Sprintf("Approval %v %s for session %s: %s", v.Approval.ApprovalSlug, what, s.id, decision)})
}
