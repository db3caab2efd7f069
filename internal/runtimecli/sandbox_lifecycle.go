package runtimecli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	cerrdefs "github.com/containerd/errdefs"

	"github.com/sandboxctl/sandboxctl/api"
	"github.com/sandboxctl/sandboxctl/internal/audit"
	"github.com/sandboxctl/sandboxctl/internal/daemon"
	"github.com/sandboxctl/sandboxctl/internal/mcpserver"
	"github.com/sandboxctl/sandboxctl/sandbox"
	"github.com/sandboxctl/sandboxctl/vocab"
)

// sandboxAPI serves the sandbox lifecycle: create, list with filters,
// detail, delete, pause, resume and extend (docs/sandboxes.md). A pinned
// agent (agent token) sees and changes only its own agent's sandboxes;
// another's are 404 to it.
type sandboxAPI struct {
	m       *sandbox.Manager
	publish func(api.Event)
	isDown  func(error) bool
	audit   audit.Recorder // sandbox records (who did what); nil: none
}

// maxLifecycleBody bounds a lifecycle request body.
const maxLifecycleBody = 64 << 10

func (a *sandboxAPI) routes() map[string]http.Handler {
	r := a.lifecycleRoutes()
	for pattern, h := range a.snapshotRoutes() {
		r[pattern] = h
	}
	return r
}

func (a *sandboxAPI) lifecycleRoutes() map[string]http.Handler {
	return map[string]http.Handler{
		"POST /v1/sandboxes":                http.HandlerFunc(a.create),
		"GET /v1/sandboxes":                 http.HandlerFunc(a.list),
		"GET /v1/sandboxes/{name}":          sandboxDetailHandler(a.m, a.visible),
		"DELETE /v1/sandboxes/{name}":       http.HandlerFunc(a.remove),
		"POST /v1/sandboxes/{name}/pause":   a.change("paused", a.m.Pause),
		"POST /v1/sandboxes/{name}/resume":  a.change("resumed", a.m.Resume),
		"POST /v1/sandboxes/{name}/timeout": http.HandlerFunc(a.extend),
	}
}

// visible returns the sandbox ref if the caller may see it.
func (a *sandboxAPI) visible(ctx context.Context, ref string) (sandbox.Info, error) {
	in, err := a.m.Get(ctx, ref)
	if err != nil {
		return in, err
	}
	if pin, ok := daemon.PinFrom(ctx); ok && in.AgentID != pin.AgentID {
		return sandbox.Info{}, fmt.Errorf("%w: no sandbox with id or name %q", sandbox.ErrNotFound, ref)
	}
	return in, nil
}

func (a *sandboxAPI) create(w http.ResponseWriter, r *http.Request) {
	var req api.CreateSandboxRequest
	if err := decodeStrict(w, r, &req); err != nil {
		a.fail(w, err)
		return
	}
	if pin, ok := daemon.PinFrom(r.Context()); ok {
		req.AgentID = pin.AgentID // a pinned agent cannot choose its scope
	}
	ttl, err := sandbox.CheckTTL(req.TTLSeconds, true)
	if err != nil {
		a.fail(w, err)
		return
	}
	s := sandbox.Scope{AgentID: req.AgentID, SessionKey: req.SessionKey}
	in, err := a.m.Create(r.Context(), s, sandbox.CreateOptions{Template: req.Template, Labels: req.Labels, TTL: ttl})
	if err != nil {
		a.fail(w, err)
		return
	}
	a.event(r.Context(), "created", in)
	replyJSON(w, http.StatusCreated, in)
}

func (a *sandboxAPI) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var filters []string
	for _, key := range []string{"label", "agent", "agentId", "template", "state", "scopeKey"} {
		for _, v := range q[key] {
			filters = append(filters, key+"="+v)
		}
	}
	f, err := sandbox.ParseListFilter(filters)
	if err != nil {
		a.fail(w, err)
		return
	}
	if pin, ok := daemon.PinFrom(r.Context()); ok {
		if f.AgentID != "" && f.AgentID != pin.AgentID {
			replyJSON(w, http.StatusOK, []sandbox.Info{})
			return
		}
		f.AgentID = pin.AgentID
	}
	list, err := a.m.ListFiltered(r.Context(), f)
	if err != nil {
		a.fail(w, err)
		return
	}
	if list == nil {
		list = []sandbox.Info{}
	}
	replyJSON(w, http.StatusOK, list)
}

