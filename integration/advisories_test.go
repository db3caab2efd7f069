package integration

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestAdvisoriesThroughDaemon replays the published bypasses of
// reference/advisories.md that concern the exec flow against a real daemon
// on the gateway host behind its guard (security allowlist, ask off, so a
// refusal is immediate). Each command would create a marker file if any
// part of it ran; the marker must not exist afterwards. The analyser's own
// corpus (hostexec/guard) covers the same lines at the parse level.
func TestAdvisoriesThroughDaemon(t *testing.T) {
	d := startDaemon(t, "exec:\n  host: gateway\n  security: allowlist\n  ask: \"off\"\n")
	dir := t.TempDir()
	tests := []struct {
		name, command string
	}{
		{"command substitution in double quotes", `echo "output: $(touch MARKER)"`},
		{"backticks in double quotes", "echo \"output: `touch MARKER`\""},
		{"line continuation inside double quotes", "echo \"$\\\n(touch MARKER)\""},
		{"unquoted heredoc with substitution", "cat <<EOF\n$(touch MARKER)\nEOF"},
		{"env -S split string", `env -S 'sh -c "touch MARKER"'`},
		{"env BASH_ENV into bash", `/usr/bin/env BASH_ENV=./evil bash -lc 'echo SAFE; touch MARKER'`},
		{"./sh wrapper spoof", `./sh -c 'touch MARKER'`},
		{"sh -lc $0 carrier", `sh -lc '$0 "$@"' touch MARKER`},
		{"xargs carrier", `echo MARKER | xargs touch`},
		{"pipeline into an interpreter", `echo "require('fs').writeFileSync('MARKER','')" | node`},
		{"process substitution", `cat <(touch MARKER)`},
		{"background job", `touch MARKER &`},
		{"subshell", `(touch MARKER)`},
		{"assignment prefix", `LD_PRELOAD=/tmp/x.so touch MARKER`},
		{"sort compress-prog prefix", `sort --compress-prog=sh -S1 /dev/null; touch MARKER`},
		{"redirect to a file", `echo x > MARKER`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			work := filepath.Join(dir, strings.ReplaceAll(tt.name, " ", "_"))
			if err := os.MkdirAll(work, 0o755); err != nil {
				t.Fatal(err)
			}
			det, text, code := d.call(t, "exec", map[string]any{"command": tt.command, "workdir": work})
			if code != http.StatusOK || det["status"] != "denied" {
				t.Fatalf("not denied: http %d, %v, %q", code, det, text)
			}
			if reason, _ := det["reason"].(string); reason == "" {
				t.Errorf("denial without a reason: %v", det)
			}
			time.Sleep(100 * time.Millisecond)
			if _, err := os.Stat(filepath.Join(work, "MARKER")); err == nil {
				t.Fatal("MARKER exists: part of the refused command ran")
			}
		})
	}

	// Env advisories: blocked keys in a request are refused before anything
	// starts, with the key and the rule named.
	for _, kv := range [][2]string{
		{"LD_PRELOAD", "/tmp/malware.so"}, {"NODE_OPTIONS", "--require /tmp/x.js"}, {"GLIBC_TUNABLES", "glibc.malloc.x=1"},
		{"JAVA_TOOL_OPTIONS", "-javaagent:x"}, {"GIT_SSH_COMMAND", "evil.sh"}, {"PATH", "/tmp/evil"},
	} {
		_, text, code := d.call(t, "exec", map[string]any{"command": "true", "env": map[string]string{kv[0]: kv[1]}})
		if code != http.StatusBadRequest || !strings.Contains(text, kv[0]) {
			t.Errorf("env %s: http %d %q", kv[0], code, text)
		}
	}
}

// TestInheritedHostileEnvDropped: a daemon started with hostile loader and
// interpreter variables in its own environment does not pass them on.
func TestInheritedHostileEnvDropped(t *testing.T) {
	for k, v := range map[string]string{"NODE_OPTIONS": "--require=/tmp/evil.js", "LD_PRELOAD": "/tmp/evil.so",
		"GLIBC_TUNABLES": "glibc.x=1", "BASH_ENV": "/tmp/evil.sh", "SANDBOXCTL_BENIGN": "kept"} {
		t.Setenv(k, v)
	}
	d := startDaemon(t, gatewayFull)
	det, text, _ := d.call(t, "exec", map[string]any{"command": "env"})
	if det["status"] != "completed" {
		t.Fatalf("%v %q", det, text)
	}
	for _, k := range []string{"NODE_OPTIONS", "LD_PRELOAD", "GLIBC_TUNABLES", "BASH_ENV"} {
		if strings.Contains(text, k+"=") {
			t.Errorf("%s reached the command", k)
		}
	}
	if !strings.Contains(text, "SANDBOXCTL_BENIGN=kept") {
		t.Errorf("benign variable dropped too: %q", text)
	}
}
