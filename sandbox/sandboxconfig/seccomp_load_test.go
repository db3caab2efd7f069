package sandboxconfig_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandboxctl/sandboxctl/sessions/config"
)

// TestSecuritySeccompAlwaysTrueRuleRefusedAtLoad replays issue 25 finding
// 6 through the config file the daemon loads: a profile allowing unshare,
// setns and mount behind an always-true argument filter was accepted (and
// `unshare -Ur` then worked in the sandbox); now loading it fails, naming
// the setting and the syscalls.
func TestSecuritySeccompAlwaysTrueRuleRefusedAtLoad(t *testing.T) {
	profile := `{"defaultAction":"SCMP_ACT_ERRNO","syscalls":[` +
		`{"names":["read","write","exit_group","clone","execve"],"action":"SCMP_ACT_ALLOW"},` +
		`{"names":["unshare","setns","mount"],"action":"SCMP_ACT_ALLOW","args":[{"index":0,"value":0,"op":"SCMP_CMP_GE"}]}]}`
	path := filepath.Join(t.TempDir(), "sandboxctl.yaml")
	yaml := "sandbox:\n  docker:\n    seccompProfile: '" + profile + "'\n"
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := config.Load(path)
	if err == nil {
		t.Fatal("a profile allowing unshare, setns and mount behind an always-true filter was accepted")
	}
	if !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), "sandbox.docker.seccompProfile") ||
		!strings.Contains(err.Error(), "clone, mount, setns, unshare") {
		t.Fatalf("want a refusal of sandbox.docker.seccompProfile naming clone, mount, setns, unshare; got %v", err)
	}
}
