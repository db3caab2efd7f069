package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	cerrdefs "github.com/containerd/errdefs"

	"github.com/sandboxctl/sandboxctl/api"
)

// Sandboxes is the sandbox lifecycle the daemon serves: create, list,
// detail, remove, pause, resume, extend (docs/sandboxes.md) and snapshots,
// rollback and fork (docs/snapshots.md). The composition root gives it
// the sandbox manager's.
//
// owner is the agent a pinned caller (agent token) is pinned to, "" for
// any other: a sandbox of another agent is not found for it. Errors carry
// their containerd errdefs class (a missing sandbox is NotFound, bad input
// InvalidArgument, a fork into another agent PermissionDenied).
type Sandboxes interface {
	Create(ctx context.Context, req api.CreateSandboxRequest) (api.Sandbox, error)
	// List lists the sandboxes the filters ("key=value": label, agent,
	// agentId, template, state, scopeKey) select.
	List(ctx context.Context, owner string, filters []string) ([]api.Sandbox, error)
	// Get finds a sandbox by id, id prefix or name.
	Get(ctx context.Context, owner, ref string) (api.Sandbox, error)
	// Detail adds to sb what explain shows and its resource use.
	Detail(ctx context.Context, sb api.Sandbox) (api.SandboxDetail, error)
	Remove(ctx context.Context, owner, ref string, workspace bool) (api.Sandbox, error)
	Pause(ctx context.Context, owner, ref string) (api.Sandbox, error)
	Resume(ctx context.Context, owner, ref string) (api.Sandbox, error)
	Extend(ctx context.Context, owner, ref string, ttlSeconds int64) (api.Sandbox, error)

	Snapshot(ctx context.Context, owner, ref, name string) (api.Snapshot, error)
	Snapshots(ctx context.Context, owner, ref string) ([]api.Snapshot, error)
	SnapshotOf(ctx context.Context, owner, ref, name string) (api.Snapshot, error)
	RemoveSnapshot(ctx context.Context, owner, ref, name string) (api.Snapshot, error)
	Rollback(ctx context.Context, owner, ref, snapshot string) (api.Sandbox, error)
	Fork(ctx context.Context, owner, ref string, req api.ForkRequest) (api.Sandbox, error)
}

// maxLifecycleBody bounds a lifecycle request body.
const maxLifecycleBody = 64 << 10

var errBodyTooLarge = errors.New("request body too large")

// sandboxRoutes serves the lifecycle and the snapshots; every route is
// also an agent route (a pinned caller is the owner).
type sandboxRoutes struct {
	sbx    Sandboxes
	isDown func(error) bool
}

func (a sandboxRoutes) add(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/sandboxes", a.create)
	mux.HandleFunc("GET /v1/sandboxes", a.list)
	mux.HandleFunc("GET /v1/sandboxes/{name}", a.detail)
	mux.HandleFunc("DELETE /v1/sandboxes/{name}", a.remove)
	mux.Handle("POST /v1/sandboxes/{name}/pause", a.change(a.sbx.Pause))
	mux.Handle("POST /v1/sandboxes/{name}/resume", a.change(a.sbx.Resume))
	mux.HandleFunc("POST /v1/sandboxes/{name}/timeout", a.extend)

	mux.HandleFunc("POST /v1/sandboxes/{name}/snapshots", a.snapshot)
	mux.HandleFunc("GET /v1/sandboxes/{name}/snapshots", a.snapshots)
	mux.HandleFunc("GET /v1/sandboxes/{name}/snapshots/{snapshot}", a.snapshotInfo)
	mux.HandleFunc("DELETE /v1/sandboxes/{name}/snapshots/{snapshot}", a.removeSnapshot)
	mux.HandleFunc("POST /v1/sandboxes/{name}/rollback", a.rollback)
	mux.HandleFunc("POST /v1/sandboxes/{name}/fork", a.fork)
}

// owner is the agent the caller is pinned to ("" when it is not).
func owner(r *http.Request) string {
	pin, _ := PinFrom(r.Context())
	return pin.AgentID
}

func (a sandboxRoutes) create(w http.ResponseWriter, r *http.Request) {
	var req api.CreateSandboxRequest
	if err := decodeLifecycle(w, r, &req); err != nil {
		a.fail(w, err)
		return
	}
	if pin, ok := PinFrom(r.Context()); ok {
		req.AgentID = pin.AgentID // a pinned agent cannot choose its scope
	}
	in, err := a.sbx.Create(r.Context(), req)
	a.answer(w, http.StatusCreated, in, err)
}

func (a sandboxRoutes) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var filters []string
	for _, key := range []string{"label", "agent", "agentId", "template", "state", "scopeKey"} {
		for _, v := range q[key] {
			filters = append(filters, key+"="+v)
		}
	}
	list, err := a.sbx.List(r.Context(), owner(r), filters)
	if list == nil {
		list = []api.Sandbox{}
	}
	a.answer(w, http.StatusOK, list, err)
}

// detail serves GET /v1/sandboxes/{name}: a sandbox it cannot find is 404,
// one it cannot describe 503.
func (a sandboxRoutes) detail(w http.ResponseWriter, r *http.Request) {
	in, err := a.sbx.Get(r.Context(), owner(r), r.PathValue("name"))
	switch {
	case cerrdefs.IsNotFound(err):
		writeError(w, http.StatusNotFound, err)
		return
	case cerrdefs.IsInvalidArgument(err):
		writeError(w, http.StatusBadRequest, err)
		return
	case err != nil:
		writeError(w, http.StatusServiceUnavailable, err)
		return
	}
	d, err := a.sbx.Detail(r.Context(), in)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, err)
		return
	}
	writeJSON(w, http.StatusOK, d)
}

