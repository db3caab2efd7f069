package vocab

// EventType names an event on the daemon's event stream.
type EventType string

// Event types.
const (
	EventExit     EventType = "exit"     // a background session ended
	EventApproval EventType = "approval" // a command waits for a human's approval
	// EventApprovalDecided: a pending approval of a session was decided
	// (details: approvalId, approvalSlug, decision run|deny, reason).
	EventApprovalDecided EventType = "approval-decided"
	// EventApprovalExpired: a pending approval of a session expired
	// undecided and askFallback decided (details as approval-decided).
	EventApprovalExpired EventType = "approval-expired"
	// EventStep: a step a command waits for began or ended (details: step
	// "sandbox-create" or "image-build", phase "start" or "end", error).
	EventStep EventType = "step"
	// EventNodeRefused: a node was refused at its hello because the id or
	// name it claims is enrolled with another node's credential (details:
	// nodeId, name, remote, error).
	EventNodeRefused EventType = "node-refused"
	// EventSandbox: a sandbox was created, removed, paused, resumed or
	// extended through the lifecycle API, or removed as its TTL passed
	// (details: action created|removed|paused|resumed|extended|expired,
	// id, name, template, expiresAt).
	EventSandbox EventType = "sandbox"
	// EventPreview: a port of a sandbox was exposed through the daemon's
	// TCP listener, or no longer is (details: action opened|closed, id).
	EventPreview EventType = "preview"
)
