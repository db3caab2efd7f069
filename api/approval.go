package api

// Approval is one approval request as GET /v1/approvals lists it: the
// gateway's own (where "gateway") and those pending on nodes. It shows
// everything that decides what runs: the command, the exact argv (its
// first word is the shell), the cwd, the host, the env the request adds
// (names and values) and who asked.
type Approval struct {
	ID          string            `json:"id"`
	Slug        string            `json:"slug"`
	Where       string            `json:"where"` // "gateway" or the node's name
	Host        string            `json:"host"`
	Command     string            `json:"command"`
	Argv        []string          `json:"argv,omitempty"`
	Shell       string            `json:"shell,omitempty"` // argv[0]
	Env         map[string]string `json:"env,omitempty"`
	Cwd         string            `json:"cwd"`
	AgentID     string            `json:"agentId,omitempty"`
	SessionKey  string            `json:"sessionKey,omitempty"`
	Explain     string            `json:"explain,omitempty"`
	CreatedAtMs int64             `json:"createdAtMs,omitempty"`
	ExpiresAtMs int64             `json:"expiresAtMs"`
	Status      string            `json:"status"`
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
