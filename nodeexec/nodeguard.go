package nodeexec

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sandboxctl/sandboxctl/hostexec/guard"
	"github.com/sandboxctl/sandboxctl/vocab"
)

// Guard is the node's own judge of a system.run. The gateway's verdict does
// not count on a node: every request is evaluated again here, with the
// node's configuration and approvals.json.
type Guard interface {
	// Check decides one request.
	Check(ctx context.Context, req GuardRequest) (GuardVerdict, error)
	// Summary describes the node's modes and approvals for hello.
	Summary(ctx context.Context) ApprovalSummary
	// Approvals lists the node's approval requests with their status.
	Approvals(ctx context.Context) ([]Approval, error)
	// Resolve records a human decision for an approval id or slug. An
	// unknown id is an error wrapping ErrApprovalUnknown.
	Resolve(ctx context.Context, id string, d vocab.ApprovalDecision) error
}

// GuardRequest is one system.run, as the node will execute it.
type GuardRequest struct {
	// Line is the shell line that runs: FormatArgv(Argv).
	Line string
	// Argv is the argv the gateway sent.
	Argv []string
	// Cwd is the absolute directory it runs in on the node.
	Cwd string
	// Env is the request env (already passed envguard).
	Env map[string]string
	// Path is the node's PATH, on which executables are resolved.
	Path                string
	AgentID, SessionKey string
	// Security and Ask are the gateway's modes; they can only tighten.
	Security vocab.Security
	Ask      vocab.Ask
	NodeID   string
	// PTY: the run has a terminal (pagers and editors take typed shell
	// escapes; see guard.Gadget).
	PTY bool
}

// GuardVerdict is the node's decision.
type GuardVerdict struct {
	Decision vocab.Decision
	Reason   string
	// Command is the shell line to execute when Decision is run.
	Command string
	// Approval is the pending request when Decision is approval-pending.
	Approval *Approval
}

// GuardConfig is a node's guard configuration (its own, never the
// gateway's).
type GuardConfig struct {
	// Security deny | allowlist | full. "" = approvals.json defaults, else
	// allowlist.
	Security vocab.Security `json:"security" yaml:"security"`
	// Ask off | on-miss | always. "" = approvals.json defaults, else on-miss.
	Ask vocab.Ask `json:"ask" yaml:"ask"`
	// AskFallback deny | allowlist | full: what an expired approval does.
	// "" = approvals.json defaults, else deny.
	AskFallback vocab.Security `json:"askFallback" yaml:"askFallback"`
	// SafeBins; nil = the default list.
	SafeBins []string `json:"safeBins" yaml:"safeBins"`
	// ApprovalTimeout is how long a request waits for a human (default 120 s).
	ApprovalTimeout time.Duration `json:"approvalTimeout" yaml:"approvalTimeout"`
}

// PolicyGuard is the Guard over hostexec/guard: Analyze, Policy.Evaluate and
// the node's approvals.json Store.
type PolicyGuard struct {
	cfg   GuardConfig
	store *guard.Store
	now   func() time.Time
}

// NewPolicyGuard opens (without creating) the approvals file at path and
// returns the node's guard. A corrupt file is an error, never reset.
func NewPolicyGuard(cfg GuardConfig, approvalsPath string) (*PolicyGuard, error) {
	var opts []guard.StoreOption
	if cfg.ApprovalTimeout > 0 {
		opts = append(opts, guard.WithTimeout(cfg.ApprovalTimeout))
	}
	for kind, v := range map[string]vocab.Security{"security": cfg.Security, "askFallback": cfg.AskFallback} {
		if v != "" {
			if _, err := vocab.ParseSecurity(string(v)); err != nil {
				return nil, fmt.Errorf("nodeexec: node guard %s: %w", kind, err)
			}
		}
	}
	if cfg.Ask != "" {
		if _, err := vocab.ParseAsk(string(cfg.Ask)); err != nil {
			return nil, fmt.Errorf("nodeexec: node guard ask: %w", err)
		}
	}
	st, err := guard.OpenStore(approvalsPath, opts...)
	if err != nil {
		return nil, fmt.Errorf("nodeexec: node guard: %w", err)
	}
	return &PolicyGuard{cfg: cfg, store: st, now: time.Now}, nil
}

