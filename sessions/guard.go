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
	// Ticket is the guard's own handle on a pending approval, passed back to
	// ApprovalWaiter.AwaitApproval; nil when the guard cannot be awaited.
	Ticket any
	// Expired is set on a final verdict (ApprovalWaiter) when the approval
	// request expired undecided and askFallback decided.
	Expired bool
}
