package sessions

import (
	"context"

	"github.com/sandboxctl/sandboxctl/nodeexec"
	"github.com/sandboxctl/sandboxctl/vocab"

	"github.com/sandboxctl/sandboxctl/sessions/hostapi"
)

// StartSpec describes one command for a Host to start.
type StartSpec = hostapi.StartSpec

// Host starts processes somewhere: a sandbox container, this machine, or a
// remote node. The hosts themselves live in their packages (sandbox,
// hostexec, nodeexec); their adapters live here, one file each:
// host_sandbox.go, host_gateway.go (and host_gateway_supervised.go),
// host_node.go. What a host can do beyond starting commands it declares in
// Caps.
type Host interface {
	// ResolveWorkdir maps the requested working directory ("" = default) to
	// a directory in the host's namespace. A requested directory that cannot
	// be used falls back to the default with a warning; err is only for
	// failures that make the host unusable (e.g. Docker unreachable).
	ResolveWorkdir(ctx context.Context, agentID, sessionKey, requested string) (dir, warning string, err error)
	// Start starts the command. The returned Process must be waited on.
	Start(ctx context.Context, spec StartSpec) (Started, error)
	// Caps declares what the host can do beyond starting commands.
	Caps() HostCaps
}

// HostCaps are what a Host can do beyond starting commands; the zero value
// is a host that can do none of it.
type HostCaps struct {
	// InputWait: the host's processes report input waits
	// (Started.InputWait). A foreground run there keeps stdin open: if the
	// command then blocks reading it, exec returns at once with the session
	// "waiting for input" instead of hanging until the timeout, and process
	// write (with eof) completes it. Elsewhere a foreground run gets EOF at
	// once.
	InputWait bool
	// Recover, when set, lists the sessions that outlive the daemon (the
	// supervised sandbox keeps output and exit status inside the container,
	// docs/tools.md, "process"). A restarted daemon calls Manager.Recover
	// once, which lists them here and adopts them as background sessions.
	Recover func(ctx context.Context) ([]RecoveredSession, error)
	// Later, when set (with Recover), delivers kept sessions that come back
	// later, one by one, rather than at Recover: a node's runs, when the
	// node reconnects to the restarted daemon; an Engine's, when it answers
	// again. Manager.Recover adopts each one until the Manager is closed
	// (ctx ends then).
	Later func(ctx context.Context) <-chan RecoveredSession
	// AwaitApproval, when set, waits until a human decided an approval
	// pending on the host itself (a node re-checks its own policy): the
	// Manager then keeps the request as a session and starts its command
	// once decided, as for the gateway's guard (PendingApproval).
	AwaitApproval func(ctx context.Context, pe *nodeexec.ApprovalPendingError) (GuardVerdict, error)
}

// capsOf is the capabilities of host (none for a host not configured).
func (m *Manager) capsOf(host vocab.Host) HostCaps {
	h := m.hosts[host]
	if h == nil {
		return HostCaps{}
	}
	return h.Caps()
}

// late says whether the host's kept sessions come back late.
func (c HostCaps) late() bool { return c.Recover != nil && c.Later != nil }

// Process is a started command.
type Process = hostapi.Process

// Started is a started command with what its host knows about it.
type Started = hostapi.Started

// InputWaiter reports input waits of a started command.
type InputWaiter = hostapi.InputWaiter
