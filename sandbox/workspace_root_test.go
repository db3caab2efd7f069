package sandbox

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// newRootManager is a Manager over state and home (no Engine contacted).
func newRootManager(t *testing.T, cfg Config, state, home string) *Manager {
	t.Helper()
	m, err := NewManager(context.Background(), Options{Config: cfg, StateDir: state, Home: home, Logf: t.Logf, DisableSupervisor: true})
	if err != nil {
		t.Fatalf("NewManager: %v", err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m
}

// TestWorkspaceRootUnderStateDir: by default each state directory has its
// workspaces under it, so one agent name in two state directories has two
// workspaces; a configured root still wins.
func TestWorkspaceRootUnderStateDir(t *testing.T) {
	home := t.TempDir()
	cfg := DefaultConfig()
	s1, s2 := t.TempDir(), t.TempDir()
	m1, m2 := newRootManager(t, cfg, s1, home), newRootManager(t, cfg, s2, home)
	_, _, ws1, _ := m1.Layout(Scope{AgentID: "a1"})
	_, _, ws2, _ := m2.Layout(Scope{AgentID: "a1"})
	real1, _ := filepath.EvalSymlinks(s1)
	real2, _ := filepath.EvalSymlinks(s2)
	if filepath.Dir(ws1) != filepath.Join(real1, WorkspacesDirName) || filepath.Dir(ws2) != filepath.Join(real2, WorkspacesDirName) {
		t.Fatalf("agent a1's workspaces are %s and %s, want them under %s/workspaces and %s/workspaces", ws1, ws2, s1, s2)
	}
	if _, err := os.Stat(filepath.Join(home, ".sandboxctl")); err == nil {
		t.Errorf("a default Manager made %s/.sandboxctl", home)
	}
	cfg.WorkspaceRoot = filepath.Join(t.TempDir(), "ws")
	m3 := newRootManager(t, cfg, t.TempDir(), home)
	if _, _, ws3, _ := m3.Layout(Scope{AgentID: "a1"}); filepath.Dir(ws3) != cfg.WorkspaceRoot {
		t.Errorf("with sandbox.workspaceRoot %s, a1's workspace is %s", cfg.WorkspaceRoot, ws3)
	}
}

// TestWorkspaceRootKeepsLegacyWorkspaces: a state directory whose
// sandboxes have their workspaces where every state directory kept them
// before (~/.sandboxctl/workspaces) keeps using them, files and all, and
// keeps doing so on later starts; a fresh state directory beside it does
// not.
func TestWorkspaceRootKeepsLegacyWorkspaces(t *testing.T) {
	home, state := t.TempDir(), t.TempDir()
	cfg := DefaultConfig()
	key := ScopeKey(cfg.Scope, Scope{AgentID: "a1"})
	legacy := filepath.Join(home, ".sandboxctl", "workspaces")
	old := filepath.Join(legacy, ContainerName("", key))
	if err := os.MkdirAll(old, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(old, "notes.txt"), []byte("keep me"), 0o600); err != nil {
		t.Fatal(err)
	}
	reg := `{"sandboxctl-agent-a1-x":{"scopeKey":"` + key + `","lastUsedAtMs":1}}`
	if err := os.WriteFile(filepath.Join(state, "sandboxes.json"), []byte(reg), 0o600); err != nil {
		t.Fatal(err)
	}
	for start := range 2 {
		m := newRootManager(t, cfg, state, home)
		_, _, ws, _ := m.Layout(Scope{AgentID: "a1"})
		if ws != old {
			t.Fatalf("start %d: a1's workspace is %s, want its old one %s", start, ws, old)
		}
		if data, err := os.ReadFile(filepath.Join(ws, "notes.txt")); err != nil || string(data) != "keep me" {
			t.Fatalf("start %d: the old file: %q, %v", start, data, err)
		}
		if target, err := os.Readlink(filepath.Join(state, WorkspacesDirName)); err != nil || target != legacy {
			t.Fatalf("start %d: %s/workspaces links to %q (%v), want %s", start, state, target, err, legacy)
		}
		_ = m.Close()
	}
	fresh := newRootManager(t, cfg, t.TempDir(), home)
	if _, _, ws, _ := fresh.Layout(Scope{AgentID: "a1"}); ws == old {
		t.Errorf("a fresh state directory uses the legacy workspace %s", ws)
	}
}
