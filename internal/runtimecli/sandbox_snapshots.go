package runtimecli

import (
	"net/http"

	"github.com/sandboxctl/sandboxctl/internal/apiclient"
	"github.com/sandboxctl/sandboxctl/internal/daemon"
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

func infoScope(in sandbox.Info) sandbox.Scope {
	return sandbox.Scope{AgentID: in.AgentID, SessionKey: in.SessionKey}
}

func (a *sandboxAPI) snapshot(w http.ResponseWriter, r *http.Request) {
	var req apiclient.SnapshotRequest
	if err := decodeStrict(w, r, &req); err != nil {
		a.fail(w, err)
		return
	}
	in, err := a.visible(r.Context(), r.PathValue("name"))
	if err != nil {
		a.fail(w, err)
		return
	}
	snap, err := a.m.Snapshot(r.Context(), infoScope(in), req.Name)
	if err != nil {
		a.fail(w, err)
		return
	}
	a.event("snapshotted", in, "snapshot", snap.Name, "bytes", snap.Bytes, "method", snap.Method)
	replyJSON(w, http.StatusCreated, snap)
}

func (a *sandboxAPI) snapshots(w http.ResponseWriter, r *http.Request) {
	in, err := a.visible(r.Context(), r.PathValue("name"))
	if err != nil {
		a.fail(w, err)
		return
	}
	list, err := a.m.Snapshots(infoScope(in))
	if err != nil {
		a.fail(w, err)
		return
	}
	if list == nil {
		list = []sandbox.SnapshotInfo{}
	}
	replyJSON(w, http.StatusOK, list)
}

func (a *sandboxAPI) snapshotInfo(w http.ResponseWriter, r *http.Request) {
	in, err := a.visible(r.Context(), r.PathValue("name"))
	if err != nil {
		a.fail(w, err)
		return
	}
	snap, err := a.m.SnapshotOf(infoScope(in), r.PathValue("snapshot"))
	if err != nil {
		a.fail(w, err)
		return
	}
	replyJSON(w, http.StatusOK, snap)
}

func (a *sandboxAPI) removeSnapshot(w http.ResponseWriter, r *http.Request) {
	in, err := a.visible(r.Context(), r.PathValue("name"))
	if err != nil {
		a.fail(w, err)
		return
	}
	snap, err := a.m.RemoveSnapshot(infoScope(in), r.PathValue("snapshot"))
	if err != nil {
		a.fail(w, err)
		return
	}
	a.event("snapshot-removed", in, "snapshot", snap.Name)
	replyJSON(w, http.StatusOK, snap)
}

func (a *sandboxAPI) rollback(w http.ResponseWriter, r *http.Request) {
	var req apiclient.RollbackRequest
	if err := decodeStrict(w, r, &req); err != nil {
		a.fail(w, err)
		return
	}
	if err := sandbox.CheckSnapshotName(req.Snapshot); err != nil {
		a.fail(w, err)
		return
	}
	in, err := a.visible(r.Context(), r.PathValue("name"))
	if err != nil {
		a.fail(w, err)
		return
	}
	out, err := a.m.Rollback(r.Context(), infoScope(in), req.Snapshot)
	if err != nil {
		a.fail(w, err)
		return
	}
	a.event("rolled-back", out, "snapshot", req.Snapshot, "previousId", in.ID)
	replyJSON(w, http.StatusOK, out)
}

func (a *sandboxAPI) fork(w http.ResponseWriter, r *http.Request) {
	var req apiclient.ForkRequest
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
	in, err := a.visible(r.Context(), r.PathValue("name"))
	if err != nil {
		a.fail(w, err)
		return
	}
	out, err := a.m.Fork(r.Context(), infoScope(in), req.Snapshot, sandbox.Scope{AgentID: req.AgentID, SessionKey: req.SessionKey})
	if err != nil {
		a.fail(w, err)
		return
	}
	a.event("forked", out, "origin", in.Name, "originId", in.ID, "snapshot", req.Snapshot)
	replyJSON(w, http.StatusCreated, out)
}
