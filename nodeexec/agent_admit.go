package nodeexec

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/sandboxctl/sandboxctl/envguard"
	"github.com/sandboxctl/sandboxctl/hostexec"
	"github.com/sandboxctl/sandboxctl/internal/audit"
	"github.com/sandboxctl/sandboxctl/sessions/hostapi"
	"github.com/sandboxctl/sandboxctl/vocab"
)

// handleRun admits a system.run: idempotency first, then (in a goroutine)
// the node's own checks and the start.
func (a *agent) handleRun(l *agentLink, f *frame) {
	p := f.Run
	if p == nil {
		_ = l.send(&frame{Type: frameDenied, RunID: f.RunID, Reason: "invalid system.run request: no parameters"})
		return
	}
	if p.Approved != nil || p.ApprovalDecision != "" {
		// Only this node's approvals count (OpenClaw #8682/#8683).
		a.logf("nodeexec: run %s: ignoring approved/approvalDecision sent by the gateway", truncate(p.RunID, 64))
		p.Approved, p.ApprovalDecision = nil, ""
	}
	if err := p.validate(); err != nil {
		_ = l.send(&frame{Type: frameDenied, RunID: f.RunID, Reason: "invalid system.run request: " + err.Error()})
		return
	}
	a.mu.Lock()
	now := time.Now()
	for k, e := range a.idem {
		if now.Sub(e.at) > a.opts.IdempotencyTTL && e.answer != nil && a.runs[e.runID] == nil {
			delete(a.idem, k)
		}
	}
	if e := a.idem[p.IdempotencyKey]; e != nil {
		a.mu.Unlock()
		if e.runID != p.RunID {
			_ = l.send(&frame{Type: frameDenied, RunID: p.RunID, Reason: "idempotencyKey already used by another run"})
			return
		}
		a.goAsync(func() { a.replay(l, e) })
		return
	}
	if a.runs[p.RunID] != nil {
		a.mu.Unlock()
		_ = l.send(&frame{Type: frameDenied, RunID: p.RunID, Reason: "runId already in use"})
		return
	}
	e := &idemEntry{runID: p.RunID, at: now, ready: make(chan struct{})}
	a.idem[p.IdempotencyKey] = e
	a.mu.Unlock()
	a.goAsync(func() { a.startRun(l, p, e) })
}

// replay answers a retried system.run without starting anything.
func (a *agent) replay(l *agentLink, e *idemEntry) {
	select {
	case <-e.ready:
	case <-a.ctx.Done():
		return
	}
	a.mu.Lock()
	ans, exit, r := e.answer, e.exit, a.runs[e.runID]
	a.mu.Unlock()
	if ans.Type != frameStarted {
		_ = l.send(ans)
		return
	}
	st := *ans.Started
	st.Reattached = true
	if r != nil {
		r.emit(&frame{Type: frameStarted, RunID: e.runID, Started: &st})
		return
	}
	_ = l.send(&frame{Type: frameStarted, RunID: e.runID, Started: &st})
	if exit != nil {
		_ = l.send(&frame{Type: frameExit, RunID: e.runID, Exit: exit})
	}
}

// startRun runs the node's own checks and starts the process.
func (a *agent) startRun(l *agentLink, p *RunParams, e *idemEntry) {
	ans, r := a.admit(p)
	a.mu.Lock()
	e.answer = ans
	if r != nil {
		a.runs[r.id] = r
		r.mu.Lock()
		r.link = a.link
		r.mu.Unlock()
		if a.link == nil && a.grace == nil {
			a.grace = time.AfterFunc(a.opts.LinkGrace, a.graceExpired)
		}
	}
	close(e.ready)
	stopping := a.stopping
	a.mu.Unlock()
	if r != nil && stopping {
		a.end(r)
		return
	}
	if r == nil {
		if cur := a.currentLink(); cur != nil {
			l = cur
		}
		_ = l.send(ans)
		return
	}
	r.emit(ans)
	r.begin()
}

func denied(runID, reason string) *frame {
	return &frame{Type: frameDenied, RunID: runID, Reason: reason}
}

