package main_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandboxctl/sandboxctl/internal/dockertest"
	"github.com/sandboxctl/sandboxctl/sandbox/sandboxconfig"
)

// TestSecretsThroughTheDaemon: a daemon whose secret's variable is unset
// refuses to start (exit 2, naming the secret); with it set, a sandbox
// command sees the placeholder, and output that happens to hold the real
// value (printed in two halves, so no request carries it) shows the
// placeholder instead.
func TestSecretsThroughTheDaemon(t *testing.T) {
	dockertest.Require(t, sandboxconfig.DefaultConfig().Docker.Image)
	e := newEnv(t)
	const first, second = "cli-real-secret-", "value-0123456789"
	cfg := fmt.Sprintf(`exec:
  host: sandbox
  security: full
  ask: "off"
`+legacyGateway+`sandbox:
  workspaceRoot: %s
  network:
    egress: allowlist
    allow: [{domain: api.bound.test}]
  secrets:
    api: {fromEnv: SBXT_CLI_SECRET, hosts: [api.bound.test], env: API_TOKEN}
`, filepath.Join(e.state, "ws"))
	if err := os.WriteFile(e.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SBXT_CLI_SECRET", "")
	r := e.run(t, "serve")
	if r.code != 2 || !strings.Contains(r.stderr, "sandbox.secrets.api") || !strings.Contains(r.stderr, "SBXT_CLI_SECRET") {
		t.Fatalf("serve without the secret's variable: exit %d, stderr %q; want exit 2 naming the secret", r.code, r.stderr)
	}
	t.Setenv("SBXT_CLI_SECRET", first+second)
	agent := fmt.Sprintf("secrets-%d", time.Now().UnixNano())
	t.Cleanup(func() { e.run(t, "sandbox", "rm", "--agent", agent) })
	r = e.run(t, "exec", "--agent", agent, "--", "echo token=$API_TOKEN; printf %s "+first+"; printf '%s\\n' "+second)
	out := r.stdout + r.stderr
	if r.code != 0 || strings.Contains(out, first+second) {
		t.Fatalf("exit %d; the real value reached the output:\n%s", r.code, out)
	}
	if strings.Count(out, "SANDBOXCTL_PLACEHOLDER_api_") != 2 {
		t.Errorf("want the placeholder in the env and in place of the printed value:\n%s", out)
	}
	// The daemon drops the variable once read: no command on the gateway
	// (nor anything else it starts) inherits the value.
	e.run(t, "sandbox", "rm", "--agent", agent)
	e.stopDaemon(t)
	if err := os.WriteFile(e.config, []byte(strings.Replace(cfg, "host: sandbox", "host: gateway", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	r = e.run(t, "exec", "--agent", agent, "--", "env | grep -c SBXT_CLI_SECRET=; cat /proc/$PPID/environ | tr '\\0' '\\n' | grep -c SBXT_CLI_SECRET=")
	if strings.TrimSpace(r.stdout) != "0\n0" {
		t.Errorf("a gateway command inherited the secret's variable (exit %d):\n%s%s", r.code, r.stdout, r.stderr)
	}
}
