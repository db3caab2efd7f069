package main_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSecuritySessionsScopedByAgentAndKey replays issue 12 #2 through the
// real daemon: agent mallory uses the same session key ("main") as agent
// alice and must neither see nor touch alice's session — list, poll, log,
// write, kill and remove all answer "no session" and change nothing; alice
// still polls her running session and what mallory wrote never reached it.
func TestSecuritySessionsScopedByAgentAndKey(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	got := filepath.Join(dir, "stdin-of-alice")
	alice := []string{"--agent", "alice", "--session", "main"}
	mallory := []string{"--agent", "mallory", "--session", "main"}

	d := execJSON(t, e, append(append([]string{"--background"}, alice...), "--", "cat > "+quote(t, got))...)
	sid := d.SessionID
	if d.Status != "running" || sid == "" {
		t.Fatalf("alice's background session: %v", d)
	}

	if r := e.run(t, append([]string{"process", "list"}, mallory...)...); strings.Contains(r.stdout, sid) {
		t.Fatalf("mallory lists alice's session: %s", r.stdout)
	}
	for _, action := range [][]string{
		{"poll", sid}, {"log", sid}, {"write", sid, "--data", "from mallory\n", "--eof"},
		{"kill", sid}, {"remove", sid},
	} {
		r := e.run(t, append(append([]string{"process"}, action...), mallory...)...)
		if r.code != 1 || !strings.Contains(r.stderr, "No session found") {
			t.Fatalf("mallory's process %s reached alice's session: %+v", action[0], r)
		}
	}

	// Alice's session is untouched: still running (cat waits for its
	// input), listed, and stdin open.
	if r := e.run(t, append([]string{"process", "list"}, alice...)...); !strings.Contains(r.stdout, sid) ||
		!(strings.Contains(r.stdout, "running") || strings.Contains(r.stdout, "waiting-for-input")) {
		t.Fatalf("alice's list after mallory: %+v", r)
	}
	if r := e.run(t, append([]string{"process", "write", sid, "--data", "from alice\n", "--eof"}, alice...)...); r.code != 0 {
		t.Fatalf("alice's write: %+v", r)
	}
	if _, last := pollUntilDone(t, e, sid, alice...); !strings.Contains(last, "exited with code 0") {
		t.Fatalf("alice's session: %q", last)
	}
	if data := readFile(t, got); data != "from alice\n" {
		t.Fatalf("alice's command read %q; mallory's write must not have reached it", data)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
