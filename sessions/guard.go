package sessions

import (
	"context"

	"github.com/sandboxctl/sandboxctl/api"

	"github.com/sandboxctl/sandboxctl/vocab"
)

// Guard decides whether a command may run on the gateway or node host (SECURITY.md,
// "The guard"): security mode, allowlist, safe bins, approvals. The Manager calls it
// for gateway and node runs, and for sandbox runs only when ask is "always"
// (on the sandbox the container is the boundary). It is the seam for the
// hostexec/guard package; an adapter there satisfies it.
type Guard interface {
	Check(ctx context.Context, req GuardRequest) (GuardVerdict, error)
	// Caps declares what the guard can do beyond Check.
	Caps() GuardCaps
}

// GuardRequest is one command to judge, with the effective (already
// combined) security and ask modes.
type GuardRequest struct {
	Command, Cwd        string
	Host                vocab.Host
	Env                 map[string]string
	Security            vocab.Security
	Ask                 vocab.Ask
	AgentID, SessionKey string
	// Node is the requested node id or name for host "node".
	Node string
	// PTY: the command runs with a terminal (pagers and editors then take
	// typed shell escapes).
	PTY bool
}

// GuardVerdict is the guard's answer.
type GuardVerdict struct {
	Decision vocab.Decision
	Reason   string // why (deny), shown to the agent
	// Command is the command to actually run when it differs from the
	// request (e.g. safe-bin argv single-quoted); "" = run the request's.
	Command string
	// Confine, when set, is the gateway workspace the command must run
	// confined to (StartSpec.Confine): the decision relied on the guard's
	// external-directory check finding every path inside it.
	Confine string
	// Approval holds the approval-pending details: approvalId, approvalSlug,
	// expiresAtMs, host, command, cwd, nodeId.
	Approval api.Details
	// Pending is the guard's handle on a pending approval that can be
	// awaited; nil when it cannot (the exec then answers approval-pending
	// and ends).
	Pending *PendingApproval
	// Expired is set on a final verdict (PendingApproval.Await) when the
	// approval request expired undecided and askFallback decided.
	Expired bool
}

// PendingApproval is an approval request a human decides, as the guard (or
// the node) that made it hands it over. The Manager then keeps the request
// as a session at once (status running, output empty) and starts the
// command itself when a human decided: allow → it runs as that session;
// deny or an expiry that askFallback refuses → the session fails with the
// reason (SECURITY.md, "The guard").
type PendingApproval struct {
	// Await blocks until a human decided (or the request expired into
	// askFallback) and returns the final verdict.
	Await func(ctx context.Context) (GuardVerdict, error)
	// Attach, when set, records that session sessionID waits on the
	// request: requests that outlive the daemon (the gateway's
	// approvals.json) are cancelled by a restarted daemon when unused, and
	// each waiting session comes back failed with the reason
	// (GuardCaps.CancelUnused).
	Attach func(ctx context.Context, sessionID string) error
}

// GuardCaps are what a Guard can do beyond Check; the zero value is a guard
// that can do none of it.
type GuardCaps struct {
	// CancelUnused, when set, cancels every approval request of the
	// previous daemon not used yet (they outlive it): the exec that waited
	// on one died with that daemon, so an allow-once given now would run
	// nothing, and must not wait to be used by a later identical request
	// (issue 32 item 2). It returns them with the sessions that waited.
	CancelUnused func(ctx context.Context, reason string) ([]CancelledApproval, error)
}
