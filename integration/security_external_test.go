package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// TestSecurityExternalDirectorySymlinkFlip replays issue 12 item 9 on a real
// daemon (its host supervisor runs the gateway's commands): the gateway's
// workspace (exec.cwd) is a directory another process writes, as a sandbox
// writes its workspace. That writer flips a symlink `link` between a file
// inside the workspace and a secret outside it, while the agent runs the
// allowlisted `cat link` 100 times. The guard resolves `link` and lets the
// command run only when it points inside; the command then opens it by
// name. The secret must never reach the output. Some runs must print the
// inside file (the check does not simply refuse everything); the others
// are denied by the check or refused by the kernel (Landlock: the gateway
// runs a command that passed the check confined to its workspace).
func TestSecurityExternalDirectorySymlinkFlip(t *testing.T) {
	state := t.TempDir()
	ws := filepath.Join(t.TempDir(), "workspace")
	outside := t.TempDir()
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	const secretText, insideText = "TOP-SECRET-9f3c", "inside-file-ok"
	secret := filepath.Join(outside, "secret")
	inside := filepath.Join(ws, "inside.txt")
	if err := os.WriteFile(secret, []byte(secretText+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(inside, []byte(insideText+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	approvals := `{"version":1,"defaults":{},"agents":{"*":{"allowlist":[{"id":"cat","pattern":"cat"},{"id":"cp","pattern":"cp"},{"id":"ls","pattern":"ls"}]}}}` + "\n"
	if err := os.WriteFile(filepath.Join(state, "approvals.json"), []byte(approvals), 0o600); err != nil {
		t.Fatal(err)
	}
	d := startDaemonIn(t, state, fmt.Sprintf("exec:\n  host: gateway\n  security: allowlist\n  ask: \"off\"\n  cwd: %s\n", ws))

	link := filepath.Join(ws, "link")
	if err := os.Symlink(inside, link); err != nil {
		t.Fatal(err)
	}
	// The concurrent writer: atomically replaces link (symlink + rename)
	// with one pointing out, then one pointing in, until the runs end.
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	flips := 0
	go func() {
		defer wg.Done()
		tmp := filepath.Join(ws, ".link.tmp")
		for i := 0; ctx.Err() == nil; i++ {
			target := inside
			if i%2 == 0 {
				target = secret
			}
			_ = os.Remove(tmp)
			if err := os.Symlink(target, tmp); err != nil {
				continue
			}
			if os.Rename(tmp, link) == nil {
				flips++
			}
		}
	}()

	// 100 tries at least, and more (up to 2000) until one printed the
	// inside file: on a busy machine the flips may win every early try,
	// and a test whose every try was denied proves nothing.
	tries := 0
	leaked, printed, denied, refused := 0, 0, 0, 0
	var firstLeak, other string
	for ; tries < 100 || printed == 0 && tries < 2000; tries++ {
		det, text, code := d.call(t, "exec", map[string]any{"agentId": "main", "command": "cat link"})
		switch {
		case strings.Contains(text, secretText):
			leaked++
			if firstLeak == "" {
				firstLeak = fmt.Sprintf("http %d %v %q", code, det, text)
			}
		case det["status"] == "denied":
			denied++
		case strings.Contains(text, insideText):
			printed++
		case strings.Contains(text, "link: Permission denied"):
			refused++ // the kernel refused the open: confined
		default:
			other = fmt.Sprintf("http %d %v %q", code, det, text)
		}
	}
	stop()
	wg.Wait()
	t.Logf("%d tries: %d printed the inside file, %d denied by the check, %d refused by the kernel at open, %d leaked the secret (%d flips)",
		tries, printed, denied, refused, leaked, flips)
	if leaked > 0 {
		t.Fatalf("ATTACK WORKED: the secret outside the workspace was printed in %d of %d tries; first: %s", leaked, tries, firstLeak)
	}
	if other != "" {
		t.Fatalf("a try ended otherwise: %s", other)
	}
	if printed == 0 {
		t.Fatalf("no try printed the inside file (%d denied): the test proves nothing", denied)
	}

	// Confined commands still work in the workspace...
	det, text, _ := d.call(t, "exec", map[string]any{"agentId": "main", "command": "cp inside.txt copy.txt && cat copy.txt"})
	if det["status"] != "completed" || !strings.Contains(text, insideText) {
		t.Fatalf("confined cp + cat in the workspace: %v %q", det, text)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "copy.txt")); err != nil || !strings.Contains(string(b), insideText) {
		t.Fatalf("copy.txt: %q %v", b, err)
	}
	// ... and a line the check had no say in runs as before: the
	// allowlisted ls lists the outside directory.
	det, text, _ = d.call(t, "exec", map[string]any{"agentId": "main", "command": "ls " + outside})
	if det["status"] != "completed" || !strings.Contains(text, "secret") {
		t.Fatalf("unconfined ls of an outside directory: %v %q", det, text)
	}
}

// TestSecurityExternalDirectoryUnanalysableLine replays an agent that
// steers around the external-directory check under security full with ask
// on-miss: `cat /outside/secret` asks, but the same read spelled with a
// glob, a tilde or a variable cannot be analysed, so the check sees no path
// — and the line ran at once, unconfined, printing the secret. Such a line
// must be approved as shown, like an unanalysable line in allowlist mode.
func TestSecurityExternalDirectoryUnanalysableLine(t *testing.T) {
	state := t.TempDir()
	ws := filepath.Join(t.TempDir(), "workspace")
	outside := t.TempDir()
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	const secretText = "TOP-SECRET-unanalysable"
	secret := filepath.Join(outside, "secret")
	if err := os.WriteFile(secret, []byte(secretText+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d := startDaemonIn(t, state, fmt.Sprintf("exec:\n  host: gateway\n  security: full\n  ask: on-miss\n  cwd: %s\n", ws))
	for _, cmd := range []string{
		"cat " + secret,                // analysable: asks
		"cat " + outside + "/secre?",   // a glob
		"S=" + secret + "; cat \"$S\"", // a variable
		"cat < " + secret,              // a redirect
	} {
		det, text, code := d.call(t, "exec", map[string]any{"agentId": "main", "command": cmd})
		if strings.Contains(text, secretText) {
			t.Fatalf("ATTACK WORKED: %q ran without approval and printed the secret outside the workspace: http %d %v %q", cmd, code, det, text)
		}
		if det["status"] != "approval-pending" {
			t.Fatalf("%q: want approval-pending, got http %d %v %q", cmd, code, det, text)
		}
	}
	// A line inside the workspace that the analysis accepts still runs.
	if err := os.WriteFile(filepath.Join(ws, "in.txt"), []byte("inside-ok\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	det, text, _ := d.call(t, "exec", map[string]any{"agentId": "main", "command": "cat in.txt"})
	if det["status"] != "completed" || !strings.Contains(text, "inside-ok") {
		t.Fatalf("cat in.txt: %v %q", det, text)
	}
}
