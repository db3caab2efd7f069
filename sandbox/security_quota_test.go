package sandbox

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
)

// TestSecuritySandboxQuota replays issue 25 finding 15 at a small scale:
// with scope session one agent made a sandbox per invented session key.
// With sandbox.maxPerAgent 2 and sandbox.max 3, four concurrent keys of
// mallory make exactly two sandboxes and two refusals naming the cap,
// another agent gets the last slot, the next is refused by the global cap,
// and nothing is created for a refused call.
func TestSecuritySandboxQuota(t *testing.T) {
	requireDocker(t)
	m := newTestManager(t, func(c *Config) { c.Scope = "session"; c.MaxPerAgent = 2; c.Max = 3 })
	ctx := ctxT(t)

	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = m.Ensure(ctx, Scope{AgentID: "mallory", SessionKey: fmt.Sprintf("k%d", i)})
		}()
	}
	wg.Wait()
	ok, refused := 0, 0
	for i, err := range errs {
		switch {
		case err == nil:
			ok++
		case errors.Is(err, ErrSandboxQuota) && cerrdefs.IsResourceExhausted(err) && strings.Contains(err.Error(), "sandbox.maxPerAgent"):
			refused++
		default:
			t.Fatalf("mallory k%d: unexpected error %v", i, err)
		}
	}
	if ok != 2 || refused != 2 {
		t.Fatalf("4 concurrent sandboxes of one agent: %d made, %d refused; want 2 and 2", ok, refused)
	}
	countOf := func() map[string]int {
		list, err := m.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		n := map[string]int{}
		for _, in := range list {
			n[in.AgentID]++
		}
		return n
	}
	if n := countOf(); n["mallory"] != 2 || len(n) != 1 {
		t.Fatalf("containers after the refusals: %v, want mallory:2 only", n)
	}
	if _, err := m.Ensure(ctx, Scope{AgentID: "bob", SessionKey: "main"}); err != nil {
		t.Fatalf("bob's first sandbox: %v", err)
	}
	_, err := m.Ensure(ctx, Scope{AgentID: "carol", SessionKey: "main"})
	if !errors.Is(err, ErrSandboxQuota) || !strings.Contains(err.Error(), "sandbox.max)") {
		t.Fatalf("a 4th sandbox in all: err %v, want ErrSandboxQuota naming sandbox.max", err)
	}
	if n := countOf(); n["carol"] != 0 || n["mallory"]+n["bob"] != 3 {
		t.Fatalf("containers: %v, want mallory:2 bob:1", n)
	}
	// An existing sandbox is still reached at the cap, and removing one frees a slot.
	for _, in := range mustList(t, m) {
		if in.AgentID != "mallory" {
			continue
		}
		if _, err := m.Ensure(ctx, Scope{AgentID: "mallory", SessionKey: in.SessionKey}); err != nil {
			t.Fatalf("mallory's existing sandbox %s at the cap: %v", in.Name, err)
		}
		if err := m.Remove(ctx, Scope{AgentID: "mallory", SessionKey: in.SessionKey}); err != nil {
			t.Fatal(err)
		}
		break
	}
	if _, err := m.Ensure(ctx, Scope{AgentID: "carol", SessionKey: "main"}); err != nil {
		t.Fatalf("carol after a removal: %v", err)
	}
}

func mustList(t *testing.T, m *Manager) []Info {
	t.Helper()
	list, err := m.List(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	return list
}
