package guard

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/sandboxctl/sandboxctl/vocab"
)

// Gate is one host's whole guard: its configuration, its approvals.json
// store, and the flow of SECURITY.md's "The guard" over them (modes, analysis, allowlist and
// safe bins, approval requests bound to the exact command, expiry to
// askFallback). The gateway and every node each have their own Gate; a node
// never takes the gateway's word for anything.
type Gate struct {
	Store  *Store
	Config GateConfig
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// GateConfig is the configured guard of a host. Empty modes fall back to the
// defaults of approvals.json, then to allowlist / on-miss / deny.
type GateConfig struct {
	Security    vocab.Security
	Ask         vocab.Ask
	AskFallback vocab.Security
	// SafeBins; nil means DefaultSafeBins.
	SafeBins []string
	// Workspace turns on the external-directory check (gateway).
	Workspace string
	// EnvCheck vets variables assigned through env/sudo wrappers.
	EnvCheck func(map[string]string) error
	// UntrustedDirs are the directories a sandbox can write (workspace
	// root, sandbox-owned workspaces, rw bind sources): executables there
	// never satisfy the allowlist or a safe bin.
	UntrustedDirs []string
}

// GateRequest is one command to judge, as it will run.
type GateRequest struct {
	// Line is the shell line the host runs (`SHELL -c Line`).
	Line string
	// Runner is how the host runs a command line: the argv before it, e.g.
	// [/bin/bash -c]. When set, approvals record and bind to Runner plus
	// the command that will actually run (the rebuilt line, once analysis
	// pinned its executables) — exactly the argv the host executes.
	Runner []string
	// Argv is the exact argv that will be executed when Runner is not set
	// (a node binds to what the gateway sent); approvals bind to it.
	Argv []string
	Cwd  string
	Env  map[string]string
	// Path is the host's PATH, on which executables are resolved.
	Path                string
	AgentID, SessionKey string
	Host                vocab.Host
	NodeID              string
	// Security and Ask are the caller's requested modes; the effective modes
	// are min(config, request) and max(config, request).
	Security vocab.Security
	Ask      vocab.Ask
	// PTY: the command runs with a terminal (pagers and editors then take
	// typed shell escapes; see Gadget).
	PTY bool
	// Contained marks a command that runs inside a sandbox: the container is
	// the boundary, so deny still refuses but no allowlist applies, only
	// ask=always brings a human in, and the line runs as written.
	Contained bool
}

// GateVerdict is the Gate's answer. For vocab.DecisionApprovalPending, Pending is the
// stored request and Await waits for its decision.
type GateVerdict struct {
	Decision vocab.Decision
	Reason   string
	// Command is what to run when Decision is Run.
	Command string
	// Confine is the workspace the command must run confined to
	// (Verdict.Confine); "" in a sandbox, where the container is the
	// boundary. It holds whichever way the run is decided (a human's
	// approval or askFallback keeps it: they decided on the same paths).
	Confine string
	Pending *Pending
	// Expired is set when the approval request expired undecided and
	// askFallback made the decision.
	Expired bool

	binding  Binding
	analysis Analysis
	policy   Policy
}

func (g *Gate) now() time.Time {
	if g.Now != nil {
		return g.Now()
	}
	return time.Now()
}

// Modes returns the configured modes after the approvals.json defaults.
func (g *Gate) Modes(ctx context.Context) (sec vocab.Security, ask vocab.Ask, fallback vocab.Security, err error) {
	d, err := g.Store.Defaults(ctx)
	if err != nil {
		return "", "", "", fmt.Errorf("guard: read approvals defaults: %w", err)
	}
	sec = vocab.Security(firstNonEmpty(string(g.Config.Security), string(d.Security), string(vocab.SecurityAllowlist)))
	ask = vocab.Ask(firstNonEmpty(string(g.Config.Ask), string(d.Ask), string(vocab.AskOnMiss)))
	fallback = vocab.Security(firstNonEmpty(string(g.Config.AskFallback), string(d.AskFallback), string(vocab.SecurityDeny)))
	return sec, ask, fallback, nil
}

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

// Check judges req. A decided approval for exactly this command (same line,
// argv, cwd, agent, session key and env) is used once; otherwise a new approval request is
// stored when the policy needs one.
func (g *Gate) Check(ctx context.Context, req GateRequest) (GateVerdict, error) {
	sec, ask, fb, err := g.Modes(ctx)
	if err != nil {
		return GateVerdict{}, err
	}
	if req.Security != "" {
		sec = vocab.MinSecurity(sec, req.Security)
	}
	if req.Ask != "" {
		ask = vocab.MaxAsk(ask, req.Ask)
	}
	if sec == vocab.SecurityDeny {
		return GateVerdict{Decision: vocab.DecisionDeny, Reason: "security is deny: every command is refused"}, nil
	}
	if req.Contained {
		sec = vocab.SecurityFull
	}
	a := Analyze(req.Line, AnalyzeEnv{Path: req.Path, Cwd: req.Cwd, EnvCheck: g.Config.EnvCheck})
	allow, err := g.Store.Allowlist(ctx, req.AgentID)
	if err != nil {
		return GateVerdict{}, err
	}
	pol := Policy{Security: sec, Ask: ask, AskFallback: fb, SafeBins: g.Config.SafeBins, Allowlist: allow, Workspace: g.Config.Workspace,
		UntrustedDirs: g.Config.UntrustedDirs, PTY: req.PTY}
	v := pol.Evaluate(a)
	out := GateVerdict{Decision: v.Decision, Reason: v.Reason, Command: v.Command, Confine: v.Confine, analysis: a, policy: pol}
	if req.Contained {
		out.Confine = ""
	}
	if sec == vocab.SecurityFull {
		// Nothing was checked against an allowlist: run the line as written
		// (the rebuilt form can differ, e.g. a builtin pinned to a binary).
		out.Command = req.Line
	}
	argv := req.Argv
	if len(req.Runner) > 0 {
		// What runs once approved: settle keeps out.Command, or falls
		// back to the analysed command.
		runs := out.Command
		if runs == "" {
			runs = a.Command
		}
		argv = append(slices.Clone(req.Runner), runs)
	}
	out.binding = Binding{Command: req.Line, Argv: argv, Cwd: req.Cwd, AgentID: req.AgentID, SessionKey: req.SessionKey, EnvHash: bindingHash(req.Env, req.PTY)}
	switch v.Decision {
	case vocab.DecisionRun:
		if err := g.Store.RecordUse(ctx, req.AgentID, v.Hits, req.Line); err != nil {
			return GateVerdict{}, err
		}
		return out, nil
	case vocab.DecisionDeny:
		return out, nil
	case vocab.DecisionApprovalPending:
	default:
		return GateVerdict{Decision: vocab.DecisionDeny, Reason: fmt.Sprintf("unknown decision %q", v.Decision)}, nil
	}

	// A human may already have decided this exact command.
	list, err := g.Store.List(ctx)
	if err != nil {
		return GateVerdict{}, err
	}
	now := g.now()
	b := out.binding
	for _, p := range list {
		if p.Consumed || checkBinding(&p, b) != nil {
			continue
		}
		if p.Status(now) == "pending" {
			out.Pending = &p
			out.Reason = "approval required: " + v.Reason
			return out, nil
		}
		r, err := g.Store.Consume(ctx, p.ID, b)
		if errors.Is(err, ErrAlreadyConsumed) || errors.Is(err, ErrBindingMismatch) {
			continue
		}
		if err != nil {
			return GateVerdict{}, err
		}
		return g.settle(out, r), nil
	}
	p, err := g.Store.Request(ctx, PendingRequest{
		Command: req.Line, Argv: b.Argv, Cwd: req.Cwd, Host: req.Host, NodeID: req.NodeID,
		Security: sec, Ask: ask, AgentID: req.AgentID, SessionKey: req.SessionKey,
		EnvHash: b.EnvHash, Env: req.Env, ResolvedPaths: PersistablePaths(a), Explain: a.Explain() + ptyNote(req.PTY) + confineNote(out.Confine),
	})
	if err != nil {
		return GateVerdict{}, err
	}
	out.Pending = &p
	out.Reason = "approval required: " + v.Reason
	return out, nil
}

// bindingHash is the env hash an approval binds to. A run with a terminal
// hashes one more entry whose key no environment can carry ("=pty"), so a
// decision about a piped run never admits the same command with a PTY (where
// pagers and editors take typed shell escapes), nor the other way round.
func bindingHash(env map[string]string, pty bool) string {
	if !pty {
		return EnvHash(env)
	}
	m := maps.Clone(env)
	if m == nil {
		m = map[string]string{}
	}
	m["=pty"] = "1"
	return EnvHash(m)
}

func ptyNote(pty bool) string {
	if !pty {
		return ""
	}
	return "terminal: PTY (keys the agent sends reach the program interactively)\n"
}

func confineNote(dir string) string {
	if dir == "" {
		return ""
	}
	return "confined: runs under Landlock, reading and writing only in " + dir + " (plus the system directories, read-only)\n"
}

// Await blocks until the approval of an ApprovalPending verdict is decided or
// expires (or ctx ends), uses it once, and returns the final Run or Deny
// verdict: allow-once/allow-always run the command as approved, deny
// refuses, expiry applies askFallback.
func (g *Gate) Await(ctx context.Context, v GateVerdict) (GateVerdict, error) {
	if v.Decision != vocab.DecisionApprovalPending || v.Pending == nil {
		return v, nil
	}
	if _, err := g.Store.Wait(ctx, v.Pending.ID, v.binding, 200*time.Millisecond); err != nil {
		return GateVerdict{}, err
	}
	r, err := g.Store.Consume(ctx, v.Pending.ID, v.binding)
	if err != nil {
		return GateVerdict{}, err
	}
	return g.settle(v, r), nil
}

// settle turns a used approval into the final verdict.
func (g *Gate) settle(v GateVerdict, r CheckResult) GateVerdict {
	v.Pending = &r.Request
	switch r.Outcome {
	case OutcomeAllow:
		v.Decision = vocab.DecisionRun
		v.Reason = fmt.Sprintf("approved (%s, %s)", r.Request.Slug, r.Decision)
		if v.Command == "" {
			v.Command = v.analysis.Command
		}
	case OutcomeDeny:
		v.Decision, v.Reason = vocab.DecisionDeny, fmt.Sprintf("approval %s was denied", r.Request.Slug)
	default: // expired: askFallback
		v.Expired = true
		fv := v.policy.Fallback(v.analysis)
		v.Decision, v.Reason = fv.Decision, fv.Reason
		if fv.Decision == vocab.DecisionRun {
			v.Command = fv.Command
		} else {
			v.Decision = vocab.DecisionDeny
		}
	}
	return v
}
