package daemon

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/sandboxctl/sandboxctl/api"
	"github.com/sandboxctl/sandboxctl/vocab"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandboxctl/sandboxctl/envknob"
)

// startChild starts a real process that lives until the test ends.
func startChild(t *testing.T, env []string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sleep", "60")
	cmd.Env = env
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd
}

// notADaemon is a pid no process has (above pid_max).
const notADaemon = 1 << 30

func TestApproverCheckRefusesDescendants(t *testing.T) {
	self := os.Getpid()
	child := startChild(t, []string{"PATH=/usr/bin:/bin"})
	c := approverCheck{self: self, uid: os.Geteuid(), proc: "/proc"}
	err := c.check(Peer{PID: child.Process.Pid, UID: os.Geteuid()})
	if !errors.Is(err, ErrNotApprover) || !strings.Contains(err.Error(), "started by this daemon") {
		t.Fatalf("a child of the daemon: %v, want a refusal naming the descent", err)
	}
	// The daemon itself is refused too.
	if err := c.check(Peer{PID: self, UID: os.Geteuid()}); !errors.Is(err, ErrNotApprover) {
		t.Fatalf("the daemon itself: %v", err)
	}
}

func TestApproverCheckRefusesTaggedProcesses(t *testing.T) {
	child := startChild(t, []string{"PATH=/usr/bin:/bin", string(envknob.RunTag) + "=left-by-an-old-daemon"})
	c := approverCheck{self: notADaemon, uid: os.Geteuid(), proc: "/proc"}
	err := c.check(Peer{PID: child.Process.Pid, UID: os.Geteuid()})
	if !errors.Is(err, ErrNotApprover) || !strings.Contains(err.Error(), string(envknob.RunTag)) {
		t.Fatalf("a tagged process: %v, want a refusal naming %s", err, envknob.RunTag)
	}
}

func TestApproverCheckAcceptsAPersonsProcess(t *testing.T) {
	// This test process stands for a person's shell: it neither descends
	// from the (absent) daemon nor carries the tag — unless the test itself
	// runs under a sandboxctl command, where the refusal is right.
	c := approverCheck{self: notADaemon, uid: os.Geteuid(), proc: "/proc"}
	err := c.check(Peer{PID: os.Getpid(), UID: os.Geteuid()})
	if _, tagged := os.LookupEnv(string(envknob.RunTag)); tagged {
		if !errors.Is(err, ErrNotApprover) {
			t.Fatalf("running under a sandboxctl command, the check passed: %v", err)
		}
		return
	}
	if err != nil {
		t.Fatalf("a process outside the daemon's tree was refused: %v", err)
	}
}

func TestApproverCheckRefusesUnknownPeers(t *testing.T) {
	c := newApproverCheck()
	for _, p := range []Peer{{}, {PID: notADaemon, UID: os.Geteuid()}} {
		if err := c.check(p); !errors.Is(err, ErrNotApprover) {
			t.Errorf("peer %+v: %v, want refusal", p, err)
		}
	}
	if os.Geteuid() != 0 {
		if err := c.check(Peer{PID: os.Getpid(), UID: os.Geteuid() + 1}); !errors.Is(err, ErrNotApprover) {
			t.Errorf("another uid: %v", err)
		}
	}
}

// TestApprovalRoutesOnTheSocket: the daemon serves approval routes on its
// socket only to approvers; this test process is the daemon here, so its
// own request (like a command's) is refused with 403 and the handler never
// runs. Tool routes stay open.
func TestApprovalRoutesOnTheSocket(t *testing.T) {
	ran := false
	r := startServer(t, Options{Approvals: fakeApprovals{decide: func() { ran = true }}})
	code, msg := postRaw(t, r.srv, "/v1/approvals/abc", []byte(`{"decision":"allow-always"}`))
	if code != http.StatusForbidden || !strings.Contains(msg, "not allowed to decide approvals") || ran {
		t.Fatalf("got %d %q (handler ran: %v), want 403", code, msg, ran)
	}
}

