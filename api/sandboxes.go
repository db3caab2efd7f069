package api

import (
	"encoding/json"
	"time"
)

// The sandbox lifecycle API's bodies (docs/sandboxes.md) and its
// snapshots' (docs/snapshots.md).

// Sandbox is a sandbox as the lifecycle API answers it (POST, GET
// /v1/sandboxes and /v1/sandboxes/{id}; docs/sandboxes.md).
type Sandbox struct {
	ID         string            `json:"id"`
	Name       string            `json:"name"`
	ScopeKey   string            `json:"scopeKey"`
	AgentID    string            `json:"agentId,omitempty"`
	SessionKey string            `json:"sessionKey,omitempty"`
	State      string            `json:"state"`
	Image      string            `json:"image"`
	CreatedAt  time.Time         `json:"createdAt"`
	LastUsedAt time.Time         `json:"lastUsedAt,omitzero"`
	ConfigHash string            `json:"configHash"`
	Current    bool              `json:"current"`
	Engine     string            `json:"engine"`
	Path       string            `json:"path"`
	Pool       string            `json:"pool,omitempty"`
	Template   string            `json:"template"`
	Labels     map[string]string `json:"labels"`
	ExpiresAt  time.Time         `json:"expiresAt,omitzero"`
}

// CreateSandboxRequest is the body of POST /v1/sandboxes. An agent token
// creates for its own agent whatever AgentID says.
type CreateSandboxRequest struct {
	Template   string            `json:"template,omitempty"`
	AgentID    string            `json:"agentId,omitempty"`
	SessionKey string            `json:"sessionKey,omitempty"`
	Labels     map[string]string `json:"labels,omitempty"`
	TTLSeconds int64             `json:"ttlSeconds,omitempty"` // 0: no TTL
}

// ExtendSandboxRequest is the body of POST /v1/sandboxes/{id}/timeout.
type ExtendSandboxRequest struct {
	TTLSeconds int64 `json:"ttlSeconds"`
}

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
	// Config is the container settings (sandbox.docker of its template)
	// it ran under, as the daemon records them.
	Config  json.RawMessage `json:"config"`
	Bytes   int64           `json:"bytes"`
	Files   int             `json:"files"`
	Method  string          `json:"method"`
	Tmpfs   []string        `json:"tmpfs"`
	Skipped int             `json:"skipped,omitempty"`
}

// SandboxDetail is the body of GET /v1/sandboxes/{id}: the sandbox, what
// `sandboxctl sandbox explain` shows for it (its config, limits and the
// hardening read back from the Engine) and its resource use now.
type SandboxDetail struct {
	Sandbox
	Explain json.RawMessage `json:"explain"`
	Usage   *SandboxUsage   `json:"usage,omitempty"`
	// UsageError says why there is no Usage (e.g. the container is stopped).
	UsageError string `json:"usageError,omitempty"`
}

// SandboxUsage is one sample of a sandbox's resource use.
type SandboxUsage struct {
	CPUPercent       float64 `json:"cpuPercent"`
	MemoryBytes      uint64  `json:"memoryBytes"`
	MemoryLimitBytes uint64  `json:"memoryLimitBytes"`
	Pids             uint64  `json:"pids"`
	PidsLimit        uint64  `json:"pidsLimit,omitempty"`
}

// SandboxRemoved is the body of DELETE /v1/sandboxes/{id}.
type SandboxRemoved struct {
	Name             string `json:"name"`
	Removed          string `json:"removed"` // the sandbox's id
	WorkspaceRemoved bool   `json:"workspaceRemoved"`
}