// admit applies the node's checks in order — envguard, rawCommand ↔ argv,
// workdir, the node's guard — and starts the process if they all pass.
func (a *agent) admit(p *RunParams) (*frame, *nodeRun) {
	if err := a.record(p, audit.KindExecRequest, nil); err != nil {
		return denied(p.RunID, err.Error()), nil
	}
	if err := envguard.CheckRequest(vocab.HostNode, p.Env); err != nil {
		a.refused(p, "env: "+err.Error())
		return denied(p.RunID, "env: "+err.Error()), nil
	}
	line, err := CheckRawCommand(p.Argv, p.RawCommand)
	if err != nil {
		a.refused(p, err.Error())
		return denied(p.RunID, err.Error()), nil
	}
	cwd, warnings := a.resolveCwd(p.Dir)
	ctx, cancel := context.WithTimeout(a.ctx, 30*time.Second)
	defer cancel()
	v, err := a.guard.Check(ctx, GuardRequest{
		Line: line, Argv: p.Argv, Cwd: cwd, Env: p.Env, Path: a.runner.Path(),
		AgentID: p.AgentID, SessionKey: p.SessionKey, Security: p.Security, Ask: p.Ask, NodeID: a.nodeID, PTY: p.PTY,
	})
	if err != nil {
		a.refused(p, "the node's guard failed: "+err.Error())
		return denied(p.RunID, "the node's guard failed, so nothing runs: "+err.Error()), nil
	}
	_ = a.record(p, audit.KindGuardDecision, func(r *audit.Record) {
		r.Guard = &audit.Guard{Decision: string(v.Decision), Rule: v.Reason, Security: string(p.Security), Ask: string(p.Ask), Command: v.Command}
	})
	switch v.Decision {
	case vocab.DecisionRun:
	case vocab.DecisionApprovalPending:
		ap := Approval{}
		if v.Approval != nil {
			ap = *v.Approval
		}
		ap.NodeID = a.nodeID
		return &frame{Type: framePending, RunID: p.RunID, Reason: v.Reason, Approval: &ap}, nil
	default:
		reason := v.Reason
		if reason == "" {
			reason = "refused by the node's guard"
		}
		return denied(p.RunID, reason), nil
	}
	command := v.Command
	if command == "" {
		command = line
	}
	command, _ = peelShell(command, a.runner.Shell())
	spec := hostapi.StartSpec{
		Command: command, Env: p.Env, Dir: cwd, PTY: p.PTY, Cols: p.Cols, Rows: p.Rows,
		KeepStdin: p.KeepStdin, Tag: hostexec.NewTag(),
	}
	st := RunState{
		RunID: p.RunID, Command: truncate(line, 200), Owner: p.Owner, SessionID: p.SessionID,
		AgentID: p.AgentID, SessionKey: p.SessionKey, Dir: cwd, PTY: p.PTY, KeepStdin: p.KeepStdin || p.PTY,
		StartedAtMs: time.Now().UnixMilli(),
	}
	var deadline time.Time
	if p.TimeoutMs > 0 {
		deadline = time.Now().Add(time.Duration(p.TimeoutMs) * time.Millisecond)
	}
	var proc runProc

	pty := p.PTY
	if a.sup != nil {
		proc, err = a.openSupervised(ctx, spec, p.IdempotencyKey, st, deadline)
	} else {
		var hp *hostexec.Process
		if hp, err = a.startChild(ctx, spec); err == nil {
			proc, pty = hp, hp.IsPTY()
			warnings = append(warnings, hp.Warnings()...)
		}
	}
	if err != nil {
		a.refused(p, err.Error())
		return &frame{Type: frameError, RunID: p.RunID, Reason: err.Error()}, nil
	}
	_ = a.record(p, audit.KindSessionStart, func(r *audit.Record) {
		r.Session = &audit.Session{Command: command, Cwd: cwd, PID: proc.PID()}
	})
	r := newNodeRun(a, p.RunID, p.IdempotencyKey, spec.Tag, st)
	r.proc = proc
	if !deadline.IsZero() {
		r.armTimeout(deadline, p.TimeoutMs)
	}
	started := &startedInfo{PID: proc.PID(), PTY: pty, Cwd: cwd, Warnings: warnings}
	return &frame{Type: frameStarted, RunID: p.RunID, Started: started}, r
}

// startChild starts spec as a child of the agent, recorded in the run
// ledger until it ended.
func (a *agent) startChild(ctx context.Context, spec hostapi.StartSpec) (*hostexec.Process, error) {
	if err := a.ledger.add(spec.Tag); err != nil {
		return nil, err
	}
	proc, err := a.runner.Start(ctx, spec)
	if err != nil {
		a.ledger.done(spec.Tag)
		return nil, err
	}
	return proc, nil
}

// resolveCwd maps the requested directory to one on this node; anything that
// is not an existing directory falls back to the node's default.
func (a *agent) resolveCwd(req string) (string, []string) {
	if req == "" {
		return a.workdir, nil
	}
	p := req
	if !filepath.IsAbs(p) {
		p = filepath.Join(a.workdir, p)
	}
	p = filepath.Clean(p)
	if fi, err := os.Stat(p); err == nil && fi.IsDir() {
		return p, nil
	}
	return a.workdir, []string{fmt.Sprintf("workdir %q is not a directory on node %s; using %s", req, a.name, a.workdir)}
}

// record appends a record of run p to the node's audit log (nothing
// without one); fill sets its kind-specific part (default: the request).
func (a *agent) record(p *RunParams, kind audit.Kind, fill func(*audit.Record)) error {
	if a.opts.Audit == nil {
		return nil
	}
	r := audit.Record{Kind: kind, Actor: audit.Actor{Via: "gateway"}, RequestID: p.RunID, SessionID: p.SessionID,
		AgentID: p.AgentID, SessionKey: p.SessionKey, Host: string(vocab.HostNode), Node: a.nodeID}
	if fill != nil {
		fill(&r)
	} else {
		r.Exec = requestOf(p)
	}
	return a.opts.Audit.Record(context.Background(), r)
}

// requestOf is the audited part of run request p: env names, no values.
func requestOf(p *RunParams) *audit.Exec {
	names := make([]string, 0, len(p.Env))
	for k := range p.Env {
		names = append(names, k)
	}
	slices.Sort(names)
	return &audit.Exec{Command: p.RawCommand, Argv: p.Argv, EnvNames: names, Cwd: p.Dir,
		Security: string(p.Security), Ask: string(p.Ask), PTY: p.PTY}
}

// refused records why run p did not start.
func (a *agent) refused(p *RunParams, why string) {
	_ = a.record(p, audit.KindExecRefused, func(r *audit.Record) {
		r.Exec = requestOf(p)
		r.Exec.Error = why
	})
}
