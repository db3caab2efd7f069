package runtimecli

import (
	"context"
	"net/http"

	"github.com/sandboxctl/sandboxctl/api"
	"github.com/sandboxctl/sandboxctl/internal/daemon"
	"github.com/sandboxctl/sandboxctl/internal/mcpserver"
	"github.com/sandboxctl/sandboxctl/sandbox"
)

// Snapshots, rollback and fork of a sandbox (docs/snapshots.md), with the
// lifecycle's scoping: an agent token reaches only its own agent's
// sandboxes and forks only into its own agent.

func (a *sandboxAPI) snapshotRoutes() map[string]http.Handler {
	return map[string]http.Handler{
		"POST /v1/sandboxes/{name}/snapshots":              http.HandlerFunc(a.snapshot),
		"GET /v1/sandboxes/{name}/snapshots":               http.HandlerFunc(a.snapshots),
		"GET /v1/sandboxes/{name}/snapshots/{snapshot}":    http.HandlerFunc(a.snapshotInfo),
		"DELETE /v1/sandboxes/{name}/snapshots/{snapshot}": http.HandlerFunc(a.removeSnapshot),
		"POST /v1/sandboxes/{name}/rollback":               http.HandlerFunc(a.rollback),
		"POST /v1/sandboxes/{name}/fork":                   http.HandlerFunc(a.fork),
	}
}

// snapshotEvent is the sandbox event of a snapshot action, naming the
// snapshot.
func (a *sandboxAPI) snapshotEvent(ctx context.Context, action string, in sandbox.Info, snapshot string) {
	a.eventWith(ctx, action, in, func(d *api.Details) { d.Snapshot = snapshot })
}

func infoScope(in sandbox.Info) sandbox.Scope {
	return sandbox.Scope{AgentID: in.AgentID, SessionKey: in.SessionKey}
}

// onSandbox answers a route of the sandbox the path names (as the caller
// may see it): do's result with status, or the error's.
func onSandbox[T any](a *sandboxAPI, w http.ResponseWriter, r *http.Request, status int, do func(in sandbox.Info) (T, error)) {
	in, err := a.visible(r.Context(), r.PathValue("name"))
	if err == nil {
		var out T
		if out, err = do(in); err == nil {
			replyJSON(w, status, out)
			return
		}
	}
	a.fail(w, err)
}

func (a *sandboxAPI) snapshot(w http.ResponseWriter, r *http.Request) {
	var req api.SnapshotRequest
	if err := decodeStrict(w, r, &req); err != nil {
		a.fail(w, err)
		return
	}
	onSandbox(a, w, r, http.StatusCreated, func(in sandbox.Info) (sandbox.SnapshotInfo, error) {
		snap, err := a.m.Snapshot(r.Context(), infoScope(in), req.Name)
		if err == nil {
			a.snapshotEvent(r.Context(), "snapshotted", in, snap.Name)
		}
		return snap, err
	})
}

func (a *sandboxAPI) snapshots(w http.ResponseWriter, r *http.Request) {
	onSandbox(a, w, r, http.StatusOK, func(in sandbox.Info) ([]sandbox.SnapshotInfo, error) {
		list, err := a.m.Snapshots(infoScope(in))
		if list == nil {
			list = []sandbox.SnapshotInfo{}
		}
		return list, err
	})
}

func (a *sandboxAPI) snapshotInfo(w http.ResponseWriter, r *http.Request) {
	onSandbox(a, w, r, http.StatusOK, func(in sandbox.Info) (sandbox.SnapshotInfo, error) {
		return a.m.SnapshotOf(infoScope(in), r.PathValue("snapshot"))
	})
}

func (a *sandboxAPI) removeSnapshot(w http.ResponseWriter, r *http.Request) {
	onSandbox(a, w, r, http.StatusOK, func(in sandbox.Info) (sandbox.SnapshotInfo, error) {
		snap, err := a.m.RemoveSnapshot(infoScope(in), r.PathValue("snapshot"))
		if err == nil {
			a.snapshotEvent(r.Context(), "snapshot-removed", in, snap.Name)
		}
		return snap, err
	})
}

func (a *sandboxAPI) rollback(w http.ResponseWriter, r *http.Request) {
	var req api.RollbackRequest
	if err := decodeStrict(w, r, &req); err != nil {
		a.fail(w, err)
		return
	}
	if err := sandbox.CheckSnapshotName(req.Snapshot); err != nil {
		a.fail(w, err)
		return
	}
	onSandbox(a, w, r, http.StatusOK, func(in sandbox.Info) (sandbox.Info, error) {
		out, err := a.m.Rollback(r.Context(), infoScope(in), req.Snapshot)
		if err == nil {
			a.snapshotEvent(r.Context(), "rolled-back", out, req.Snapshot)
		}
		return out, err
	})
}