func (a *sandboxAPI) remove(w http.ResponseWriter, r *http.Request) {
	workspace := false
	if v := r.URL.Query().Get("workspace"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			a.fail(w, fmt.Errorf("%w: workspace=%q: want true or false", cerrdefs.ErrInvalidArgument, v))
			return
		}
		workspace = b
	}
	in, err := a.visible(r.Context(), r.PathValue("name"))
	if err != nil {
		a.fail(w, err)
		return
	}
	if in, err = a.m.Delete(r.Context(), in.ID, workspace); err != nil {
		a.fail(w, err)
		return
	}
	a.event(r.Context(), "removed", in, workspace)
	replyJSON(w, http.StatusOK, map[string]any{"removed": in.ID, "name": in.Name, "workspaceRemoved": workspace})
}

func (a *sandboxAPI) change(action string, do func(context.Context, string) (sandbox.Info, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		in, err := a.visible(r.Context(), r.PathValue("name"))
		if err != nil {
			a.fail(w, err)
			return
		}
		if in, err = do(r.Context(), in.ID); err != nil {
			a.fail(w, err)
			return
		}
		a.event(r.Context(), action, in)
		replyJSON(w, http.StatusOK, in)
	})
}

func (a *sandboxAPI) extend(w http.ResponseWriter, r *http.Request) {
	var req api.ExtendSandboxRequest
	if err := decodeStrict(w, r, &req); err != nil {
		a.fail(w, err)
		return
	}
	ttl, err := sandbox.CheckTTL(req.TTLSeconds, false)
	if err != nil {
		a.fail(w, err)
		return
	}
	in, err := a.visible(r.Context(), r.PathValue("name"))
	if err != nil {
		a.fail(w, err)
		return
	}
	if in, err = a.m.Extend(r.Context(), in.ID, ttl); err != nil {
		a.fail(w, err)
		return
	}
	a.event(r.Context(), "extended", in)
	replyJSON(w, http.StatusOK, in)
}

// event records (with the actor of ctx) and publishes a lifecycle event
// for in; workspaceRemoved is set for a removal only.
func (a *sandboxAPI) event(ctx context.Context, action string, in sandbox.Info, workspaceRemoved ...bool) {
	a.eventWith(ctx, action, in, func(d *api.Details) {
		if len(workspaceRemoved) > 0 {
			d.WorkspaceRemoved = &workspaceRemoved[0]
		}
	})
}

// eventWith is event with details completed by more.
func (a *sandboxAPI) eventWith(ctx context.Context, action string, in sandbox.Info, more func(*api.Details)) {
	if a.audit != nil {
		_ = a.audit.Record(ctx, audit.Record{Kind: audit.KindSandbox, AgentID: in.AgentID, SessionKey: in.SessionKey, Host: "sandbox",
			Sandbox: &audit.Sandbox{Action: action, ID: in.ID, Name: in.Name}})
	}
	if a.publish == nil {
		return
	}
	a.publish(sandboxEvent(action, in, more))
}

// sandboxEvent is the sandbox event of action on in, its details completed
// by more: the one shape of a lifecycle event, whether the daemon's API or
// a command of the CLI (spooled, sandbox_events.go) did the action.
func sandboxEvent(action string, in sandbox.Info, more func(*api.Details)) api.Event {
	d := api.Details{Action: action, ID: in.ID, Name: &in.Name, Template: in.Template}
	if !in.ExpiresAt.IsZero() {
		d.ExpiresAt = in.ExpiresAt.UTC().Format(time.RFC3339Nano)
	}
	more(&d)
	return api.Event{Type: vocab.EventSandbox, Text: fmt.Sprintf("sandbox %s %s", in.Name, action),
		AgentID: in.AgentID, SessionKey: in.SessionKey, Details: d}
}