func (a sandboxRoutes) remove(w http.ResponseWriter, r *http.Request) {
	workspace := false
	if v := r.URL.Query().Get("workspace"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			a.fail(w, fmt.Errorf("%w: workspace=%q: want true or false", cerrdefs.ErrInvalidArgument, v))
			return
		}
		workspace = b
	}
	in, err := a.sbx.Remove(r.Context(), owner(r), r.PathValue("name"), workspace)
	a.answer(w, http.StatusOK, api.SandboxRemoved{Removed: in.ID, Name: in.Name, WorkspaceRemoved: workspace}, err)
}

func (a sandboxRoutes) change(do func(ctx context.Context, owner, ref string) (api.Sandbox, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		in, err := do(r.Context(), owner(r), r.PathValue("name"))
		a.answer(w, http.StatusOK, in, err)
	})
}

func (a sandboxRoutes) extend(w http.ResponseWriter, r *http.Request) {
	var req api.ExtendSandboxRequest
	if err := decodeLifecycle(w, r, &req); err != nil {
		a.fail(w, err)
		return
	}
	in, err := a.sbx.Extend(r.Context(), owner(r), r.PathValue("name"), req.TTLSeconds)
	a.answer(w, http.StatusOK, in, err)
}

func (a sandboxRoutes) snapshot(w http.ResponseWriter, r *http.Request) {
	var req api.SnapshotRequest
	if err := decodeLifecycle(w, r, &req); err != nil {
		a.fail(w, err)
		return
	}
	snap, err := a.sbx.Snapshot(r.Context(), owner(r), r.PathValue("name"), req.Name)
	a.answer(w, http.StatusCreated, snap, err)
}

func (a sandboxRoutes) snapshots(w http.ResponseWriter, r *http.Request) {
	list, err := a.sbx.Snapshots(r.Context(), owner(r), r.PathValue("name"))
	if list == nil {
		list = []api.Snapshot{}
	}
	a.answer(w, http.StatusOK, list, err)
}

func (a sandboxRoutes) snapshotInfo(w http.ResponseWriter, r *http.Request) {
	snap, err := a.sbx.SnapshotOf(r.Context(), owner(r), r.PathValue("name"), r.PathValue("snapshot"))
	a.answer(w, http.StatusOK, snap, err)
}

func (a sandboxRoutes) removeSnapshot(w http.ResponseWriter, r *http.Request) {
	snap, err := a.sbx.RemoveSnapshot(r.Context(), owner(r), r.PathValue("name"), r.PathValue("snapshot"))
	a.answer(w, http.StatusOK, snap, err)
}

func (a sandboxRoutes) rollback(w http.ResponseWriter, r *http.Request) {
	var req api.RollbackRequest
	if err := decodeLifecycle(w, r, &req); err != nil {
		a.fail(w, err)
		return
	}
	in, err := a.sbx.Rollback(r.Context(), owner(r), r.PathValue("name"), req.Snapshot)
	a.answer(w, http.StatusOK, in, err)
}

func (a sandboxRoutes) fork(w http.ResponseWriter, r *http.Request) {
	var req api.ForkRequest
	if err := decodeLifecycle(w, r, &req); err != nil {
		a.fail(w, err)
		return
	}
	in, err := a.sbx.Fork(r.Context(), owner(r), r.PathValue("name"), req)
	a.answer(w, http.StatusCreated, in, err)
}

// answer writes v with status, or err's status and body.
func (a sandboxRoutes) answer(w http.ResponseWriter, status int, v any, err error) {
	if err != nil {
		a.fail(w, err)
		return
	}
	writeJSON(w, status, v)
}

func (a sandboxRoutes) fail(w http.ResponseWriter, err error) {
	code := http.StatusInternalServerError
	switch {
	case cerrdefs.IsInvalidArgument(err):
		code = http.StatusBadRequest
	case errors.Is(err, errBodyTooLarge):
		code = http.StatusRequestEntityTooLarge
	case cerrdefs.IsNotFound(err):
		code = http.StatusNotFound
	case cerrdefs.IsPermissionDenied(err):
		code = http.StatusForbidden
	case cerrdefs.IsConflict(err):
		code = http.StatusConflict
	case cerrdefs.IsResourceExhausted(err):
		code = http.StatusTooManyRequests
	case cerrdefs.IsNotImplemented(err):
		code = http.StatusNotImplemented // what the sandbox engine cannot do
	case a.isDown != nil && a.isDown(err), cerrdefs.IsUnavailable(err):
		code = http.StatusServiceUnavailable
	}
	writeError(w, code, err)
}

// decodeLifecycle decodes one JSON object (unknown fields refused) of at
// most maxLifecycleBody bytes; an empty body is the zero value.
func decodeLifecycle(w http.ResponseWriter, r *http.Request, v any) error {
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxLifecycleBody))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return fmt.Errorf("%w: at most %d bytes", errBodyTooLarge, maxLifecycleBody)
		}
		return fmt.Errorf("read body: %w", err)
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: body: %w", cerrdefs.ErrInvalidArgument, err)
	}
	if dec.More() {
		return fmt.Errorf("%w: body: one JSON object expected", cerrdefs.ErrInvalidArgument)
	}
	return nil
}