func (a *sandboxAPI) fork(w http.ResponseWriter, r *http.Request) {
	var req api.ForkRequest
	if err := decodeStrict(w, r, &req); err != nil {
		a.fail(w, err)
		return
	}
	if req.Snapshot != "" {
		if err := sandbox.CheckSnapshotName(req.Snapshot); err != nil {
			a.fail(w, err)
			return
		}
	}
	if pin, ok := daemon.PinFrom(r.Context()); ok {
		if req.AgentID != "" && req.AgentID != pin.AgentID {
			replyJSON(w, http.StatusForbidden, map[string]string{"error": "an agent token forks only into its own agent (" + pin.AgentID + ")"})
			return
		}
		req.AgentID = pin.AgentID
	}
	onSandbox(a, w, r, http.StatusCreated, func(in sandbox.Info) (sandbox.Info, error) {
		out, err := a.m.Fork(r.Context(), infoScope(in), req.Snapshot, sandbox.Scope{AgentID: req.AgentID, SessionKey: req.SessionKey})
		if err == nil {
			a.snapshotEvent(r.Context(), "forked", out, req.Snapshot)
		}
		return out, err
	})
}

var _ mcpserver.SandboxSnapshots = (*sandboxAPI)(nil)

// SnapshotScope implements mcpserver.SandboxSnapshots.
func (a *sandboxAPI) SnapshotScope(ctx context.Context, agentID, sessionKey, name string) (api.Snapshot, error) {
	in, err := a.scopeSandbox(ctx, agentID, sessionKey)
	if err != nil {
		return api.Snapshot{}, err
	}
	snap, err := a.m.Snapshot(ctx, infoScope(in), name)
	if err != nil {
		return api.Snapshot{}, err
	}
	a.snapshotEvent(ctx, "snapshotted", in, snap.Name)
	return clientSnapshot(snap), nil
}

// RollbackScope implements mcpserver.SandboxSnapshots.
func (a *sandboxAPI) RollbackScope(ctx context.Context, agentID, sessionKey, snapshot string) (api.Sandbox, error) {
	in, err := a.scopeSandbox(ctx, agentID, sessionKey)
	if err != nil {
		return api.Sandbox{}, err
	}
	out, err := a.m.Rollback(ctx, infoScope(in), snapshot)
	if err != nil {
		return api.Sandbox{}, err
	}
	a.snapshotEvent(ctx, "rolled-back", out, snapshot)
	return clientSandbox(out), nil
}

// ForkScope implements mcpserver.SandboxSnapshots.
func (a *sandboxAPI) ForkScope(ctx context.Context, agentID, sessionKey string, req api.ForkRequest) (api.Sandbox, error) {
	in, err := a.scopeSandbox(ctx, agentID, sessionKey)
	if err != nil {
		return api.Sandbox{}, err
	}
	out, err := a.m.Fork(ctx, infoScope(in), req.Snapshot, sandbox.Scope{AgentID: req.AgentID, SessionKey: req.SessionKey})
	if err != nil {
		return api.Sandbox{}, err
	}
	a.snapshotEvent(ctx, "forked", out, req.Snapshot)
	return clientSandbox(out), nil
}

// clientSnapshot is snap as the API answers it.
func clientSnapshot(snap sandbox.SnapshotInfo) api.Snapshot {
	return api.Snapshot{Name: snap.Name, ScopeKey: snap.ScopeKey, AgentID: snap.AgentID, SessionKey: snap.SessionKey,
		CreatedAt: snap.CreatedAt, Origin: snap.Origin, OriginID: snap.OriginID, Template: snap.Template, Labels: snap.Labels,
		Bytes: snap.Bytes, Files: snap.Files, Method: snap.Method, Tmpfs: snap.Tmpfs, Skipped: snap.Skipped}
}

// SnapshotScope implements mcpserver.SandboxSnapshots for `sandboxctl mcp`.
func (s clientSandboxes) SnapshotScope(ctx context.Context, agentID, sessionKey, name string) (api.Snapshot, error) {
	sb, err := s.ScopeSandbox(ctx, agentID, sessionKey)
	if err != nil {
		return api.Snapshot{}, err
	}
	return s.c.SnapshotSandbox(ctx, sb.ID, name)
}

// RollbackScope implements mcpserver.SandboxSnapshots for `sandboxctl mcp`.
func (s clientSandboxes) RollbackScope(ctx context.Context, agentID, sessionKey, snapshot string) (api.Sandbox, error) {
	sb, err := s.ScopeSandbox(ctx, agentID, sessionKey)
	if err != nil {
		return sb, err
	}
	return s.c.RollbackSandbox(ctx, sb.ID, snapshot)
}

// ForkScope implements mcpserver.SandboxSnapshots for `sandboxctl mcp`.
func (s clientSandboxes) ForkScope(ctx context.Context, agentID, sessionKey string, req api.ForkRequest) (api.Sandbox, error) {
	sb, err := s.ScopeSandbox(ctx, agentID, sessionKey)
	if err != nil {
		return sb, err
	}
	return s.c.ForkSandbox(ctx, sb.ID, req)
}
