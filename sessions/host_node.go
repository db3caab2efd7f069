package sessions

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sandboxctl/sandboxctl/nodeexec"
	"github.com/sandboxctl/sandboxctl/vocab"
)

// *nodeexec.RemoteProcess is a Process.
var _ Process = (*nodeexec.RemoteProcess)(nil)

// nodeHost adapts a nodeexec.Registry (the gateway side of node hosts) to
// Host.
type nodeHost struct {
	reg         *nodeexec.Registry
	defaultNode string
}

// NewNodeHost returns the node Host: commands run on the node named by
// StartSpec.Node (ExecParams.Node), or defaultNode (exec.node) when the
// request names none. The node re-checks every request with its own guard;
// a refusal comes back from Start as an error that nodeRefusal turns into a
// denied or approval-pending result.
func NewNodeHost(reg *nodeexec.Registry, defaultNode string) Host {
	return &nodeHost{reg: reg, defaultNode: defaultNode}
}

// ResolveWorkdir passes a requested directory through: only the node can
// resolve it (it falls back to its own default directory, with a start
// warning, when the directory does not exist there). With none requested it
// is the default node's reported working directory. A node that is not
// connected is not an error here; Start reports it.
func (h *nodeHost) ResolveWorkdir(_ context.Context, _, _, requested string) (string, string, error) {
	if requested != "" {
		return requested, "", nil
	}
	wd, err := h.reg.Workdir(h.defaultNode)
	if err != nil {
		return "", "", nil
	}
	return wd, "", nil
}

// Start runs spec on the node (spec.Node, else the default node).
func (h *nodeHost) Start(ctx context.Context, spec StartSpec) (Started, error) {
	node := spec.Node
	if node == "" {
		node = h.defaultNode
	}
	p, err := h.reg.Start(ctx, node, spec)
	if err != nil {
		return Started{}, fmt.Errorf("node: %w", err)
	}
	return Started{Process: p, Warnings: p.Warnings(), Place: fmt.Sprintf("node %q", p.Node()), Doubt: p.Doubt}, nil
}

// Caps implements Host: a node's runs come back when it reconnects, and a
// node asks its own human for approvals.
func (h *nodeHost) Caps() HostCaps {
	return HostCaps{Recover: h.recover, Later: h.later, AwaitApproval: h.awaitApproval}
}

// recover is HostCaps.Recover: nothing comes back at the daemon's start
// (no node is connected yet); see later.
func (h *nodeHost) recover(context.Context) ([]RecoveredSession, error) { return nil, nil }

// later is HostCaps.Later: the runs that an earlier incarnation of
// this daemon started on a node, as the node reconnects, with the output the
// node kept; each one keeps its session id.
func (h *nodeHost) later(ctx context.Context) <-chan RecoveredSession {
	in := h.reg.Adoptions()
	out := make(chan RecoveredSession)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case a := <-in:
				st := a.State
				rs := RecoveredSession{
					ID: st.SessionID, Command: st.Command, Dir: st.Dir, AgentID: st.AgentID, SessionKey: st.SessionKey,
					PTY: st.PTY, StdinOpen: st.KeepStdin && st.Running, PID: st.PID, StartedAt: time.UnixMilli(st.StartedAtMs),
					Output: a.Output, Covered: a.Covered, Started: Started{Process: a.Process, Doubt: a.Process.Doubt},
				}
				select {
				case out <- rs:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return out
}

// nodeApprovalPoll is how often a node is asked whether a human decided.
const nodeApprovalPoll = 250 * time.Millisecond

// awaitApproval is HostCaps.AwaitApproval for an approval pending on a
// node: it waits until a human decided there. Allowed, or expired, the
// command is asked for again and the node decides under its own record (an
// expiry applies the node's askFallback); denied, it is denied.
func (h *nodeHost) awaitApproval(ctx context.Context, pe *nodeexec.ApprovalPendingError) (GuardVerdict, error) {
	node := pe.Approval.NodeID
	if node == "" {
		node = pe.Node
	}
	status, err := h.reg.AwaitApproval(ctx, node, pe.Approval.ID, nodeApprovalPoll)
	if err != nil {
		return GuardVerdict{}, err
	}
	if strings.HasPrefix(status, "deny") {
		return GuardVerdict{Decision: vocab.DecisionDeny, Reason: fmt.Sprintf("a human denied it on node %s", pe.Node)}, nil
	}
	return GuardVerdict{Decision: vocab.DecisionRun}, nil
}

// nodeRefusal classifies a node host Start error: a node's refusal gives its
// reason (→ a denied result), a pending approval on the node gives the
// node's ApprovalPendingError (→ a session that starts once a human decided,
// see AwaitApproval). ok is false for any other error (node unknown or
// offline, link failures), which stays an error.
func nodeRefusal(err error) (reason string, approval *nodeexec.ApprovalPendingError, ok bool) {
	var pe *nodeexec.ApprovalPendingError
	if errors.As(err, &pe) {
		return "", pe, true
	}
	var de *nodeexec.DeniedError
	if errors.As(err, &de) {
		return fmt.Sprintf("node %s: %s", de.Node, de.Reason), nil, true
	}
	return "", nil, false
}
