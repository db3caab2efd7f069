package sessions_test

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxctl/sandboxctl/api"

	"github.com/sandboxctl/sandboxctl/hostexec"
	"github.com/sandboxctl/sandboxctl/sessions"
	"github.com/sandboxctl/sandboxctl/sessions/config"
	"github.com/sandboxctl/sandboxctl/vocab"
)

// realGatewayManager is a Manager over the real gateway host (this machine),
// security full, ask off, with edit applied to the config.
func realGatewayManager(t *testing.T, edit func(*config.File)) *sessions.Manager {
	t.Helper()
	r, err := hostexec.NewRunner(context.Background(), hostexec.Options{
		Shell:   "/bin/sh",
		Environ: []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + t.TempDir(), "LANG=C.UTF-8"},
		Logf:    t.Logf,
	})
	if err != nil {
		t.Fatalf("hostexec.NewRunner: %v", err)
	}
	cfg := config.Default()
	cfg.Exec.Host, cfg.Exec.Security, cfg.Exec.Ask = "gateway", "full", "off"
	if edit != nil {
		edit(&cfg)
	}
	m, err := sessions.New(sessions.Options{
		Config: cfg,
		Hosts:  map[vocab.Host]sessions.Host{"gateway": sessions.NewGatewayHost(r, t.TempDir())},
		Logf:   t.Logf,
		Getenv: func(string) string { return "" },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := m.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return m
}

func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

// A foreground command that leaves a background child holding its stdout
// must not hang until the yield window (advisory: `nohup sleep 600 | cat &`).
func TestRealGatewayBackgroundChildDoesNotHang(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	m := realGatewayManager(t, nil)
	for _, cmd := range []string{"echo hi; sleep 600 &", "echo hi; nohup sleep 600 | cat &"} {
		start := time.Now()
		r, err := m.Exec(context.Background(), api.ExecParams{Command: cmd, YieldMs: new(float64(60000))})
		if err != nil {
			t.Fatal(err)
		}
		if r.Details.Status != api.StatusCompleted || !strings.Contains(r.Content[0].Text, "hi") {
			t.Fatalf("%q: %v", cmd, r.Details)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Fatalf("%q took %s", cmd, d)
		}
	}
}

// A real flood of output keeps only the caps; log reports the truncation.
func TestRealGatewayFloodCapped(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	m := realGatewayManager(t, nil)
	r, err := m.Exec(context.Background(), api.ExecParams{
		Command: "head -c 30000000 /dev/zero | tr '\\0' a; echo; echo END", YieldMs: new(float64(60000)),
	})
	if err != nil {
		t.Fatal(err)
	}
	agg := *r.Details.Aggregated
	if r.Details.Status != api.StatusCompleted || !strings.HasPrefix(agg, "[... 29800") || !strings.HasSuffix(agg, "a\nEND\n") {
		t.Fatalf("status %v, aggregated %.60q...%q", r.Details.Status, agg, agg[max(0, len(agg)-10):])
	}
}

// Close ends every running session's process: no orphans.
func TestRealGatewayCloseKills(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	m := realGatewayManager(t, nil)
	var pids []int
	for range 3 {
		r, err := m.Exec(context.Background(), api.ExecParams{Command: "sleep 600", Background: true})
		if err != nil {
			t.Fatal(err)
		}
		pids = append(pids, *r.Details.PID)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := m.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids {
		if alive(pid) {
			t.Errorf("pid %d still alive after Close", pid)
		}
	}
}

// Scoping holds with real processes, and a PTY session answers DSR.
func TestRealGatewayPTYAndScope(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	m := realGatewayManager(t, nil)
	// The shell asks for the cursor position and reads the answer.
	r, err := m.Exec(context.Background(), api.ExecParams{
		Command:    `printf 'ask\033[6n'; stty -echo raw; ans=$(dd bs=1 count=6 2>/dev/null | od -An -c | tr -d ' \n'); stty sane; printf '\ngot:%s\n' "$ans"`,
		PTY:        true,
		YieldMs:    new(float64(20000)),
		SessionKey: "mine",
	})
	if err != nil {
		t.Fatal(err)
	}
	out := r.Content[0].Text
	if r.Details.Status != api.StatusCompleted || strings.Contains(out, "[6n") || !strings.Contains(out, `got:033[1;1R`) {
		t.Fatalf("pty DSR: %q %v", out, r.Details)
	}
	r, err = m.Exec(context.Background(), api.ExecParams{Command: "sleep 600", Background: true, SessionKey: "mine"})
	if err != nil {
		t.Fatal(err)
	}
	id := r.Details.SessionID
	got, _ := m.Process(context.Background(), api.ProcessParams{Action: "kill", SessionID: id, SessionKey: "theirs"})
	if got.Content[0].Text != "No session found for "+id {
		t.Fatalf("foreign kill: %q", got.Content[0].Text)
	}
	got, _ = m.Process(context.Background(), api.ProcessParams{Action: "kill", SessionID: id, SessionKey: "mine"})
	if got.Details.Status != api.StatusFailed || alive(*r.Details.PID) {
		t.Fatalf("kill: %v", got.Details)
	}
}
