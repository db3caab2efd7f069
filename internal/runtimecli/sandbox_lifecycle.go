package runtimecli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"

	"github.com/sandboxctl/sandboxctl/api"
	"github.com/sandboxctl/sandboxctl/internal/audit"
	"github.com/sandboxctl/sandboxctl/internal/daemon"
	"github.com/sandboxctl/sandboxctl/internal/mcpserver"
	"github.com/sandboxctl/sandboxctl/sandbox"
	"github.com/sandboxctl/sandboxctl/vocab"
)

// sandboxAPI is the sandbox lifecycle (docs/sandboxes.md) the daemon's
// routes (daemon.Sandboxes) and the MCP tools (mcpserver.Sandboxes) act
// on: the sandbox manager's operations, each recorded in the audit log
// and published as an event. owner "" sees every agent's sandboxes;
// another agent's are not found for any other owner.
type sandboxAPI struct {
	m       *sandbox.Manager
	publish func(api.Event)
	audit   audit.Recorder // sandbox records (who did what); nil: none
}

var (
	_ daemon.Sandboxes    = (*sandboxAPI)(nil)
	_ mcpserver.Sandboxes = (*sandboxAPI)(nil)
)

// classed is err with a containerd errdefs class its text does not show.
type classed struct{ err, class error }

func (c classed) Error() string   { return c.err.Error() }
func (c classed) Unwrap() []error { return []error{c.err, c.class} }

// classify gives the sandbox manager's errors their errdefs class.
func classify(err error) error {
	if errors.Is(err, sandbox.ErrNotFound) && !cerrdefs.IsNotFound(err) {
		return classed{err, cerrdefs.ErrNotFound}
	}
	return err
}

// visible returns the sandbox ref if owner may see it.
func (a *sandboxAPI) visible(ctx context.Context, owner, ref string) (sandbox.Info, error) {
	in, err := a.m.Get(ctx, ref)
	if err != nil {
		return in, classify(err)
	}
	if owner != "" && in.AgentID != owner {
		return sandbox.Info{}, classify(fmt.Errorf("%w: no sandbox with id or name %q", sandbox.ErrNotFound, ref))
	}
	return in, nil
}

// Create implements daemon.Sandboxes.
func (a *sandboxAPI) Create(ctx context.Context, req api.CreateSandboxRequest) (api.Sandbox, error) {
	ttl, err := sandbox.CheckTTL(req.TTLSeconds, true)
	if err != nil {
		return api.Sandbox{}, err
	}
	in, err := a.m.Create(ctx, sandbox.Scope{AgentID: req.AgentID, SessionKey: req.SessionKey},
		sandbox.CreateOptions{Template: req.Template, Labels: req.Labels, TTL: ttl})
	if err != nil {
		return api.Sandbox{}, classify(err)
	}
	a.event(ctx, "created", in)
	return in.Sandbox, nil
}

// CreateSandbox implements mcpserver.Sandboxes.
func (a *sandboxAPI) CreateSandbox(ctx context.Context, req api.CreateSandboxRequest) (api.Sandbox, error) {
	return a.Create(ctx, req)
}

// List implements daemon.Sandboxes.
func (a *sandboxAPI) List(ctx context.Context, owner string, filters []string) ([]api.Sandbox, error) {
	f, err := sandbox.ParseListFilter(filters)
	if err != nil {
		return nil, err
	}
	if owner != "" {
		if f.AgentID != "" && f.AgentID != owner {
			return []api.Sandbox{}, nil
		}
		f.AgentID = owner
	}
	list, err := a.m.ListFiltered(ctx, f)
	if err != nil {
		return nil, classify(err)
	}
	out := make([]api.Sandbox, 0, len(list))
	for _, in := range list {
		out = append(out, in.Sandbox)
	}
	return out, nil
}

// Get implements daemon.Sandboxes.
func (a *sandboxAPI) Get(ctx context.Context, owner, ref string) (api.Sandbox, error) {
	in, err := a.visible(ctx, owner, ref)
	if err != nil {
		return api.Sandbox{}, err
	}
	return in.Sandbox, nil
}

// Detail implements daemon.Sandboxes.
func (a *sandboxAPI) Detail(ctx context.Context, sb api.Sandbox) (api.SandboxDetail, error) {
	ex, err := a.m.Explain(ctx, sandbox.Scope{AgentID: sb.AgentID, SessionKey: sb.SessionKey})
	if err != nil {
		return api.SandboxDetail{}, err
	}
	raw, err := json.Marshal(ex)
	if err != nil {
		return api.SandboxDetail{}, fmt.Errorf("explain %s: %w", sb.Name, err)
	}
	d := api.SandboxDetail{Sandbox: sb, Explain: raw}
	if sb.State != string(container.StateRunning) {
		d.UsageError = "the sandbox is " + sb.State
	} else if a.m.Client() == nil {
		d.UsageError = "usage is not reported by the " + sb.Engine + " sandbox engine"
	} else if u, err := sandboxUsage(ctx, a.m.Client(), sb.ID); err != nil {
		d.UsageError = err.Error()
	} else {
		d.Usage = &u
	}
	return d, nil
}

// Remove implements daemon.Sandboxes.
func (a *sandboxAPI) Remove(ctx context.Context, owner, ref string, workspace bool) (api.Sandbox, error) {
	in, err := a.visible(ctx, owner, ref)
	if err != nil {
		return api.Sandbox{}, err
	}
	if in, err = a.m.Delete(ctx, in.ID, workspace); err != nil {
		return api.Sandbox{}, classify(err)
	}
	a.event(ctx, "removed", in, workspace)
	return in.Sandbox, nil
}

// Pause implements daemon.Sandboxes.
func (a *sandboxAPI) Pause(ctx context.Context, owner, ref string) (api.Sandbox, error) {
	return a.change(ctx, owner, ref, "paused", a.m.Pause)
}

// Resume implements daemon.Sandboxes.
func (a *sandboxAPI) Resume(ctx context.Context, owner, ref string) (api.Sandbox, error) {
	return a.change(ctx, owner, ref, "resumed", a.m.Resume)
}

func (a *sandboxAPI) change(ctx context.Context, owner, ref, action string, do func(context.Context, string) (sandbox.Info, error)) (api.Sandbox, error) {
	in, err := a.visible(ctx, owner, ref)
	if err != nil {
		return api.Sandbox{}, err
	}
	if in, err = do(ctx, in.ID); err != nil {
		return api.Sandbox{}, classify(err)
	}
	a.event(ctx, action, in)
	return in.Sandbox, nil
}

// Extend implements daemon.Sandboxes.
func (a *sandboxAPI) Extend(ctx context.Context, owner, ref string, ttlSeconds int64) (api.Sandbox, error) {
	ttl, err := sandbox.CheckTTL(ttlSeconds, false)
	if err != nil {
		return api.Sandbox{}, err
	}
	in, err := a.visible(ctx, owner, ref)
	if err != nil {
		return api.Sandbox{}, err
	}
	if in, err = a.m.Extend(ctx, in.ID, ttl); err != nil {
		return api.Sandbox{}, classify(err)
	}
	a.event(ctx, "extended", in)
	return in.Sandbox, nil
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
	return in.Sandbox, nil
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
	return in.Sandbox, nil
}
