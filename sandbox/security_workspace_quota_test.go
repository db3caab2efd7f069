package sandbox

import (
	"strings"
	"testing"
)

// TestSecurityWorkspaceQuota replays issue 25 finding 14: one agent's dd
// filled the disk its neighbours write to. With sandbox.workspaceQuota 32m,
// agent A's dd stops with ENOSPC at its quota and agent B's write, after
// it, still succeeds; explain names the mechanism.
func TestSecurityWorkspaceQuota(t *testing.T) {
	requireDocker(t)
	m := newTestManager(t, func(c *Config) { c.WorkspaceQuota = "32m" })
	a, b := Scope{AgentID: "quota-a"}, Scope{AgentID: "quota-b"}
	for _, s := range []Scope{a, b} {
		t.Cleanup(func() {
			_ = m.Remove(ctxT(t), s)
			if err := m.ReleaseWorkspaceVolume(s); err != nil {
				t.Errorf("release %s: %v", s.AgentID, err)
			}
		})
	}
	out, code := run(t, m, a, "dd if=/dev/zero of=/workspace/fill bs=1M count=64 2>&1; echo dd=$?; stat -c %s /workspace/fill")
	if code != 0 || !strings.Contains(out, "No space left on device") || strings.Contains(out, "dd=0") {
		t.Fatalf("A's dd past its quota: %q (code %d), want ENOSPC", out, code)
	}
	lines := strings.Fields(out)
	size := lines[len(lines)-1]
	if len(size) == 0 || size[0] != '3' && size[0] != '2' || len(size) != 8 { // 2x,xxx,xxx..3x,xxx,xxx bytes
		t.Fatalf("A's file is %s bytes, want about its 32 MiB quota", size)
	}
	out, code = run(t, m, b, "head -c 4194304 /dev/urandom > /workspace/ok && stat -c %s /workspace/ok")
	if code != 0 || strings.TrimSpace(out) != "4194304" {
		t.Fatalf("B's write after A filled its quota: %q (code %d)", out, code)
	}
	ex, err := m.Explain(ctxT(t), a)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(ex.WorkspaceQuota, WorkspaceQuotaKind) || !strings.Contains(ex.WorkspaceQuota, "33554432 bytes") {
		t.Fatalf("explain: workspaceQuota %q, want the size and %q", ex.WorkspaceQuota, WorkspaceQuotaKind)
	}
}
