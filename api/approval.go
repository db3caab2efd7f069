package api

// ApprovalRequest is one approval request as a human is shown it: what it
// asks to run (the command, the exact argv, the cwd, the env the request
// adds, names and values), who asked, when it expires and its status. It
// is the one definition of an approval request: the approvals API
// (Approval) and the node protocol (nodeexec.Approval) embed it, each with
// the members only it carries. The audit log's approval records
// (audit.Approval) name a request by its ID and Slug.
type ApprovalRequest struct {
	ID          string            `json:"id"`
	Slug        string            `json:"slug"`
	Command     string            `json:"command"`
	Argv        []string          `json:"argv,omitempty"`
	Env         map[string]string `json:"env,omitempty"`
	Cwd         string            `json:"cwd"`
	AgentID     string            `json:"agentId,omitempty"`
	SessionKey  string            `json:"sessionKey,omitempty"`
	Explain     string            `json:"explain,omitempty"`
	CreatedAtMs int64             `json:"createdAtMs,omitempty"`
	ExpiresAtMs int64             `json:"expiresAtMs"`
	// Status is "pending", "expired", a decision, "<decision> (used)" or
	// "cancelled".
	Status string `json:"status"`
}

// Approval is one approval request as GET /v1/approvals lists it: the
// gateway's own (where "gateway") and those pending on nodes. It shows
// everything that decides what runs: the request, its exact argv (whose
// first word, Shell, is the shell), the host and where it waits.
type Approval struct {
	ApprovalRequest
	Where string `json:"where"` // "gateway" or the node's name
	Host  string `json:"host"`
	Shell string `json:"shell,omitempty"` // argv[0]
}

// NewApproval is r as the approvals API lists it, waiting at where on
// host.
func NewApproval(r ApprovalRequest, where, host string) Approval {
	a := Approval{ApprovalRequest: r, Where: where, Host: host}
	if len(r.Argv) > 0 {
		a.Shell = r.Argv[0]
	}
	return a
}

// ApprovalHookInput is what the approval hook (approvals.approvalHook,
// docs/configuration.md) reads on its stdin: the request to decide.
type ApprovalHookInput struct {
	ApprovalID string  `json:"approvalId"`
	AgentID    string  `json:"agentId"`
	SessionKey string  `json:"sessionKey"`
	Details    Details `json:"details"`
}

// ResolveRequest is the body of POST /v1/approvals/{id}.
type ResolveRequest struct {
	Decision string `json:"decision"`
}

// ApprovalDecided is the body of a decision's answer (POST
// /v1/approvals/{id}, 200).
type ApprovalDecided struct {
	Decision string `json:"decision"`
	ID       string `json:"id"`
}
