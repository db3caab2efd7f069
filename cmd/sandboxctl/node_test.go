package main_test

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandboxctl/sandboxctl/api"
)

// freePort asks the kernel for a loopback port that is free right now.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// TestNodeRunThroughCLI starts a gateway daemon listening on loopback and a
// node agent as separate sandboxctl processes, then runs commands with
// --host node: the node's own guard decides (full on one node, deny on the
// other), whatever the gateway allows.
func TestNodeRunThroughCLI(t *testing.T) {
	gw, addr, token := startNodeGateway(t)

	startNode := func(name, security, ask string) {
		dir := t.TempDir()
		cfg := filepath.Join(dir, "node.yaml")
		if err := os.WriteFile(cfg, []byte(fmt.Sprintf("exec:\n  security: %s\n  ask: %q\n", security, ask)), 0o600); err != nil {
			t.Fatal(err)
		}
		node := exec.Command(binary, "--state", dir, "--config", cfg, "node", "run",
			"--gateway", "ws://"+addr, "--token", strings.TrimSpace(string(token)), "--name", name, "--workdir", dir)
		node.Stderr = os.Stderr
		if err := node.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = node.Process.Signal(os.Interrupt); _ = node.Wait() })
	}
	startNode("alpha", "full", "off")
	startNode("locked", "deny", "off")
	startNode("asks", "allowlist", "on-miss")

	deadline := time.Now().Add(20 * time.Second)
	for {
		r := gw.run(t, "node", "ls")
		if strings.Contains(r.stdout, "alpha") && strings.Contains(r.stdout, "locked") && strings.Contains(r.stdout, "asks") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("nodes did not connect: %+v", r)
		}
		time.Sleep(200 * time.Millisecond)
	}

	r := gw.run(t, "exec", "--node", "alpha", "--", "echo on-node; exit 5")
	if r.code != 5 || !strings.Contains(r.stdout, "on-node") {
		t.Fatalf("exec on alpha: %+v", r)
	}
	marker := filepath.Join(t.TempDir(), "MARKER")
	r = gw.run(t, "exec", "--node", "locked", "--", "touch "+marker)
	if r.code == 0 || !strings.Contains(r.stdout+r.stderr, "deny") {
		t.Fatalf("exec on a deny node: %+v", r)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the deny node ran the command")
	}
	// A node that asks: its approval request is visible and decided from
	// the gateway's approvals surface; the request is a session, and the
	// approved command starts by itself, once.
	asked := filepath.Join(t.TempDir(), "ASKED")
	r = gw.run(t, "--json", "exec", "--node", "asks", "--", "touch "+asked+"; echo ran-after-approval")
	var pending struct{ Details api.Details }
	if err := json.Unmarshal([]byte(r.stdout), &pending); err != nil || pending.Details.Status != "approval-pending" {
		t.Fatalf("exec on an asking node: %+v", r)
	}
	sid := pending.Details.SessionID
	if sid == "" {
		t.Fatalf("an approval-pending node exec is not kept as a session: %v", pending.Details)
	}
	list := gw.run(t, "--json", "approvals", "list")
	var approvals []map[string]any
	if err := json.Unmarshal([]byte(list.stdout), &approvals); err != nil {
		t.Fatalf("approvals list: %+v", list)
	}
	var id string
	for _, a := range approvals {
		if a["where"] == "asks" && a["status"] == "pending" {
			id, _ = a["id"].(string)
		}
	}
	if id == "" {
		t.Fatalf("node approval not listed on the gateway: %s", list.stdout)
	}
	if _, err := os.Stat(asked); err == nil {
		t.Fatal("ran before a human decided")
	}
	if r := gw.run(t, "approvals", "resolve", id, "allow-once"); r.code != 0 {
		t.Fatalf("resolve on the node: %+v", r)
	}
	if out, last := pollUntilDone(t, gw, sid); !strings.Contains(out, "ran-after-approval") || !strings.Contains(last, "exited with code 0") {
		t.Fatalf("the approved node command as session %s: %q / %q", sid, out, last)
	}
	if _, err := os.Stat(asked); err != nil {
		t.Fatal("approved command did not run on the node")
	}
	os.Remove(asked)
	if r := gw.run(t, "--json", "exec", "--node", "asks", "--", "touch "+asked+"; echo ran-after-approval"); !strings.Contains(r.stdout, `"approval-pending"`) {
		t.Fatalf("allow-once was reused: %+v", r)
	}

	r = gw.run(t, "exec", "--node", "nowhere", "--", "true")
	if r.code == 0 || !strings.Contains(r.stdout+r.stderr, "nowhere") {
		t.Fatalf("exec on an unknown node: %+v", r)
	}
}

// startNodeGateway starts a gateway daemon (exec.host node, security full)
// listening on loopback, stopped when the test ends, and returns its
// environment, its address and the node token it wrote.
func startNodeGateway(t *testing.T) (gw *env, addr string, token []byte) {
	t.Helper()
	gw = newEnv(t)
	if err := os.WriteFile(gw.config, []byte("exec:\n  host: node\n  security: full\n  ask: \"off\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr = fmt.Sprintf("127.0.0.1:%d", freePort(t))
	serve := exec.Command(binary, "--state", gw.state, "--config", gw.config, "serve", "--listen", addr)
	serve.Stderr = os.Stderr
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = serve.Process.Kill(); _ = serve.Wait() })
	deadline := time.Now().Add(20 * time.Second)
	for {
		b, err := os.ReadFile(filepath.Join(gw.state, "node-token"))
		if err == nil && len(strings.TrimSpace(string(b))) > 0 {
			token = b
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("gateway did not write its node token")
		}
		time.Sleep(50 * time.Millisecond)
	}
	return gw, addr, token
}
