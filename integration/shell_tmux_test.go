package integration

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSandboxShellInTmux drives `sandboxctl sandbox shell` in a real
// terminal (tmux): the prompt appears, the terminal size and a resize of the
// tmux window reach the shell, the shell's exit code comes back, and the
// terminal settings are restored afterwards.
func TestSandboxShellInTmux(t *testing.T) {
	requireDocker(t, testImage)
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Fatalf("tmux not installed (scripts/toolchain.sh installs it): %v", err)
	}
	bin := buildBinary(t, "sandboxctl")
	dir := t.TempDir()
	prefix := "sbxi-shell-" + randSuffix() + "-"
	cfgPath := filepath.Join(dir, "sandboxctl.yaml")
	cfg := fmt.Sprintf("sandbox:\n  workspaceRoot: %s\n  docker:\n    image: %s\n    containerPrefix: %s\n", filepath.Join(dir, "ws"), testImage, prefix)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(dir, "state")
	base := []string{bin, "--state", state, "--config", cfgPath}
	t.Cleanup(func() {
		_ = exec.Command(base[0], append(base[1:], "sandbox", "rm", "--agent", "tmux")...).Run()
	})

	session := "sbxshell" + randSuffix()
	script := filepath.Join(dir, "run.sh")
	marker := filepath.Join(dir, "done")
	body := fmt.Sprintf(`stty -g > %[1]s/before
%[2]s sandbox shell --agent tmux
echo "EXITED:$?" > %[3]s.tmp
stty -g > %[1]s/after
mv %[3]s.tmp %[3]s
sleep 60
`, dir, strings.Join(base, " "), marker)
	if err := os.WriteFile(script, []byte(body), 0o700); err != nil {
		t.Fatal(err)
	}
	tmux := func(args ...string) string {
		out, err := exec.Command("tmux", args...).CombinedOutput()
		if err != nil {
			t.Fatalf("tmux %v: %v: %s", args, err, out)
		}
		return string(out)
	}
	tmux("new-session", "-d", "-s", session, "-x", "120", "-y", "30", "sh "+script)
	t.Cleanup(func() { _ = exec.Command("tmux", "kill-session", "-t", session).Run() })

	screen := func() string { return tmux("capture-pane", "-p", "-t", session) }
	waitFor := func(what string, ok func(string) bool) string {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			s := screen()
			if ok(s) {
				return s
			}
			if time.Now().After(deadline) {
				t.Fatalf("waiting for %s; screen:\n%s", what, s)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	// The sandbox user is not root by default: ash prompts with "$".
	waitFor("the prompt", func(s string) bool { return strings.Contains(s, "/workspace $") || strings.Contains(s, "/workspace #") })

	tmux("send-keys", "-t", session, "echo SIZE=$(stty size)", "Enter")
	waitFor("the initial size 30 120", func(s string) bool { return strings.Contains(s, "SIZE=30 120") })

	tmux("resize-window", "-t", session, "-x", "100", "-y", "40")
	time.Sleep(300 * time.Millisecond)
	tmux("send-keys", "-t", session, "echo RESIZED=$(stty size)", "Enter")
	waitFor("the resized size 40 100", func(s string) bool { return strings.Contains(s, "RESIZED=40 100") })

	tmux("send-keys", "-t", session, "exit 3", "Enter")
	deadline := time.Now().Add(30 * time.Second)
	var got []byte
	for {
		if b, err := os.ReadFile(marker); err == nil {
			got = b
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("shell did not exit; screen:\n%s", screen())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if strings.TrimSpace(string(got)) != "EXITED:3" {
		t.Fatalf("exit status line %q, want EXITED:3", got)
	}
	before, _ := os.ReadFile(filepath.Join(dir, "before"))
	after, _ := os.ReadFile(filepath.Join(dir, "after"))
	if len(before) == 0 || !bytes.Equal(before, after) {
		t.Fatalf("terminal not restored:\nbefore %s\nafter  %s", before, after)
	}
	if s := screen(); strings.Contains(s, "\x00") {
		t.Fatalf("NUL on screen:\n%q", s)
	}
}
