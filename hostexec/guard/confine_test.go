package guard

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandboxctl/sandboxctl/vocab"
)

// TestConfineWorkspace is the table of which commands run confined to the
// workspace (Verdict.Confine): exactly those whose decision relied on the
// external-directory check finding every path inside it.
func TestConfineWorkspace(t *testing.T) {
	h := newHost(t)
	cat := []Entry{{ID: "c", Pattern: "/usr/bin/cat"}, {ID: "l", Pattern: "ls"}}
	allow := func(ask vocab.Ask) Policy {
		return Policy{Security: vocab.SecurityAllowlist, Ask: ask, Allowlist: cat, Workspace: h.ws}
	}
	cases := []struct {
		name    string
		p       Policy
		cmd     string
		confine bool
	}{
		{"allowlisted cat inside", allow(vocab.AskOff), "cat sub/x", true},
		{"cd builtin inside", allow(vocab.AskOff), "cd sub && ls", true},
		{"cat on-miss, not allowlisted part", allow(vocab.AskOnMiss), "cat x | sort", true},
		{"ask always, inside", allow(vocab.AskAlways), "cat x", true},
		{"full on-miss inside", Policy{Security: vocab.SecurityFull, Ask: vocab.AskOnMiss, Workspace: h.ws}, "rm -rf sub", true},
		{"full ask always inside", Policy{Security: vocab.SecurityFull, Ask: vocab.AskAlways, Workspace: h.ws}, "rm -rf sub", true},
		// The check did not decide anything:
		{"no external-directory command", allow(vocab.AskOff), "ls /etc", false},
		{"no workspace configured", Policy{Security: vocab.SecurityAllowlist, Ask: vocab.AskOff, Allowlist: cat}, "cat x", false},
		{"full ask off", Policy{Security: vocab.SecurityFull, Ask: vocab.AskOff, Workspace: h.ws}, "cat x", false},
		{"analysis refused (approved as shown)", allow(vocab.AskOnMiss), "cat $X", false},
		// A path outside: a human approves it, or ExternalAllow lets it
		// out; it must stay reachable.
		{"external path needs approval", allow(vocab.AskOnMiss), "cat /etc/passwd", false},
		{"external allowed", Policy{Security: vocab.SecurityAllowlist, Ask: vocab.AskOnMiss, Allowlist: cat, Workspace: h.ws, ExternalAllow: []string{"/etc/**"}}, "cat /etc/hostname", false},
		{"deny", Policy{Security: vocab.SecurityDeny, Ask: vocab.AskOff, Workspace: h.ws}, "cat x", false},
	}
	for _, c := range cases {
		v := c.p.Evaluate(Analyze(h.expand(c.cmd), h.env))
		want := ""
		if c.confine {
			want = h.ws
		}
		if v.Confine != want {
			t.Errorf("%s: %q → Confine %q (decision %s: %s), want %q", c.name, c.cmd, v.Confine, v.Decision, v.Reason, want)
		}
	}
}

// The Gate carries Confine through a human's approval (the human decided on
// the same paths the check saw) and clears it in a sandbox, where the
// container is the boundary. An approved external path runs unconfined.
func TestGateConfine(t *testing.T) {
	h := newHost(t)
	st, err := OpenStore(filepath.Join(t.TempDir(), "approvals.json"))
	if err != nil {
		t.Fatal(err)
	}
	g := &Gate{Store: st, Config: GateConfig{Security: vocab.SecurityAllowlist, Ask: vocab.AskOnMiss, Workspace: h.ws}}
	ctx := t.Context()
	check := func(line string, contained bool) GateVerdict {
		t.Helper()
		v, err := g.Check(ctx, GateRequest{Line: line, Runner: []string{"/bin/sh", "-c"}, Cwd: h.ws, Path: h.env.Path, Contained: contained})
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	approve := func(v GateVerdict) GateVerdict {
		t.Helper()
		if v.Decision != vocab.DecisionApprovalPending || v.Pending == nil {
			t.Fatalf("did not ask: %s %s", v.Decision, v.Reason)
		}
		if err := st.Resolve(ctx, v.Pending.ID, vocab.AllowOnce); err != nil {
			t.Fatal(err)
		}
		f, err := g.Await(ctx, v)
		if err != nil || f.Decision != vocab.DecisionRun {
			t.Fatalf("approved: %v %s %s", err, f.Decision, f.Reason)
		}
		return f
	}
	if f := approve(check("cat sub/x", false)); f.Confine != h.ws {
		t.Errorf("approved inside cat: Confine %q, want %q", f.Confine, h.ws)
	}
	if f := approve(check("cat /etc/hostname", false)); f.Confine != "" {
		t.Errorf("approved external cat: Confine %q, want none", f.Confine)
	}
	if v := check("cat sub/x", true); v.Confine != "" {
		t.Errorf("sandbox: Confine %q, want none", v.Confine)
	}
}

// The approval record says that the command will run confined.
func TestGateConfineShownToHuman(t *testing.T) {
	h := newHost(t)
	st, err := OpenStore(filepath.Join(t.TempDir(), "approvals.json"))
	if err != nil {
		t.Fatal(err)
	}
	g := &Gate{Store: st, Config: GateConfig{Security: vocab.SecurityAllowlist, Ask: vocab.AskOnMiss, Workspace: h.ws}}
	v, err := g.Check(t.Context(), GateRequest{Line: "cat x | sort", Runner: []string{"/bin/sh", "-c"}, Cwd: h.ws, Path: h.env.Path})
	if err != nil || v.Pending == nil {
		t.Fatalf("did not ask: %v %s", err, v.Reason)
	}
	if !strings.Contains(v.Pending.Explain, "confined: runs under Landlock, reading and writing only in "+h.ws) {
		t.Errorf("explain does not show the confinement: %q", v.Pending.Explain)
	}
}