// TestApprovalRoutesOverTCP: the tool token does not decide approvals;
// only the approver token does, and without one TCP decides nothing.
func TestApprovalRoutesOverTCP(t *testing.T) {
	const tool, approver = "tool-token-for-the-tests", "approver-token-for-tests"
	routes := func(ran *bool) Approvals {
		return fakeApprovals{decide: func() { *ran = true }}
	}
	post := func(t *testing.T, base, token string) int {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, base+"/v1/approvals/abc", bytes.NewReader([]byte(`{"decision":"deny"}`)))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}

	var ran bool
	r := startServer(t, Options{Listen: "127.0.0.1:0", Token: tool, ApproverToken: approver, Approvals: routes(&ran)})
	base := "http://" + r.srv.TCPAddr().String()
	if code := post(t, base, tool); code != http.StatusUnauthorized || ran {
		t.Fatalf("tool token: %d (ran %v), want 401", code, ran)
	}
	if code := post(t, base, approver); code != http.StatusOK || !ran {
		t.Fatalf("approver token: %d (ran %v), want 200", code, ran)
	}

	var ran2 bool
	r2 := startServer(t, Options{Listen: "127.0.0.1:0", Token: tool, Approvals: routes(&ran2)})
	if code := post(t, "http://"+r2.srv.TCPAddr().String(), tool); code != http.StatusForbidden || ran2 {
		t.Fatalf("no approver token: %d (ran %v), want 403", code, ran2)
	}

	if _, err := Listen(t.Context(), Options{StateDir: t.TempDir(), Tools: &fakeTools{}, Listen: "127.0.0.1:0", Token: tool, ApproverToken: tool}); err == nil {
		t.Fatal("an approver token equal to the tool token was accepted")
	}
}

// connectHelperEnv makes the test binary connect to the unix socket it
// names and exit (see TestMain).
const connectHelperEnv = "SANDBOXCTL_TEST_CONNECT_HELPER"

// TestApproverCheckRefusesAGonePeer: a peer that connected and exited
// before the check is refused — its pid could by then name another process.
func TestApproverCheckRefusesAGonePeer(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	helper := exec.Command(os.Args[0], "-test.run=^$")
	helper.Env = append(os.Environ(), connectHelperEnv+"="+path)
	if out, err := helper.CombinedOutput(); err != nil { // waits until it is gone
		t.Fatalf("connect helper: %v %s", err, out)
	}
	conn, err := ln.AcceptUnix()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	p, ok := PeerFrom(withPeer(t.Context(), conn))
	if !ok || p.PID != helper.Process.Pid {
		t.Fatalf("peer %+v (ok %v), want pid %d", p, ok, helper.Process.Pid)
	}
	c := approverCheck{self: notADaemon, uid: os.Geteuid(), proc: "/proc"}
	if err := c.check(p); !errors.Is(err, ErrNotApprover) || !strings.Contains(err.Error(), "gone") {
		t.Fatalf("a peer that is gone: %v, want a refusal", err)
	}
}

// parentHelperEnv makes the test binary start `sleep`, print its pid and
// wait for stdin to close (see TestMain).
const parentHelperEnv = "SANDBOXCTL_TEST_PARENT_HELPER"

// TestApproverCheckRefusesDescendantsOfTheRuntime: a process whose parent
// runs the daemon's own executable (a node agent on this machine, another
// daemon) is refused although it does not descend from this daemon.
func TestApproverCheckRefusesDescendantsOfTheRuntime(t *testing.T) {
	helper := exec.Command(os.Args[0], "-test.run=^$")
	helper.Env = append(os.Environ(), parentHelperEnv+"=1")
	stdin, err := helper.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := helper.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = stdin.Close(); _ = helper.Wait() }()
	var pid int
	if _, err := fmt.Fscan(out, &pid); err != nil {
		t.Fatal(err)
	}
	exe, err := os.Stat(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	c := approverCheck{self: notADaemon, uid: os.Geteuid(), exe: exe, proc: "/proc"}
	if err := c.check(Peer{PID: pid, UID: os.Geteuid()}); !errors.Is(err, ErrNotApprover) || !strings.Contains(err.Error(), "runtime") {
		t.Fatalf("a child of the runtime's executable: %v, want a refusal", err)
	}
}

// fakeApprovals lists list and calls decide for every decision.
type fakeApprovals struct {
	list   []api.Approval
	decide func()
}

func (f fakeApprovals) List(context.Context) ([]api.Approval, error) { return f.list, nil }

func (f fakeApprovals) Decide(context.Context, string, vocab.ApprovalDecision) error {
	if f.decide != nil {
		f.decide()
	}
	return nil
}
