package nodeexec

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/sandboxctl/sandboxctl/hostexec/guard"
	"github.com/sandboxctl/sandboxctl/vocab"
)

// checkGoldenValue compares got with testdata/name.golden line by line as
// JSON values: the same members (none added, none left out), the same
// values; the order of an object's members may differ.
func checkGoldenValue(t *testing.T, name string, got []byte) {
	t.Helper()
	want, err := os.ReadFile(filepath.Join("testdata", name+".golden"))
	if err != nil {
		t.Fatal(err)
	}
	gl, wl := bytes.Split(bytes.TrimSpace(got), []byte("\n")), bytes.Split(bytes.TrimSpace(want), []byte("\n"))
	if len(gl) != len(wl) {
		t.Fatalf("%s: %d lines, want %d:\n got %s\nwant %s", name, len(gl), len(wl), got, want)
	}
	for i := range gl {
		var g, w any
		if err := json.Unmarshal(gl[i], &g); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(wl[i], &w); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(g, w) {
			t.Errorf("%s line %d changed:\n got %s\nwant %s", name, i+1, gl[i], wl[i])
		}
	}
}

// wireJSON encodes v as the link writes a frame (wsjson: json.Encoder).
func wireJSON(t *testing.T, v any) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := json.NewEncoder(&b).Encode(v); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestApprovalWireGolden: the approval frames of the node protocol
// (approval-pending, the reply to approvals.list, the hello's approvals
// summary) carry what nodes and gateways already exchange: the same
// members and values. Since Approval embeds api.ApprovalRequest the
// request's members come first (the golden file holds the bytes of the
// earlier order; JSON readers do not depend on it).
func TestApprovalWireGolden(t *testing.T) {
	p := guard.Pending{
		ID: "0b6f2c1e-aaaa-bbbb-cccc-000000000001", Slug: "0b6f2c1e", Command: "rm -rf build",
		Argv: []string{"/bin/sh", "-c", "rm -rf build"}, Cwd: "/work", Host: vocab.HostNode, NodeID: "node-1",
		Security: vocab.SecurityAllowlist, Ask: vocab.AskOnMiss, AgentID: "agent-a", SessionKey: "s1",
		EnvHash: "h", Env: map[string]string{"B": "2", "A": "1"}, Explain: "rm is not allowlisted",
		CreatedAtMs: 1764300000000, ExpiresAtMs: 1764300120000,
	}
	now := time.UnixMilli(1764300060000)
	full := toApproval(p, now)
	full.Node = "build-box"
	minimal := toApproval(guard.Pending{ID: "x", Slug: "x", Command: "true", Cwd: "/", ExpiresAtMs: 1}, now)
	var buf bytes.Buffer
	buf.Write(wireJSON(t, &frame{Type: framePending, RunID: "r1", Reason: "approval required", Approval: &full}))
	buf.Write(wireJSON(t, &frame{Type: framePending, RunID: "r2", Approval: &Approval{NodeID: "node-1"}}))
	buf.Write(wireJSON(t, &frame{Type: frameReply, ReqID: "q1", Approvals: []Approval{full, minimal}}))
	buf.Write(wireJSON(t, &frame{Type: frameHello, Hello: &Hello{Protocol: 1, NodeID: "node-1", Name: "build-box", Platform: "linux",
		Capabilities: []string{"system.run"}, Approvals: ApprovalSummary{Security: vocab.SecurityAllowlist, Ask: vocab.AskOnMiss,
			AskFallback: vocab.SecurityDeny, Pending: 2, Allowlist: 3, Error: "e"}}}))
	checkGoldenValue(t, "approval-frames", buf.Bytes())
}

// TestRunWireGolden: a run request and the runs a hello reports are byte
// for byte what nodes and gateways already exchange (their Go names follow
// the start spec, their wire names stay).
func TestRunWireGolden(t *testing.T) {
	yes := true
	var buf bytes.Buffer
	buf.Write(wireJSON(t, &frame{Type: frameRun, RunID: "r1", Run: &RunParams{Argv: []string{"/bin/sh", "-c", "top"}, RawCommand: "top",
		Dir: "/work", Env: map[string]string{"A": "1"}, TimeoutMs: 5000, AgentID: "agent-a", SessionKey: "s1", RunID: "r1", IdempotencyKey: "k1",
		Security: vocab.SecurityAllowlist, Ask: vocab.AskOnMiss, PTY: true, Cols: 120, Rows: 30, KeepStdin: true, Owner: "gw-1", SessionID: "sess-1",
		Approved: &yes, ApprovalDecision: "allow-once"}}))
	buf.Write(wireJSON(t, &frame{Type: frameRun, RunID: "r2", Run: &RunParams{Argv: []string{"true"}, RunID: "r2", IdempotencyKey: "k2"}}))
	buf.Write(wireJSON(t, &frame{Type: frameHello, Hello: &Hello{Protocol: 1, NodeID: "node-1", Name: "build-box", Platform: "linux",
		Running: []RunState{{RunID: "r1", PID: 7, Running: true, Command: "top", Owner: "gw-1", SessionID: "sess-1", AgentID: "agent-a",
			SessionKey: "s1", Dir: "/work", PTY: true, KeepStdin: true, StartedAtMs: 1764300000000}, {RunID: "r2"}}}}))
	want, err := os.ReadFile(filepath.Join("testdata", "run-frames.golden"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), want) {
		t.Errorf("run frames changed:\n got %s\nwant %s", buf.Bytes(), want)
	}
}
