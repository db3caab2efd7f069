package sessions

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"

	"github.com/sandboxctl/sandboxctl/api"
	"github.com/sandboxctl/sandboxctl/internal/audit"
	"github.com/sandboxctl/sandboxctl/vocab"
)

// record appends r to the audit log; the error (only under
// audit.onFailure refuse) means the action r records must not happen.
func (m *Manager) record(ctx context.Context, r audit.Record) error {
	return m.audit.Record(ctx, r)
}

// newRequestID ties the records of one exec request together.
func newRequestID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// execRecord is the exec.request (or exec.refused) record of p: the
// environment's names only, never its values.
func execRecord(kind audit.Kind, reqID string, p api.ExecParams) audit.Record {
	names := make([]string, 0, len(p.Env))
	for k := range p.Env {
		names = append(names, k)
	}
	slices.Sort(names)
	return audit.Record{Kind: kind, RequestID: reqID, AgentID: p.AgentID, SessionKey: p.SessionKey,
		Host: p.Host, Node: p.Node,
		Exec: &audit.Exec{Command: p.Command, EnvNames: names, Cwd: p.Workdir, Security: p.Security, Ask: p.Ask,
			PTY: p.PTY, Background: p.Background, Elevated: p.Elevated}}
}

// refused records why exec request p did not run.
func (m *Manager) refused(ctx context.Context, reqID string, p api.ExecParams, host vocab.Host, why error) {
	r := execRecord(audit.KindExecRefused, reqID, p)
	if host != "" {
		r.Host = string(host)
	}
	r.Exec.Error = why.Error()
	_ = m.record(ctx, r)
}

// guardRecord is the guard.decision record of verdict v for plan.
func guardRecord(reqID string, plan execPlan, v GuardVerdict) audit.Record {
	return audit.Record{Kind: audit.KindGuardDecision, RequestID: reqID, AgentID: plan.p.AgentID, SessionKey: plan.p.SessionKey,
		Host: string(plan.host), Node: plan.p.Node,
		Guard: &audit.Guard{Decision: string(v.Decision), Rule: v.Reason, Security: string(plan.security), Ask: string(plan.ask),
			Command: v.Command, Confine: v.Confine != ""}}
}

// approvalRecord is the approval.request record of a pending approval.
func approvalRecord(reqID string, plan execPlan, approval api.Details, command string) audit.Record {
	id, slug := approval.ApprovalID, approval.ApprovalSlug
	return audit.Record{Kind: audit.KindApprovalRequest, RequestID: reqID, AgentID: plan.p.AgentID, SessionKey: plan.p.SessionKey,
		Host: string(plan.host), Node: plan.p.Node, Approval: &audit.Approval{ID: id, Slug: slug, Command: command}}
}

// recordStart records s's start on its host (the command as it runs).
func (m *Manager) recordStart(ctx context.Context, s *session, command string) {
	s.mu.Lock()
	r := audit.Record{Kind: audit.KindSessionStart, RequestID: s.reqID, Actor: s.actor, SessionID: s.id,
		AgentID: s.agentID, SessionKey: s.sessionKey, Host: string(s.host), Node: s.node,
		Session: &audit.Session{Command: command, Cwd: s.cwd, PID: s.pid}}
	s.mu.Unlock()
	_ = m.record(ctx, r)
}

// exitRecordLocked is the session.exit record of finished session s.
func exitRecordLocked(s *session) audit.Record {
	sr := &audit.Session{Status: s.status, Signal: s.signal, Reason: s.reason, PID: s.pid,
		DurationMs: s.endedAt.Sub(s.startedAt).Milliseconds(), OutputBytes: s.readRaw}
	if s.status == api.StatusCompleted {
		code := s.exitCode
		sr.ExitCode = &code
	}
	return audit.Record{Kind: audit.KindSessionExit, RequestID: s.reqID, Actor: s.actor, SessionID: s.id,
		AgentID: s.agentID, SessionKey: s.sessionKey, Host: string(s.host), Node: s.node, Session: sr}
}

// outcomeRecord is the approval.outcome record of s's approval.
func outcomeRecord(s *session, v, final GuardVerdict) audit.Record {
	id, slug := v.Approval.ApprovalID, v.Approval.ApprovalSlug
	decision := "deny"
	if final.Decision == vocab.DecisionRun {
		decision = "run"
	}
	return audit.Record{Kind: audit.KindApprovalOutcome, RequestID: s.reqID, Actor: audit.Actor{Via: "daemon"}, SessionID: s.id,
		AgentID: s.agentID, SessionKey: s.sessionKey, Host: string(s.host),
		Approval: &audit.Approval{ID: id, Slug: slug, Decision: decision, Reason: final.Reason, Expired: final.Expired}}
}

// nodeOf is the node a node run goes to as asked (the request's, else
// exec.node); "" for the other hosts.
func (m *Manager) nodeOf(plan execPlan) string {
	if plan.host != vocab.HostNode {
		return ""
	}
	if plan.p.Node != "" {
		return plan.p.Node
	}
	return m.cfg.Exec.Node
}

// recordInput records a process action that acts on session s (input
// written to it, a signal, its removal) before it is done: the size and
// SHA-256 of the input, never its content (it may be a password).
func (m *Manager) recordInput(ctx context.Context, s *session, action string, data []byte, signal string) error {
	pr := &audit.Process{Action: action, Signal: signal}
	if data != nil {
		sum := sha256.Sum256(data)
		pr.Bytes, pr.SHA256 = int64(len(data)), hex.EncodeToString(sum[:])
	}
	s.mu.Lock()
	r := audit.Record{Kind: audit.KindProcessAction, RequestID: s.reqID, SessionID: s.id, AgentID: s.agentID, SessionKey: s.sessionKey,
		Host: string(s.host), Node: s.node, Process: pr}
	s.mu.Unlock()
	if err := m.record(ctx, r); err != nil {
		return fmt.Errorf("process %s: %w", action, err)
	}
	return nil
}
