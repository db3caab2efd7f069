package main_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandboxctl/sandboxctl/internal/audit"
)

// TestAuditNodeChain: a node keeps its own chain of what it ran, under its
// state directory, and its records carry the gateway's session id, so the
// gateway's session records name the node's.
func TestAuditNodeChain(t *testing.T) {
	gw, addr, token := startNodeGateway(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "node.yaml")
	if err := os.WriteFile(cfg, []byte("exec:\n  security: full\n  ask: \"off\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	node := exec.Command(binary, "--state", dir, "--config", cfg, "node", "run",
		"--gateway", "ws://"+addr, "--token", strings.TrimSpace(string(token)), "--name", "alpha", "--workdir", dir)
	node.Stderr = os.Stderr
	if err := node.Start(); err != nil {
		t.Fatal(err)
	}
	nodeDone := make(chan struct{})
	go func() { _ = node.Wait(); close(nodeDone) }()
	t.Cleanup(func() { _ = node.Process.Kill(); <-nodeDone })
	deadline := time.Now().Add(20 * time.Second)
	for {
		if r := gw.run(t, "node", "ls"); strings.Contains(r.stdout, "alpha") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the node did not connect")
		}
		time.Sleep(200 * time.Millisecond)
	}
	if r := gw.run(t, "exec", "--node", "alpha", "--agent", "nd", "--env", "AUDIT_PASSWORD=s3cr3t", "--", "echo on-node; exit 5"); r.code != 5 {
		t.Fatalf("exec on alpha: %+v", r)
	}
	_ = node.Process.Signal(os.Interrupt)
	select {
	case <-nodeDone:
	case <-time.After(30 * time.Second):
		t.Fatal("the node did not stop")
	}

	// Another node claiming the name alpha with its own credential is
	// refused at its hello: a node.refused record.
	other := t.TempDir()
	imp := exec.Command(binary, "--state", other, "--config", cfg, "node", "run",
		"--gateway", "ws://"+addr, "--token", strings.TrimSpace(string(token)), "--name", "alpha", "--workdir", other)
	if err := imp.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = imp.Process.Kill(); _ = imp.Wait() })
	deadline = time.Now().Add(30 * time.Second)
	for {
		refused := auditRecords(t, gw, "--kind", "node.refused")
		if len(refused) > 0 {
			if d := refused[0].Daemon; d == nil || !strings.Contains(d.Node, "alpha") || d.Remote == "" || d.Error == "" {
				t.Fatalf("node.refused: %+v", d)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no node.refused record for a node claiming another's name")
		}
		time.Sleep(300 * time.Millisecond)
	}

	gwRecs := auditRecords(t, gw, "--kind", "session.exit")
	if len(gwRecs) != 1 || gwRecs[0].Node != "alpha" || gwRecs[0].Session.ExitCode == nil || *gwRecs[0].Session.ExitCode != 5 {
		t.Fatalf("gateway session.exit: %+v", gwRecs)
	}
	sid := gwRecs[0].SessionID
	nodeEnv := &env{state: filepath.Join(dir, "node"), config: cfg}
	recs := auditRecords(t, nodeEnv)
	var kinds []string
	for _, r := range recs {
		if r.SessionID == sid {
			kinds = append(kinds, string(r.Kind))
			if r.RequestID == "" || r.AgentID != "nd" || r.Actor.Via != "gateway" {
				t.Fatalf("node record %+v", r)
			}
		}
	}
	if strings.Join(kinds, " ") != "exec.request guard.decision session.start session.exit" {
		t.Fatalf("the node's records of session %s: %v (all: %+v)", sid, kinds, recs)
	}
	exit := byKind(recs, audit.KindSessionExit, sid)[0]
	if exit.Session.ExitCode == nil || *exit.Session.ExitCode != 5 || exit.Session.OutputBytes != 8 {
		t.Fatalf("node session.exit: %+v", exit.Session)
	}
	if req := byKind(recs, audit.KindExecRequest, sid)[0]; fmt.Sprint(req.Exec.EnvNames) != "[AUDIT_PASSWORD]" {
		t.Fatalf("node exec.request: %+v", req.Exec)
	}
	data, _ := os.ReadFile(filepath.Join(dir, "node", "audit", audit.SegmentName(1)))
	if strings.Contains(string(data), "s3cr3t") {
		t.Fatal("the node's audit log holds an environment value")
	}
	if r := nodeEnv.run(t, "audit", "verify"); r.code != 0 {
		t.Fatalf("verify of the node's log: %+v", r)
	}
}
