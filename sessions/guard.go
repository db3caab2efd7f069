package sessions

import (
	"context"

	"github.com/sandboxctl/sandboxctl/sessions/toolapi"
)

// Guard decides whether a command may run on the gateway or node host (SPEC
// §5): security mode, allowlist, safe bins, approvals. The Manager calls it
// for gateway and node runs, and for sandbox runs only when ask is "always"
// (on the sandbox the container is the boundary). It is the seam for the
// hostexec/guard package; an adapter there satisfies it.
type Guard interface {
	Check(ctx context.Context, req GuardRequest) (GuardVerdict, error)
}

// GuardRequest is one command to judge, with the effective (already
// combined) security and ask modes.
type GuardRequest struct {
	Command, Cwd, Host  string
	Env                 map[string]string
	Security, Ask       string
	AgentID, SessionKey string
	// Node is the requested node id or name for host "node".
	Node string
	// PTY: the command runs with a terminal (pagers and editors then take
	// typed shell escapes).
	PTY bool
}

// Guard decisions.
const (
	DecisionRun             = "run"
	DecisionDeny            = "deny"
	DecisionApprovalPending = "approval-pending"
)

// GuardVerdict is the guard's answer.
type GuardVerdict struct {
	Decision string // DecisionRun, DecisionDeny or DecisionApprovalPending
	Reason   string // why (deny), shown to the agent
	// Command is the command to actually run when it differs from the
	// request (e.g. safe-bin argv single-quoted); "" = run the request's.
	Command string
	// Approval holds the approval-pending details: approvalId, approvalSlug,
	// expiresAtMs, host, command, cwd, nodeId.
	Approval map[string]any
	// Ticket is the guard's own handle on a pending approval, passed back to
	// ApprovalWaiter.AwaitApproval; nil when the guard cannot be awaited.
	Ticket any
}

// Security and ask levels, ordered so that effective security is the minimum
// and effective ask the maximum of config and request.
var (
	securityLevels = toolapi.SecurityLevels
	askLevels      = toolapi.AskLevels
)

func level(levels []string, v string) int {
	for i, l := range levels {
		if l == v {
			return i
		}
	}
	return -1
}
