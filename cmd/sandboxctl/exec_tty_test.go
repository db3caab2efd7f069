package main_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestExecTTYInTmux runs `exec -it` in a real terminal (tmux): the command
// gets a PTY of the window's size (not the tool's 120x30), then the new
// size after the window is resized (SIGWINCH), reads what is typed, and
// sandboxctl exits with its code, leaving the terminal as it was.
func TestExecTTYInTmux(t *testing.T) {
	tmux, err := exec.LookPath("tmux")
	if err != nil {
		t.Fatalf("tmux is required for this test (scripts/toolchain.sh installs it): %v", err)
	}
	e := newEnv(t)
	dir := t.TempDir()
	exitFile := filepath.Join(dir, "exit")
	sock := filepath.Join(dir, "tmux.sock")
	script := `stty size; read a; stty size; read b; echo "got:$a:$b"; exit 5`
	cmdline := fmt.Sprintf("%s --state %s --config %s exec -it -- %s; echo $? > %s; stty -a > %s; sleep 30",
		binary, e.state, e.config, quote(t, script), exitFile, filepath.Join(dir, "stty"))
	tm := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(tmux, append([]string{"-S", sock}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("tmux %v: %v: %s", args, err, out)
		}
		return string(out)
	}
	tm("new-session", "-d", "-x", "100", "-y", "40", "sh", "-c", cmdline)
	t.Cleanup(func() { _ = exec.Command(tmux, "-S", sock, "kill-server").Run() })
	waitPane := func(want string) string {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			pane := tm("capture-pane", "-p")
			if strings.Contains(pane, want) {
				return pane
			}
			if time.Now().After(deadline) {
				t.Fatalf("%q never appeared; pane:\n%s", want, pane)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitPane("40 100")
	tm("resize-window", "-x", "90", "-y", "25")
	tm("send-keys", "hello", "Enter")
	waitPane("25 90")
	tm("send-keys", "world", "Enter")
	waitPane("got:hello:world")
	if got := waitExitCode(t, exitFile, 30*time.Second, func() string { return "; pane:\n" + tm("capture-pane", "-p") }); got != "5" {
		t.Errorf("exit code %s, want 5", got)
	}
	// The terminal is back in cooked mode with echo (stty -a runs after
	// the exit code was written).
	var st []byte
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err = os.ReadFile(filepath.Join(dir, "stty"))
		if err == nil && strings.Contains(string(st), "icanon") && strings.Contains(string(st), "echo") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("stty -a after exec -it: %q %v", st, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(string(st), " icanon") || !strings.Contains(string(st), " echo ") {
		t.Errorf("terminal after exec -it: %q", st)
	}
}
