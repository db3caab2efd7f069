package sessions

import (
	"context"
	"fmt"
	"time"

	"github.com/sandboxctl/sandboxctl/api"

	"github.com/sandboxctl/sandboxctl/hostexec"
	"github.com/sandboxctl/sandboxctl/hostexec/guard"
	"github.com/sandboxctl/sandboxctl/vocab"
)

// GateGuard is the Guard of the gateway host over a guard.Gate (SECURITY.md, "The guard"):
// command analysis on the gateway's PATH, its allowlist and safe bins, and
// approvals in its approvals.json. For node runs it only applies the
// gateway's deny: the node judges every command again with its own guard,
// with the gateway's modes forwarded so that it can only become stricter.
type GateGuard struct {
	gate    *guard.Gate
	gateway *hostexec.Runner
}

// NewGateGuard returns the gateway's guard for commands that gateway runs:
// executables are resolved on its PATH, and approvals record the argv it
// executes (its shell, -c, the command).
func NewGateGuard(gate *guard.Gate, gateway *hostexec.Runner) *GateGuard {
	return &GateGuard{gate: gate, gateway: gateway}
}

// Check implements Guard.
func (g *GateGuard) Check(ctx context.Context, req GuardRequest) (GuardVerdict, error) {
	if req.Host == vocab.HostNode {
		if req.Security == vocab.SecurityDeny {
			return GuardVerdict{Decision: vocab.DecisionDeny, Reason: "security is deny: every command is refused"}, nil
		}
		return GuardVerdict{Decision: vocab.DecisionRun}, nil
	}
	runner := []string{g.gateway.Shell(), "-c"}
	if req.Host == vocab.HostSandbox {
		runner = sandboxRunner
	}
	v, err := g.gate.Check(ctx, guard.GateRequest{
		Line: req.Command, Runner: runner, Cwd: req.Cwd, Env: req.Env, Path: g.gateway.Path(),
		AgentID: req.AgentID, SessionKey: req.SessionKey, Host: req.Host, Security: req.Security, Ask: req.Ask, PTY: req.PTY,
		// In a sandbox the gateway's resolved paths mean nothing: only
		// ask=always applies there and the line runs as written.
		Contained: req.Host == vocab.HostSandbox,
	})
	if err != nil {
		return GuardVerdict{}, err
	}
	out := toGuardVerdict(v)
	if v.Decision == vocab.DecisionApprovalPending && v.Pending != nil {
		out.Pending = g.pending(v)
	}
	return out, nil
}

// pending is the gate's pending approval v as the Manager awaits it: Await
// blocks until a human decided (or the request expired into askFallback);
// Attach records the waiting session in approvals.json.
func (g *GateGuard) pending(v guard.GateVerdict) *PendingApproval {
	return &PendingApproval{
		Await: func(ctx context.Context) (GuardVerdict, error) {
			final, err := g.gate.Await(ctx, v)
			if err != nil {
				return GuardVerdict{}, err
			}
			out := toGuardVerdict(final)
			out.Expired = final.Expired
			return out, nil
		},
		Attach: func(ctx context.Context, sessionID string) error {
			return g.gate.Store.AttachSession(ctx, v.Pending.ID, sessionID)
		},
	}
}

// Caps implements Guard: the gate's approval requests outlive the daemon.
func (g *GateGuard) Caps() GuardCaps { return GuardCaps{CancelUnused: g.cancelUnused} }

func toGuardVerdict(v guard.GateVerdict) GuardVerdict {
	switch v.Decision {
	case vocab.DecisionRun:
		return GuardVerdict{Decision: vocab.DecisionRun, Reason: v.Reason, Command: v.Command, Confine: v.Confine}
	case vocab.DecisionApprovalPending:
		p := v.Pending
		return GuardVerdict{Decision: vocab.DecisionApprovalPending, Reason: v.Reason, Approval: api.Details{
			ApprovalID: p.ID, ApprovalSlug: p.Slug, ExpiresAtMs: p.ExpiresAtMs,
			Host: string(p.Host), Command: p.Command, Cwd: p.Cwd, NodeID: new(p.NodeID),
			Argv: p.Argv, Env: api.EnvOf(p.Env), AgentID: new(p.AgentID), SessionKey: new(p.SessionKey),
			Reason: v.Reason, Explain: new(p.Explain),
		}}
	default:
		return GuardVerdict{Decision: vocab.DecisionDeny, Reason: fmt.Sprintf("guard: %s", v.Reason)}
	}
}

// cancelUnused is GuardCaps.CancelUnused.
func (g *GateGuard) cancelUnused(ctx context.Context, reason string) ([]CancelledApproval, error) {
	list, err := g.gate.Store.CancelUnused(ctx, reason)
	out := make([]CancelledApproval, 0, len(list))
	for _, p := range list {
		out = append(out, CancelledApproval{Slug: p.Slug, SessionIDs: p.SessionIDs, AgentID: p.AgentID, SessionKey: p.SessionKey,
			Command: p.Command, Cwd: p.Cwd, Host: p.Host, CreatedAt: time.UnixMilli(p.CreatedAtMs), Decision: p.Decision})
	}
	return out, err
}
