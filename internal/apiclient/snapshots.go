package apiclient

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

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

// Snapshot is a snapshot as the API answers it (docs/snapshots.md).
type Snapshot struct {
	Name       string            `json:"name"`
	ScopeKey   string            `json:"scopeKey"`
	AgentID    string            `json:"agentId,omitempty"`
	SessionKey string            `json:"sessionKey,omitempty"`
	CreatedAt  time.Time         `json:"createdAt"`
	Origin     string            `json:"origin"`
	OriginID   string            `json:"originId"`
	Template   string            `json:"template"`
	Labels     map[string]string `json:"labels,omitempty"`
	Bytes      int64             `json:"bytes"`
	Files      int               `json:"files"`
	Method     string            `json:"method"`
	Tmpfs      []string          `json:"tmpfs"`
	Skipped    int               `json:"skipped,omitempty"`
}

// SnapshotSandbox takes a snapshot of the sandbox id.
func (c *Client) SnapshotSandbox(ctx context.Context, id, name string) (Snapshot, error) {
	var s Snapshot
	path := sandboxPath(id, "/snapshots")
	raw, err := c.do(ctx, "POST", path, SnapshotRequest{Name: name})
	if err != nil {
		return s, err
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		return s, fmt.Errorf("daemon: POST %s: decode answer: %w", path, err)
	}
	return s, nil
}

// RollbackSandbox puts the sandbox id back to its snapshot.
func (c *Client) RollbackSandbox(ctx context.Context, id, snapshot string) (Sandbox, error) {
	return c.sandbox(ctx, "POST", sandboxPath(id, "/rollback"), RollbackRequest{Snapshot: snapshot})
}

// ForkSandbox makes a sandbox for another scope from the sandbox id.
func (c *Client) ForkSandbox(ctx context.Context, id string, req ForkRequest) (Sandbox, error) {
	return c.sandbox(ctx, "POST", sandboxPath(id, "/fork"), req)
}
