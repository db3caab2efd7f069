package api

import (
	"encoding/json"
	"time"
)

// The sandbox lifecycle API's bodies (docs/sandboxes.md) and its
// snapshots' (docs/snapshots.md).

// Sandbox is a sandbox as the lifecycle API answers it (POST, GET
// /v1/sandboxes and /v1/sandboxes/{id}; docs/sandboxes.md). The sandbox
// package's sandbox.Info embeds it.
type Sandbox struct {
	ID         string    `json:"id"`
	Name       string    `json:"name"`
	ScopeKey   string    `json:"scopeKey"`
	AgentID    string    `json:"agentId,omitempty"`
	SessionKey string    `json:"sessionKey,omitempty"`
	State      string    `json:"state"`
	Image      string    `json:"image"`
	CreatedAt  time.Time `json:"createdAt"`
	LastUsedAt time.Time `json:"lastUsedAt,omitzero"`
	ConfigHash string    `json:"configHash"`
	// Current is false when the container's config hash differs from the
	// config in force (it will be recreated).
	Current bool `json:"current"`
	// Engine names the Engine the sandbox lives on.
	Engine string `json:"engine"`
	// Path is how commands reach it: sandbox.PathSupervisor or
	// sandbox.PathPlain.
	Path string `json:"path"`
	// Pool is sandbox.PoolReady for a warm-pool sandbox no scope has taken
	// yet (no scope, agent or session), sandbox.PoolTaken for one taken
	// from it.
	Pool string `json:"pool,omitempty"`
	// Template is the template it was made from (the default template
	// unless created with another), Labels the labels given at its creation
	// and ExpiresAt when the daemon removes it (zero: never).
	Template  string            `json:"template"`
	Labels    map[string]string `json:"labels"`
	ExpiresAt time.Time         `json:"expiresAt,omitzero"`
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

// Snapshot is a snapshot as the API answers it (docs/snapshots.md). The
// sandbox package's sandbox.SnapshotInfo embeds it.
type Snapshot struct {
	Name       string    `json:"name"`
	ScopeKey   string    `json:"scopeKey"`
	AgentID    string    `json:"agentId,omitempty"`
	SessionKey string    `json:"sessionKey,omitempty"`
	CreatedAt  time.Time `json:"createdAt"`
	// Origin and OriginID name the container it was taken from.
	Origin   string `json:"origin"`
	OriginID string `json:"originId"`
	// Template, Labels and Config are what the sandbox ran under: a
	// rollback or fork is made from Template.
	Template string            `json:"template"`
	Labels   map[string]string `json:"labels,omitempty"`
	// Config is the container settings (sandbox.docker of its template)
	// it ran under, as the daemon records them: the record, never used to
	// make a container.
	Config json.RawMessage `json:"config"`
	// Bytes and Files count the regular files' content kept.
	Bytes int64 `json:"bytes"`
	Files int   `json:"files"`
	// Method is how the workspace was copied: "subvolume" (a btrfs snapshot), "reflink" or "copy" (tmpfs
	// contents are always copied).
	Method string `json:"method"`
	// Tmpfs are the tmpfs mounts whose contents it holds.
	Tmpfs []string `json:"tmpfs"`
	// Skipped counts entries that are neither files, directories nor
	// symlinks (sockets, fifos, devices): not kept.
	Skipped int `json:"skipped,omitempty"`
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
