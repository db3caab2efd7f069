package sandbox

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"
)

func objectCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// TestObjectLifecycle creates a sandbox from a template with labels and a
// TTL, lists it with filters, runs in it, pauses, resumes and extends it,
// and checks that bad input and a second create change nothing.
func TestObjectLifecycle(t *testing.T) {
	m := newTestManager(t, func(c *Config) {
		c.Templates = map[string]Template{"small": {Memory: "256m", PidsLimit: 64, Env: map[string]string{"TPL": "small-env"}}}
	})
	ctx := objectCtx(t)
	s := Scope{AgentID: "obj-a"}
	before := time.Now()
	in, err := m.Create(ctx, s, CreateOptions{Template: "small", Labels: map[string]string{"team": "red", "app.kubernetes.io/name": "x"}, TTL: time.Hour})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if in.ID == "" || in.Template != "small" || in.Labels["team"] != "red" || in.State != "running" || in.AgentID != "obj-a" {
		t.Fatalf("created: %+v", in)
	}
	if in.ExpiresAt.Before(before.Add(59*time.Minute)) || in.ExpiresAt.After(time.Now().Add(time.Hour)) {
		t.Fatalf("expiresAt %s, want about an hour from now", in.ExpiresAt)
	}
	insp, err := m.Client().ContainerInspect(ctx, in.ID, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if hc := insp.Container.HostConfig; hc.Memory != 256<<20 || hc.PidsLimit == nil || *hc.PidsLimit != 64 {
		t.Fatalf("the template's limits are not the container's: memory %d pids %v", hc.Memory, hc.PidsLimit)
	}
	if insp.Container.Config.Labels[LabelUserPrefix+"team"] != "red" {
		t.Fatalf("labels: %v", insp.Container.Config.Labels)
	}
	// A command uses it as it is (no recreate: the template's hash holds).
	out, code, err := m.Run(ctx, s, []string{"sh", "-c", "echo $TPL"})
	if err != nil || code != 0 || strings.TrimSpace(out) != "small-env" {
		t.Fatalf("run: %q %d %v", out, code, err)
	}
	if got, _ := m.Get(ctx, in.ID[:12]); got.ID != in.ID {
		t.Fatalf("get by short id: %+v", got)
	}

	// A second create for the scope, and bad input: refused, nothing changes.
	if _, err := m.Create(ctx, s, CreateOptions{}); !cerrdefs.IsConflict(err) || !strings.Contains(err.Error(), "has a sandbox already") {
		t.Fatalf("second create: %v", err)
	}
	for _, o := range []CreateOptions{
		{Template: "nope"},
		{Labels: map[string]string{"bad key": "v"}},
		{Labels: map[string]string{"k": "a\nb"}},
		{TTL: -time.Second},
		{TTL: MaxTTL + time.Second},
	} {
		_, err := m.Create(ctx, Scope{AgentID: "obj-bad"}, o)
		if !cerrdefs.IsInvalidArgument(err) {
			t.Errorf("create %+v: %v, want invalid argument", o, err)
		}
	}
	list, err := m.List(ctx)
	if err != nil || len(list) != 1 {
		t.Fatalf("after refused creates: %d sandboxes (%v), want 1", len(list), err)
	}

	// Filters.
	other, err := m.Create(ctx, Scope{AgentID: "obj-b"}, CreateOptions{Labels: map[string]string{"team": "blue"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		filters []string
		want    string
	}{
		{[]string{"label=team=red"}, in.ID},
		{[]string{"label=team=blue"}, other.ID},
		{[]string{"template=default"}, other.ID},
		{[]string{"agent=obj-a", "state=running"}, in.ID},
	} {
		f, err := ParseListFilter(tc.filters)
		if err != nil {
			t.Fatal(err)
		}
		got, err := m.ListFiltered(ctx, f)
		if err != nil || len(got) != 1 || got[0].ID != tc.want {
			t.Errorf("filter %v: %+v %v", tc.filters, got, err)
		}
	}
	if _, err := ParseListFilter([]string{"colour=red"}); !cerrdefs.IsInvalidArgument(err) {
		t.Errorf("unknown filter: %v", err)
	}

	// Pause: a command is refused until resume; resume: it runs.
	p, err := m.Pause(ctx, in.ID)
	if err != nil || p.State != "paused" {
		t.Fatalf("pause: %+v %v", p, err)
	}
	if _, _, err := m.Run(ctx, s, []string{"true"}); !errors.Is(err, ErrPaused) || !strings.Contains(err.Error(), "resume") {
		t.Fatalf("run in a paused sandbox: %v, want ErrPaused", err)
	}
	if got, _ := m.Get(ctx, in.ID); got.State != "paused" {
		t.Fatalf("the refused run changed the state to %s", got.State)
	}
	if _, err := m.Pause(ctx, in.ID); !cerrdefs.IsConflict(err) {
		t.Fatalf("pause twice: %v", err)
	}
	r, err := m.Resume(ctx, in.ID)
	if err != nil || r.State != "running" {
		t.Fatalf("resume: %+v %v", r, err)
	}
	if out, code, err := m.Run(ctx, s, []string{"echo", "back"}); err != nil || code != 0 || strings.TrimSpace(out) != "back" {
		t.Fatalf("run after resume: %q %d %v", out, code, err)
	}

	// Extend.
	e, err := m.Extend(ctx, in.ID, 3*time.Hour)
	if err != nil || e.ExpiresAt.Before(time.Now().Add(2*time.Hour)) {
		t.Fatalf("extend: %+v %v", e, err)
	}
	if _, err := m.Extend(ctx, in.ID, -time.Second); !cerrdefs.IsInvalidArgument(err) {
		t.Fatalf("extend by a negative TTL: %v", err)
	}
	if got, _ := m.Get(ctx, in.ID); !got.ExpiresAt.Equal(e.ExpiresAt) {
		t.Fatalf("a refused extend changed expiresAt: %s, want %s", got.ExpiresAt, e.ExpiresAt)
	}
}

// TestObjectTTLExpiry: a sandbox whose TTL passed is removed by ExpireDue
// (the daemon's expiry loop), one without a TTL is not.
func TestObjectTTLExpiry(t *testing.T) {
	m := newTestManager(t, nil)
	ctx := objectCtx(t)
	short, err := m.Create(ctx, Scope{AgentID: "ttl-a"}, CreateOptions{TTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	keep, err := m.Create(ctx, Scope{AgentID: "ttl-b"}, CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		gone, err := m.ExpireDue(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(gone) == 1 && gone[0].ID == short.ID {
			break
		}
		if len(gone) > 0 || time.Now().After(deadline) {
			t.Fatalf("expired: %+v", gone)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if _, err := m.Client().ContainerInspect(ctx, short.ID, client.ContainerInspectOptions{}); !cerrdefs.IsNotFound(err) {
		t.Fatalf("the expired sandbox's container: %v, want not found", err)
	}
	if _, err := m.Get(ctx, keep.ID); err != nil {
		t.Fatalf("the sandbox without a TTL: %v", err)
	}
}

// TestObjectDeleteWorkspace: delete keeps the workspace unless asked.
func TestObjectDeleteWorkspace(t *testing.T) {
	m := newTestManager(t, nil)
	ctx := objectCtx(t)
	for _, withWS := range []bool{false, true} {
		s := Scope{AgentID: "ws-" + map[bool]string{false: "keep", true: "drop"}[withWS]}
		in, err := m.Create(ctx, s, CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, code, err := m.Run(ctx, s, []string{"sh", "-c", "echo data > /workspace/f"}); err != nil || code != 0 {
			t.Fatalf("write: %d %v", code, err)
		}
		ws := m.Workspace(in)
		if _, err := os.Stat(filepath.Join(ws, "f")); err != nil {
			t.Fatalf("the workspace file on the host: %v", err)
		}
		if _, err := m.Delete(ctx, in.ID, withWS); err != nil {
			t.Fatal(err)
		}
		if _, err := m.Client().ContainerInspect(ctx, in.ID, client.ContainerInspectOptions{}); !cerrdefs.IsNotFound(err) {
			t.Fatalf("container after delete: %v", err)
		}
		_, err = os.Stat(filepath.Join(ws, "f"))
		if withWS && !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("delete with workspace left %s: %v", ws, err)
		}
		if !withWS && err != nil {
			t.Fatalf("delete without workspace removed it: %v", err)
		}
	}
	if _, err := m.Delete(ctx, "no-such-sandbox", true); !errors.Is(err, ErrNotFound) {
		t.Fatalf("delete unknown: %v", err)
	}
}

// TestObjectExplicitOnly: with sandbox.explicit a command does not create
// the sandbox; after Create it runs.
func TestObjectExplicitOnly(t *testing.T) {
	m := newTestManager(t, func(c *Config) { c.Explicit = true })
	ctx := objectCtx(t)
	s := Scope{AgentID: "explicit-a"}
	_, _, err := m.Run(ctx, s, []string{"true"})
	if !errors.Is(err, ErrNoSandbox) || !strings.Contains(err.Error(), "agent:explicit-a") || !strings.Contains(err.Error(), "sandbox create") {
		t.Fatalf("implicit run: %v, want an error naming the scope and how to create it", err)
	}
	if list, _ := m.List(ctx); len(list) != 0 {
		t.Fatalf("the refused run made %d sandboxes", len(list))
	}
	if _, err := m.Create(ctx, s, CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if out, code, err := m.Run(ctx, s, []string{"echo", "ok"}); err != nil || code != 0 || strings.TrimSpace(out) != "ok" {
		t.Fatalf("run after create: %q %d %v", out, code, err)
	}
}
