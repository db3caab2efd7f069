package runtimecli

import (
	"slices"
	"testing"

	"github.com/sandboxctl/sandboxctl/sessions/config"
)

// The gateway's guard treats every directory a sandbox can write as
// untrusted (issue 12 item 4): the workspace root, the sandbox-owned
// workspaces and rw bind sources, not ro ones.
func TestSandboxWritableDirs(t *testing.T) {
	cfg := config.Default()
	cfg.Sandbox.WorkspaceRoot = "/srv/ws"
	cfg.Sandbox.Docker.Binds = []string{"/data/rw:/rw", "/data/rw2:/rw2:rw", "/data/ro:/ro:ro", "/data/roz:/roz:ro,z"}
	got, err := sandboxWritableDirs(cfg, "/state")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"/state/sandboxes", "/srv/ws", "/data/rw", "/data/rw2"}
	if !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
}
