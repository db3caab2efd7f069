package apiclient

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/sandboxctl/sandboxctl/api"
)

// SnapshotSandbox takes a snapshot of the sandbox id.
func (c *Client) SnapshotSandbox(ctx context.Context, id, name string) (api.Snapshot, error) {
	var s api.Snapshot
	path := sandboxPath(id, "/snapshots")
	raw, err := c.do(ctx, "POST", path, api.SnapshotRequest{Name: name})
	if err != nil {
		return s, err
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		return s, fmt.Errorf("daemon: POST %s: decode answer: %w", path, err)
	}
	return s, nil
}

// RollbackSandbox puts the sandbox id back to its snapshot.
func (c *Client) RollbackSandbox(ctx context.Context, id, snapshot string) (api.Sandbox, error) {
	return c.sandbox(ctx, "POST", sandboxPath(id, "/rollback"), api.RollbackRequest{Snapshot: snapshot})
}

// ForkSandbox makes a sandbox for another scope from the sandbox id.
func (c *Client) ForkSandbox(ctx context.Context, id string, req api.ForkRequest) (api.Sandbox, error) {
	return c.sandbox(ctx, "POST", sandboxPath(id, "/fork"), req)
}
