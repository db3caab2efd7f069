package nodeexec

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/sandboxctl/sandboxctl/hostexec/guard"
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
	Resolve(ctx context.Context, id, decision string) error
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
	Security, Ask string
	NodeID        string
}

// Guard decisions.
const (
	VerdictRun     = "run"
	VerdictDeny    = "deny"
	VerdictPending = "approval-pending"
)

// GuardVerdict is the node's decision.
type GuardVerdict struct {
	Decision string // VerdictRun, VerdictDeny, VerdictPending
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
	Security string `json:"security" yaml:"security"`
	// Ask off | on-miss | always. "" = approvals.json defaults, else on-miss.
	Ask string `json:"ask" yaml:"ask"`
	// AskFallback deny | allowlist | full: what an expired approval does.
	// "" = approvals.json defaults, else deny.
	AskFallback string `json:"askFallback" yaml:"askFallback"`
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
	for kind, v := range map[string]string{"security": cfg.Security, "askFallback": cfg.AskFallback} {
		if v != "" {
			if _, err := guard.ParseSecurity(v); err != nil {
				return nil, fmt.Errorf("nodeexec: node guard %s: %w", kind, err)
			}
		}
	}
	if cfg.Ask != "" {
		if _, err := guard.ParseAsk(cfg.Ask); err != nil {
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

// modes returns the node's configured modes (config, then approvals.json
// defaults, then allowlist / on-miss / deny).
func (g *PolicyGuard) modes(ctx context.Context) (guard.Security, guard.Ask, guard.Security, error) {
	d, err := g.store.Defaults(ctx)
	if err != nil {
		return "", "", "", fmt.Errorf("read approvals defaults: %w", err)
	}
	sec := guard.Security(first(g.cfg.Security, string(d.Security), "allowlist"))
	ask := guard.Ask(first(g.cfg.Ask, string(d.Ask), "on-miss"))
	fb := guard.Security(first(g.cfg.AskFallback, string(d.AskFallback), "deny"))
	return sec, ask, fb, nil
}

func first(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

// Summary implements Guard.
func (g *PolicyGuard) Summary(ctx context.Context) ApprovalSummary {
	sec, ask, fb, err := g.modes(ctx)
	s := ApprovalSummary{Security: string(sec), Ask: string(ask), AskFallback: string(fb)}
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
	return Approval{
		ID: p.ID, Slug: p.Slug, NodeID: p.NodeID, Command: p.Command, Argv: p.Argv, Cwd: p.Cwd,
		AgentID: p.AgentID, SessionKey: p.SessionKey, Security: string(p.Security), Ask: string(p.Ask),
		Explain: p.Explain, CreatedAtMs: p.CreatedAtMs, ExpiresAtMs: p.ExpiresAtMs, Status: p.Status(now),
	}
}

// Resolve implements Guard.
func (g *PolicyGuard) Resolve(ctx context.Context, id, decision string) error {
	d, err := guard.ParseDecision(decision)
	if err != nil {
		return err
	}
	if err := g.store.Resolve(ctx, id, d); err != nil {
		if errors.Is(err, guard.ErrUnknownApproval) {
			return fmt.Errorf("%w: %w", ErrApprovalUnknown, err)
		}
		return err
	}
	return nil
}

// Check implements Guard: security min(node, gateway), ask max(node,
// gateway); analysis on the node's PATH; the node's allowlist; approvals
// from the node's approvals.json, bound to the exact line, argv, cwd, agent
// and env. Nothing the gateway says about approval is consulted.
func (g *PolicyGuard) Check(ctx context.Context, req GuardRequest) (GuardVerdict, error) {
	sec, ask, fb, err := g.modes(ctx)
	if err != nil {
		return GuardVerdict{}, err
	}
	if req.Security != "" {
		sec = guard.MinSecurity(sec, guard.Security(req.Security))
	}
	if req.Ask != "" {
		ask = guard.MaxAsk(ask, guard.Ask(req.Ask))
	}
	if sec == guard.SecurityDeny {
		return GuardVerdict{Decision: VerdictDeny, Reason: "security on this node is deny: every command is refused"}, nil
	}
	a := guard.Analyze(req.Line, guard.AnalyzeEnv{Path: req.Path, Cwd: req.Cwd})
	allow, err := g.store.Allowlist(ctx, req.AgentID)
	if err != nil {
		return GuardVerdict{}, err
	}
	pol := guard.Policy{Security: sec, Ask: ask, AskFallback: fb, SafeBins: g.cfg.SafeBins, Allowlist: allow}
	v := pol.Evaluate(a)
	switch v.Decision {
	case guard.DecisionRun:
		if err := g.store.RecordUse(ctx, req.AgentID, v.Hits, req.Line); err != nil {
			return GuardVerdict{}, err
		}
		return GuardVerdict{Decision: VerdictRun, Reason: v.Reason, Command: v.Command}, nil
	case guard.DecisionDeny:
		return GuardVerdict{Decision: VerdictDeny, Reason: "node guard: " + v.Reason}, nil
	case guard.DecisionNeedsApproval:
	default:
		return GuardVerdict{Decision: VerdictDeny, Reason: fmt.Sprintf("node guard: unknown decision %q", v.Decision)}, nil
	}

	b := guard.Binding{Command: req.Line, Argv: req.Argv, Cwd: req.Cwd, AgentID: req.AgentID, EnvHash: guard.EnvHash(req.Env)}
	list, err := g.store.List(ctx)
	if err != nil {
		return GuardVerdict{}, err
	}
	now := g.now()
	for _, p := range list {
		if p.Consumed || p.Command != b.Command || !slices.Equal(p.Argv, b.Argv) || p.Cwd != b.Cwd ||
			p.AgentID != b.AgentID || p.EnvHash != b.EnvHash {
			continue
		}
		if p.Status(now) == "pending" {
			ap := toApproval(p, now)
			return GuardVerdict{Decision: VerdictPending, Reason: "approval required: " + v.Reason, Approval: &ap}, nil
		}
		r, err := g.store.Consume(ctx, p.ID, b)
		if err != nil {
			if errors.Is(err, guard.ErrAlreadyConsumed) || errors.Is(err, guard.ErrBindingMismatch) {
				continue
			}
			return GuardVerdict{}, err
		}
		switch r.Outcome {
		case guard.OutcomeAllow:
			return GuardVerdict{Decision: VerdictRun, Reason: fmt.Sprintf("approved on the node (%s, %s)", p.Slug, r.Decision), Command: v.Command}, nil
		case guard.OutcomeDeny:
			return GuardVerdict{Decision: VerdictDeny, Reason: fmt.Sprintf("approval %s was denied on the node", p.Slug)}, nil
		case guard.OutcomeFallback:
			fv := pol.Fallback(a)
			if fv.Decision == guard.DecisionRun {
				return GuardVerdict{Decision: VerdictRun, Reason: fv.Reason, Command: fv.Command}, nil
			}
			return GuardVerdict{Decision: VerdictDeny, Reason: "node guard: " + fv.Reason}, nil
		}
	}
	p, err := g.store.Request(ctx, guard.PendingRequest{
		Command: req.Line, Argv: req.Argv, Cwd: req.Cwd, Host: "node", NodeID: req.NodeID,
		Security: sec, Ask: ask, AgentID: req.AgentID, SessionKey: req.SessionKey,
		EnvHash: b.EnvHash, ResolvedPaths: guard.PersistablePaths(a), Explain: a.Explain(),
	})
	if err != nil {
		return GuardVerdict{}, err
	}
	ap := toApproval(p, now)
	return GuardVerdict{Decision: VerdictPending, Reason: "approval required: " + v.Reason, Approval: &ap}, nil
}