func (a *sandboxAPI) fail(w http.ResponseWriter, err error) {
	code := http.StatusInternalServerError
	switch {
	case cerrdefs.IsInvalidArgument(err):
		code = http.StatusBadRequest
	case errors.Is(err, errBodyTooLarge):
		code = http.StatusRequestEntityTooLarge
	case cerrdefs.IsNotFound(err), errors.Is(err, sandbox.ErrNotFound):
		code = http.StatusNotFound
	case cerrdefs.IsConflict(err):
		code = http.StatusConflict
	case cerrdefs.IsResourceExhausted(err):
		code = http.StatusTooManyRequests
	case a.isDown != nil && a.isDown(err), cerrdefs.IsUnavailable(err):
		code = http.StatusServiceUnavailable
	}
	replyJSON(w, code, map[string]string{"error": err.Error()})
}

var errBodyTooLarge = errors.New("request body too large")

// decodeStrict decodes one JSON object (unknown fields refused) of at most
// maxLifecycleBody bytes; an empty body is the zero value.
func decodeStrict(w http.ResponseWriter, r *http.Request, v any) error {
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

var _ mcpserver.Sandboxes = (*sandboxAPI)(nil)

// CreateSandbox implements mcpserver.Sandboxes.
func (a *sandboxAPI) CreateSandbox(ctx context.Context, req api.CreateSandboxRequest) (api.Sandbox, error) {
	ttl, err := sandbox.CheckTTL(req.TTLSeconds, true)
	if err != nil {
		return api.Sandbox{}, err
	}
	in, err := a.m.Create(ctx, sandbox.Scope{AgentID: req.AgentID, SessionKey: req.SessionKey},
		sandbox.CreateOptions{Template: req.Template, Labels: req.Labels, TTL: ttl})
	if err != nil {
		return api.Sandbox{}, err
	}
	a.event(ctx, "created", in)
	return clientSandbox(in), nil
}

// scopeSandbox is the sandbox of a scope.
func (a *sandboxAPI) scopeSandbox(ctx context.Context, agentID, sessionKey string) (sandbox.Info, error) {
	s := sandbox.Scope{AgentID: agentID, SessionKey: sessionKey}
	_, name, _, _ := a.m.Layout(s)
	in, err := a.m.Get(ctx, name)
	if errors.Is(err, sandbox.ErrNotFound) {
		return in, fmt.Errorf("%w for scope %s", sandbox.ErrNoSandbox, sandbox.ScopeKey(a.m.Config().Scope, s))
	}
	return in, err
}

// ScopeSandbox implements mcpserver.Sandboxes.
func (a *sandboxAPI) ScopeSandbox(ctx context.Context, agentID, sessionKey string) (api.Sandbox, error) {
	in, err := a.scopeSandbox(ctx, agentID, sessionKey)
	if err != nil {
		return api.Sandbox{}, err
	}
	return clientSandbox(in), nil
}

// DeleteScopeSandbox implements mcpserver.Sandboxes.
func (a *sandboxAPI) DeleteScopeSandbox(ctx context.Context, agentID, sessionKey string, workspace bool) (api.Sandbox, error) {
	in, err := a.scopeSandbox(ctx, agentID, sessionKey)
	if err != nil {
		return api.Sandbox{}, err
	}
	if in, err = a.m.Delete(ctx, in.ID, workspace); err != nil {
		return api.Sandbox{}, err
	}
	a.event(ctx, "removed", in, workspace)
	return clientSandbox(in), nil
}

// clientSandbox is in as the API answers it.
func clientSandbox(in sandbox.Info) api.Sandbox {
	return api.Sandbox{ID: in.ID, Name: in.Name, ScopeKey: in.ScopeKey, AgentID: in.AgentID, SessionKey: in.SessionKey,
		State: in.State, Image: in.Image, Template: in.Template, Labels: in.Labels, CreatedAt: in.CreatedAt,
		LastUsedAt: in.LastUsedAt, ExpiresAt: in.ExpiresAt, ConfigHash: in.ConfigHash, Current: in.Current,
		Engine: in.Engine, Path: in.Path, Pool: in.Pool}
}
