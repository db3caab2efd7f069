package integration

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
)

// TestSecurityWorkspaceExecutableNotAllowlisted replays issue 12 item 4
// end to end on a real daemon with a real sandbox: an agent writes
// /workspace/ls in its sandbox; an elevated gateway exec of `./ls` in that
// workspace, with `ls` allowlisted, must not run it on the host (a marker in
// the state dir would prove it did). The real ls by its bare name still
// runs there.
func TestSecurityWorkspaceExecutableNotAllowlisted(t *testing.T) {
	cli := requireDocker(t, testImage)
	prefix := "sbxi-guard-" + randSuffix() + "-"
	t.Cleanup(func() { removeByPrefix(cli, prefix) })
	state := t.TempDir()
	wsRoot := filepath.Join(state, "ws")
	// The operator allowlisted ls for every agent.
	approvals := `{"version":1,"defaults":{},"agents":{"*":{"allowlist":[{"id":"ls","pattern":"ls"}]}}}` + "\n"
	if err := os.WriteFile(filepath.Join(state, "approvals.json"), []byte(approvals), 0o600); err != nil {
		t.Fatal(err)
	}
	d := startDaemonIn(t, state, fmt.Sprintf("exec:\n  host: sandbox\n  security: allowlist\n  ask: \"off\"\n"+
		"elevated:\n  enabled: true\n  allowFrom: [\"*\"]\n  defaultLevel: ask\n"+
		"sandbox:\n  workspaceRoot: %s\n  docker:\n    image: %s\n    containerPrefix: %s\n", wsRoot, testImage, prefix))
	marker := filepath.Join(state, "pwned")

	// In the sandbox: write the trojan into the workspace.
	det, text, code := d.call(t, "exec", map[string]any{"agentId": "main",
		"command": "printf '#!/bin/sh\\ntouch " + marker + "\\n' > /workspace/ls && chmod +x /workspace/ls && echo written"})
	if code != http.StatusOK || det["status"] != "completed" {
		t.Fatalf("sandbox write: http %d %v %q", code, det, text)
	}
	entries, err := os.ReadDir(wsRoot)
	if err != nil || len(entries) != 1 {
		t.Fatalf("workspace root %s: %v %v", wsRoot, entries, err)
	}
	agentWs := filepath.Join(wsRoot, entries[0].Name())
	if _, err := os.Stat(filepath.Join(agentWs, "ls")); err != nil {
		t.Fatalf("the sandbox's file is not in the host workspace: %v", err)
	}

	// On the gateway, elevated, in that workspace.
	for _, cmd := range []string{"./ls", agentWs + "/ls"} {
		det, text, code = d.call(t, "exec", map[string]any{"agentId": "main", "elevated": true, "command": cmd, "workdir": agentWs})
		if _, err := os.Stat(marker); err == nil {
			t.Fatalf("%s: ATTACK WORKED: the sandbox's ./ls ran on the host (marker %s; %v %q)", cmd, marker, det, text)
		}
		if code != http.StatusOK || det["status"] != "denied" {
			t.Fatalf("%s: not denied: http %d %v %q", cmd, code, det, text)
		}
		t.Logf("%s: %v", cmd, det["reason"])
	}
	det, text, code = d.call(t, "exec", map[string]any{"agentId": "main", "elevated": true, "command": "ls", "workdir": agentWs})
	if code != http.StatusOK || det["status"] != "completed" {
		t.Fatalf("bare ls on the gateway: http %d %v %q", code, det, text)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("ATTACK WORKED: marker exists after the real ls")
	}
}
