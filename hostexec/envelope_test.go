package hostexec

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandboxctl/sandboxctl/sessions/hostapi"
)

// sharedDir makes a directory that every uid may traverse (t.TempDir's
// parents are 0700), owned by owner (-1: root), removed at the end.
func sharedDir(t *testing.T, owner Identity) string {
	t.Helper()
	d, err := os.MkdirTemp("", "sbx-envelope-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(d) })
	if err := os.Chmod(d, 0o755); err != nil {
		t.Fatal(err)
	}
	if owner.UID > 0 {
		if err := os.Chown(d, owner.UID, owner.GID); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

// TestSecurityGatewaySecretsUnreadable replays finding 2 of issue 25: the
// ruleset granted all of ~/.config/git (git's credential store) and
// /etc/ssl (private keys under /etc/ssl/private). A 0600 credential file
// there must be unreadable to a gateway command, while git's configuration
// beside it stays readable.
func TestSecurityGatewaySecretsUnreadable(t *testing.T) {
	r := gatewayRunner(t)
	ws := sharedDir(t, DefaultIdentity)
	home := lookupEnv(r.environ, "HOME")
	gitDir := filepath.Join(home, ".config", "git")
	if err := os.MkdirAll(gitDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for p, data := range map[string]string{"credentials": "https://user:PLANTED-PASSWORD@example.com\n", "config": "[user]\n\tname = GIT-CONFIG-OK\n"} {
		mode := os.FileMode(0o644)
		if p == "credentials" {
			mode = 0o600
		}
		if err := os.WriteFile(filepath.Join(gitDir, p), []byte(data), mode); err != nil {
			t.Fatal(err)
		}
	}
	out, _ := runSpec(t, r, hostapi.StartSpec{Command: `cat "$HOME/.config/git/credentials"; echo; cat "$HOME/.config/git/config"`, Dir: ws, Confine: ws})
	if strings.Contains(out, "PLANTED-PASSWORD") {
		t.Fatalf("ATTACK WORKED: a gateway command read git's credential store: %q", out)
	}
	if !strings.Contains(out, "Permission denied") {
		t.Fatalf("reading the credential store was not refused by the kernel: %q", out)
	}
	if !strings.Contains(out, "GIT-CONFIG-OK") {
		t.Fatalf("git's configuration beside the credentials is no longer readable: %q", out)
	}
}


func gatewayRunner(t *testing.T) *Runner { return confinedRunner(t) }
