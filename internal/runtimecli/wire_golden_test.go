package runtimecli

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sandboxctl/sandboxctl/api"
	"github.com/sandboxctl/sandboxctl/hostexec/guard"
	"github.com/sandboxctl/sandboxctl/nodeexec"
	"github.com/sandboxctl/sandboxctl/sandbox"
	"github.com/sandboxctl/sandboxctl/vocab"
)

var updateGolden = flag.Bool("update", false, "rewrite the testdata/*.golden files")

// checkGolden compares got with testdata/name.golden byte for byte.
func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *updateGolden {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s changed:\n got %s\nwant %s", name, got, want)
	}
}

// checkGoldenValue compares got with testdata/name.golden as a JSON value:
// the same members (none added, none left out), the same values; the order
// of an object's members may differ.
func checkGoldenValue(t *testing.T, name string, got []byte) {
	t.Helper()
	want, err := os.ReadFile(filepath.Join("testdata", name+".golden"))
	if err != nil {
		t.Fatal(err)
	}
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("%s changed:\n got %s\nwant %s", name, got, want)
	}
}

// TestApprovalsBodyGolden: GET /v1/approvals answers the gateway's
// requests with the members and values as before (api.Approval embeds
// api.ApprovalRequest, so the request's members now come first; the golden
// file holds the bytes of the earlier order).
func TestApprovalsBodyGolden(t *testing.T) {
	now := time.UnixMilli(1764300000000)
	st, err := guard.OpenStore(filepath.Join(t.TempDir(), "approvals.json"), guard.WithNow(func() time.Time { return now }))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	p, err := st.Request(ctx, guard.PendingRequest{Command: "rm -rf build", Argv: []string{"/bin/sh", "-c", "rm -rf build"}, Cwd: "/work",
		Host: vocab.HostGateway, Security: vocab.SecurityAllowlist, Ask: vocab.AskOnMiss, AgentID: "agent-a", SessionKey: "s1",
		Env: map[string]string{"B": "2", "A": "1"}, Explain: "rm is not allowlisted", Timeout: 2 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	a := &approvalsAPI{store: st, now: func() time.Time { return now }}
	list, err := a.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.NewReplacer(p.ID, "ID", p.Slug, "SLUG").Replace(string(jsonOf(t, list)))
	checkGoldenValue(t, "approvals-body", []byte(got))
}

// TestSandboxInfoGolden: a sandbox and a snapshot encode byte for byte as
// the API answered them before.
func TestSandboxInfoGolden(t *testing.T) {
	at := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	full := sandbox.Info{Sandbox: api.Sandbox{ID: "c0ffee", Name: "sbx-a", ScopeKey: "agent:a", AgentID: "a", SessionKey: "s1", State: "running",
		Image: "img:1", CreatedAt: at, LastUsedAt: at.Add(time.Second), ConfigHash: "h", Current: true, Engine: "local",
		Path: sandbox.PathSupervisor, Pool: "taken", Template: "default", Labels: map[string]string{"k": "v"}, ExpiresAt: at.Add(time.Hour)}}
	minimal := sandbox.Info{Sandbox: api.Sandbox{ID: "id", Name: "n", CreatedAt: at}}
	dc, err := json.Marshal(sandbox.DefaultConfig().Docker) // as the snapshot records it
	if err != nil {
		t.Fatal(err)
	}
	snap := sandbox.SnapshotInfo{Snapshot: api.Snapshot{Name: "s", ScopeKey: "agent:a", AgentID: "a", SessionKey: "s1", CreatedAt: at, Origin: "sbx-a",
		OriginID: "c0ffee", Template: "default", Labels: map[string]string{"k": "v"}, Config: dc, Bytes: 10, Files: 2,
		Method: sandbox.SnapshotCopy, Tmpfs: []string{"/tmp"}, Skipped: 1}}
	// Every snapshot records the config it was taken under (snapshotCopy),
	// even a zero one.
	zeroConfig, err := json.Marshal(sandbox.DockerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	for _, v := range []any{full, minimal, snap, sandbox.SnapshotInfo{Snapshot: api.Snapshot{Name: "s", Config: zeroConfig}}} {
		b.Write(jsonOf(t, v))
	}
	// A snapshot's record on disk (snapshot.json) is its indented JSON.
	data, err := json.MarshalIndent(snap, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	b.Write(append(data, '\n'))
	checkGolden(t, "sandbox-bodies", b.Bytes())
}

// TestRecoveredSessionGolden: a recovered session encodes as before.
func TestRecoveredSessionGolden(t *testing.T) {
	at := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	code := 0
	var b bytes.Buffer
	for _, v := range []any{
		sandbox.RecoveredSession{ContainerID: "c0ffee", ContainerName: "sbx-a", ScopeKey: "agent:a", Engine: "local", ID: "run-1",
			Argv: []string{"/bin/sh", "-c", "top"}, Dir: "/work", PTY: true, KeepStdin: true, AgentID: "a", SessionKey: "s1",
			Meta: map[string]string{"k": "v"}, PID: 7, StartedAt: at, ExitCode: &code, Signal: "SIGKILL", EndedAt: at.Add(time.Second),
			InputWait: true, Output: []byte("x"), Dropped: 3, StdoutOffset: 4, StderrOffset: 5},
		sandbox.RecoveredSession{ID: "run-2", Running: true, StartedAt: at},
	} {
		b.Write(jsonOf(t, v))
	}
	checkGolden(t, "recovered-session", b.Bytes())
}

// TestNodeApprovalBody: a node's request is listed as before: where is the
// node's name (its id when the gateway has no name for it), host "node",
// shell the argv's first word, and none of the node protocol's own members.
func TestNodeApprovalBody(t *testing.T) {
	p := nodeexec.Approval{ApprovalRequest: api.ApprovalRequest{ID: "0b6f2c1e-1", Slug: "0b6f2c1e", Command: "rm -rf build",
		Argv: []string{"/bin/sh", "-c", "rm -rf build"}, Env: map[string]string{"B": "2", "A": "1"}, Cwd: "/work", AgentID: "agent-a",
		SessionKey: "s1", Explain: "rm is not allowlisted", CreatedAtMs: 1764300000000, ExpiresAtMs: 1764300120000, Status: "pending"},
		NodeID: "node-1", Node: "build-box", Security: vocab.SecurityAllowlist, Ask: vocab.AskOnMiss}
	unnamed := nodeexec.Approval{ApprovalRequest: api.ApprovalRequest{ID: "x", Slug: "x", Command: "true", Cwd: "/", ExpiresAtMs: 1, Status: "expired"},
		NodeID: "node-2"}
	checkGoldenValue(t, "approvals-body-node", jsonOf(t, []api.Approval{nodeApproval(p), nodeApproval(unnamed)}))
}
