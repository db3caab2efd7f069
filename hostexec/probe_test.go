package hostexec

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A login shell that outlives the probe's deadline gets SIGTERM first, so
// its profile scripts can release what they hold (pyenv's rehash lock, for
// one) before anything is killed.
func TestLoginPathProbeTerminatesGently(t *testing.T) {
	dir := t.TempDir()
	mark := filepath.Join(dir, "cleaned")
	shell := filepath.Join(dir, "slowshell")
	script := "#!/bin/sh\ntrap 'echo cleaned > " + mark + "; exit 1' TERM\nsleep 30 &\nwait\n"
	if err := os.WriteFile(shell, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := probeLoginPath(ctx, shell, []string{"PATH=" + os.Getenv("PATH")})
	if err == nil {
		t.Fatal("a shell that never printed PATH was accepted")
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("the probe took %s", el)
	}
	data, rerr := os.ReadFile(mark)
	if rerr != nil || strings.TrimSpace(string(data)) != "cleaned" {
		t.Fatalf("the login shell was not given SIGTERM to clean up: %v %q", rerr, data)
	}
}
