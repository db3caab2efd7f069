package sessions

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandboxctl/sandboxctl/api"

	cerrdefs "github.com/containerd/errdefs"

	"github.com/sandboxctl/sandboxctl/hostexec"
	"github.com/sandboxctl/sandboxctl/sessions/config"
	"github.com/sandboxctl/sandboxctl/vocab"
)

// Issue 25 finding 13: 300 background sessions printing emoji took the
// daemon from 23 to 612 MiB, and finished sessions were kept 30 min with no
// cap. These tests replay it on the real gateway host (real processes) at a
// small scale.

func newQuotaGateway(t *testing.T, spillDir string, lim config.SessionLimits) *Manager {
	t.Helper()
	r, err := hostexec.NewRunner(context.Background(), hostexec.Options{Shell: "/bin/sh",
		Environ: []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + t.TempDir(), "LANG=C.UTF-8"}, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.Exec.Host, cfg.Exec.Security, cfg.Exec.Ask = "gateway", "full", "off"
	cfg.Limits.Sessions = lim
	m, err := New(Options{Config: cfg, Hosts: map[vocab.Host]Host{"gateway": NewGatewayHost(r, t.TempDir())},
		SpillDir: spillDir, Logf: t.Logf, Getenv: func(string) string { return "" }})
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

func bgExec(t *testing.T, m *Manager, agent, cmd string) (api.Result, error) {
	t.Helper()
	return m.Exec(context.Background(), api.ExecParams{Command: cmd, AgentID: agent, Background: true})
}

func waitFinished(t *testing.T, m *Manager, agent, id string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		s := m.lookup(id, scopeKey(agent, ""))
		if s == nil {
			t.Fatalf("session %s is gone", id)
		}
		select {
		case <-s.done:
			return
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("session %s still running", id)
		}
	}
}

// A finished background session's output is on disk, not in the heap, and
// every byte of it is still delivered by log and poll.
func TestSecuritySessionOutputSpilledToDisk(t *testing.T) {
	const lines = 20000 // "😀 n\n": about 200 KB, 150k characters (under maxOutputChars)
	cmd := `i=0; while [ $i -lt 20000 ]; do echo "😀 $i"; i=$((i+1)); done`
	run := func(spill string) (*Manager, string) {
		m := newQuotaGateway(t, spill, config.SessionLimits{})
		r, err := bgExec(t, m, "a", cmd)
		if err != nil {
			t.Fatal(err)
		}
		id := r.Details.SessionID
		waitFinished(t, m, "a", id)
		return m, id
	}
	// Without a spill directory (the old behaviour) the output stays in memory.
	inMem, _ := run("")
	if held := inMem.heldOutputBytes(); held < 100<<10 {
		t.Fatalf("baseline: %d bytes held in memory, want the output (> 100 KiB)", held)
	}

	dir := filepath.Join(t.TempDir(), "output")
	m, id := run(dir)
	if held := m.heldOutputBytes(); held != 0 {
		t.Fatalf("a finished session holds %d bytes of output in memory, want 0 (spilled)", held)
	}
	fi, err := os.Stat(filepath.Join(dir, id+".json"))
	if err != nil || fi.Size() < 100<<10 || fi.Mode().Perm() != 0o600 {
		t.Fatalf("spill file: %v, size %d, mode %v; want >100 KiB, 0600", err, fileSize(fi), fileMode(fi))
	}
	// log: every line, in order.
	r, err := m.Process(context.Background(), api.ProcessParams{Action: "log", SessionID: id, AgentID: "a", Offset: new(0), Limit: new(lines + 10)})
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Split(strings.TrimSpace(firstText(r)), "\n")
	if len(got) < lines || got[0] != "😀 0" || got[lines-1] != "😀 19999" {
		t.Fatalf("log after the spill: %d lines, first %q, last %q", len(got), got[0], got[len(got)-1])
	}
	// poll drains the unpolled tail once; the drain is kept on disk.
	r, err = m.Process(context.Background(), api.ProcessParams{Action: "poll", SessionID: id, AgentID: "a"})
	if err != nil || !strings.Contains(firstText(r), "😀 19999") || !strings.Contains(firstText(r), "chars dropped") {
		t.Fatalf("first poll: %v %q", err, lastN(firstText(r), 200))
	}
	r, err = m.Process(context.Background(), api.ProcessParams{Action: "poll", SessionID: id, AgentID: "a"})
	if err != nil || !strings.Contains(firstText(r), "(no new output)") {
		t.Fatalf("second poll: %v %q", err, lastN(firstText(r), 200))
	}
	if held := m.heldOutputBytes(); held != 0 {
		t.Fatalf("after reads, %d bytes held in memory", held)
	}
	// remove forgets the session and its file.
	if _, err := m.Process(context.Background(), api.ProcessParams{Action: "remove", SessionID: id, AgentID: "a"}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, id+".json")); !os.IsNotExist(err) {
		t.Fatalf("spill file left after remove: %v", err)
	}
}