// Store is the node's approvals store.
func (g *PolicyGuard) Store() *guard.Store { return g.store }

func (g *PolicyGuard) gate() *guard.Gate {
	return &guard.Gate{Store: g.store, Now: g.now, Config: guard.GateConfig{
		Security: g.cfg.Security, Ask: g.cfg.Ask,
		AskFallback: g.cfg.AskFallback, SafeBins: g.cfg.SafeBins,
	}}
}

// Summary implements Guard.
func (g *PolicyGuard) Summary(ctx context.Context) ApprovalSummary {
	sec, ask, fb, err := g.gate().Modes(ctx)
	s := ApprovalSummary{Security: sec, Ask: ask, AskFallback: fb}
	if err != nil {
		s.Error = err.Error()
		return s
	}
	if list, err := g.store.List(ctx); err == nil {
		now := g.now()
		for _, p := range list {
			if p.Status(now) == "pending" {
				s.Pending++
			}
		}
	} else {
		s.Error = err.Error()
	}
	if al, err := g.store.Allowlist(ctx, "*"); err == nil {
		s.Allowlist = len(al)
	}
	return s
}

// Approvals implements Guard.
func (g *PolicyGuard) Approvals(ctx context.Context) ([]Approval, error) {
	list, err := g.store.List(ctx)
	if err != nil {
		return nil, err
	}
	now := g.now()
	out := make([]Approval, 0, len(list))
	for _, p := range list {
		out = append(out, toApproval(p, now))
	}
	return out, nil
}

func toApproval(p guard.Pending, now time.Time) Approval {
	return Approval{ApprovalRequest: p.View(now), NodeID: p.NodeID, Security: p.Security, Ask: p.Ask}
}

// Resolve implements Guard.
func (g *PolicyGuard) Resolve(ctx context.Context, id string, d vocab.ApprovalDecision) error {
	if err := g.store.Resolve(ctx, id, d); err != nil {
		if errors.Is(err, guard.ErrUnknownApproval) {
			return fmt.Errorf("%w: %w", ErrApprovalUnknown, err)
		}
		return err
	}
	return nil
}

// Check implements Guard with the node's own guard.Gate: security
// min(node, gateway), ask max(node, gateway); analysis on the node's PATH;
// the node's allowlist; approvals from the node's approvals.json, bound to
// the exact line, argv, cwd, agent and env. Nothing the gateway says about
// approval is consulted.
func (g *PolicyGuard) Check(ctx context.Context, req GuardRequest) (GuardVerdict, error) {
	v, err := g.gate().Check(ctx, guard.GateRequest{
		Line: req.Line, Argv: req.Argv, Cwd: req.Cwd, Env: req.Env, Path: req.Path,
		AgentID: req.AgentID, SessionKey: req.SessionKey, Host: vocab.HostNode, NodeID: req.NodeID,
		Security: req.Security, Ask: req.Ask, PTY: req.PTY,
	})
	if err != nil {
		return GuardVerdict{}, err
	}
	switch v.Decision {
	case vocab.DecisionRun:
		return GuardVerdict{Decision: vocab.DecisionRun, Reason: v.Reason, Command: v.Command}, nil
	case vocab.DecisionApprovalPending:
		ap := toApproval(*v.Pending, g.now())
		return GuardVerdict{Decision: vocab.DecisionApprovalPending, Reason: v.Reason, Approval: &ap}, nil
	default:
		return GuardVerdict{Decision: vocab.DecisionDeny, Reason: "node guard: " + v.Reason}, nil
	}
}
