package sandbox

import (
	"strings"
	"testing"
)

// TestSecuritySandboxScopedByAgentAndKey replays issue 12 #2 for
// sandboxes: with scope "session", agent mallory using agent alice's
// session key "main" must get a container and workspace of her own, and
// never see what alice wrote.
func TestSecuritySandboxScopedByAgentAndKey(t *testing.T) {
	requireDocker(t)
	m := newTestManager(t, func(c *Config) { c.Scope = "session" })
	alice := Scope{AgentID: "alice", SessionKey: "main"}
	mallory := Scope{AgentID: "mallory", SessionKey: "main"}
	if out, code := run(t, m, alice, "echo alice-secret > /workspace/secret && echo ok"); code != 0 || !strings.Contains(out, "ok") {
		t.Fatalf("alice's write: %d %q", code, out)
	}
	out, code := run(t, m, mallory, "cat /workspace/secret 2>&1; echo exit=$?")
	if strings.Contains(out, "alice-secret") || !strings.Contains(out, "exit=1") {
		t.Fatalf("mallory, with alice's session key, reads alice's workspace: %q (code %d)", out, code)
	}
	a, err := m.Ensure(ctxT(t), alice)
	if err != nil {
		t.Fatal(err)
	}
	b, err := m.Ensure(ctxT(t), mallory)
	if err != nil {
		t.Fatal(err)
	}
	if a.ID == b.ID || a.Name == b.Name {
		t.Fatalf("alice and mallory share container %s", a.Name)
	}
}
