package apiclient

// SnapshotRequest is the body of POST /v1/sandboxes/{id}/snapshots
// (docs/snapshots.md); an empty Name is snap-<time>.
type SnapshotRequest struct {
	Name string `json:"name,omitempty"`
}

// RollbackRequest is the body of POST /v1/sandboxes/{id}/rollback.
type RollbackRequest struct {
	Snapshot string `json:"snapshot"`
}

// ForkRequest is the body of POST /v1/sandboxes/{id}/fork: the scope of
// the new sandbox, and the origin's snapshot it starts from ("": a
// snapshot of the live sandbox, taken for the fork and removed after). An
// agent token forks only into its own agent.
type ForkRequest struct {
	AgentID    string `json:"agentId,omitempty"`
	SessionKey string `json:"sessionKey,omitempty"`
	Snapshot   string `json:"snapshot,omitempty"`
}