func fileSize(fi os.FileInfo) int64 {
	if fi == nil {
		return -1
	}
	return fi.Size()
}

func fileMode(fi os.FileInfo) os.FileMode {
	if fi == nil {
		return 0
	}
	return fi.Mode().Perm()
}

func firstText(r api.Result) string {
	if len(r.Content) == 0 {
		return ""
	}
	return r.Content[0].Text
}

func lastN(s string, n int) string { return s[max(0, len(s)-n):] }

// Running sessions are capped per agent and in all; finished ones kept for
// polling are capped too, the oldest finished evicted first with a reason.
func TestSecuritySessionQuotas(t *testing.T) {
	m := newQuotaGateway(t, filepath.Join(t.TempDir(), "output"),
		config.SessionLimits{RunningPerAgent: 2, Running: 3, RetainedPerAgent: 2, Retained: 3})
	marker := filepath.Join(t.TempDir(), "RAN")
	for range 2 {
		if _, err := bgExec(t, m, "a", "sleep 30"); err != nil {
			t.Fatal(err)
		}
	}
	_, err := bgExec(t, m, "a", "touch "+marker)
	if !errors.Is(err, ErrSessionQuota) || !cerrdefs.IsResourceExhausted(err) || !strings.Contains(err.Error(), "limits.sessions.runningPerAgent") {
		t.Fatalf("3rd running session of a: err %v, want ErrSessionQuota naming runningPerAgent", err)
	}
	if _, err := bgExec(t, m, "b", "sleep 30"); err != nil {
		t.Fatalf("b's first session: %v", err)
	}
	_, err = bgExec(t, m, "c", "touch "+marker)
	if !errors.Is(err, ErrSessionQuota) || !strings.Contains(err.Error(), "(limits.sessions.running)") {
		t.Fatalf("4th running session: err %v, want ErrSessionQuota naming limits.sessions.running", err)
	}
	if n := m.Running(); n != 3 {
		t.Fatalf("%d sessions running, want 3", n)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("a refused command ran")
	}
	// Free the slots: kill every running session.
	for _, agent := range []string{"a", "b"} {
		for _, row := range m.list(scopeKey(agent, "")).Details.Sessions {
			if _, err := m.Process(context.Background(), api.ProcessParams{Action: "kill", SessionID: row.SessionID, AgentID: agent}); err != nil {
				t.Fatal(err)
			}
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for m.Running() > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if m.Running() != 0 {
		t.Fatalf("%d still running after kill", m.Running())
	}
	// Three finished sessions of d, one at a time: the oldest is evicted.
	var ids []string
	for i := range 3 {
		r, err := bgExec(t, m, "d", "echo d"+string(rune('0'+i)))
		if err != nil {
			t.Fatal(err)
		}
		id := r.Details.SessionID
		waitFinished(t, m, "d", id)
		ids = append(ids, id)
	}
	r, err := m.Process(context.Background(), api.ProcessParams{Action: "poll", SessionID: ids[0], AgentID: "d"})
	if err != nil || r.Details.Error != "not_found" || !strings.Contains(firstText(r), "limits.sessions.retainedPerAgent") {
		t.Fatalf("poll of the oldest: %v %q %v, want not found naming retainedPerAgent", err, firstText(r), r.Details)
	}
	for _, id := range ids[1:] {
		r, err := m.Process(context.Background(), api.ProcessParams{Action: "poll", SessionID: id, AgentID: "d"})
		if err != nil || r.Details.Status != api.StatusCompleted {
			t.Fatalf("poll of %s: %v %v, want it kept", id, err, r.Details)
		}
	}
	// Another agent sees no eviction reason for d's session.
	r, _ = m.Process(context.Background(), api.ProcessParams{Action: "poll", SessionID: ids[0], AgentID: "e"})
	if strings.Contains(firstText(r), "evicted") {
		t.Fatalf("agent e learns of d's session: %q", firstText(r))
	}
}
