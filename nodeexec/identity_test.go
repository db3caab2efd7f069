package nodeexec

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandboxctl/sandboxctl/sessions/hostapi"
)

// TestSecurityRogueNodeCannotTakeAName replays issue 25 finding 8 with real
// node agent processes: every node shared one token, and node ids were
// whatever a node said and were looked up before names, so a rogue node
// whose id was "build1" received, and ran, the command meant for the real
// node named build1. Now each node enrols with its own credential, bound to
// its id and name at first enrolment; names and ids are one namespace; a
// node claiming a taken name or id is refused loudly (logged, told why).
// The command for build1 runs only on build1: a marker in each node's
// workdir shows where it ran.
func TestSecurityRogueNodeCannotTakeAName(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts node agent processes")
	}
	bin := buildTestNode(t, t.TempDir())
	var (
		mu  sync.Mutex
		log strings.Builder
	)
	logf := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		log.WriteString(strings.TrimSpace(strings.ReplaceAll(format, "%", "")) + "\n")
		t.Logf(format, args...)
	}
	var refusals []Refusal
	g := newTestGateway(t, RegistryOptions{IdentityFile: filepath.Join(t.TempDir(), "node-identities.json"), Logf: logf,
		OnRefused: func(r Refusal) {
			mu.Lock()
			defer mu.Unlock()
			refusals = append(refusals, r)
		}})
	common := []string{"-gateway", g.url, "-token", testToken, "-tls-fingerprint", g.fingerprint, "-security", "full", "-ask", "off"}

	realWork, rogueWork, rogue2Work := t.TempDir(), t.TempDir(), t.TempDir()
	startNodeProc(t, bin, "build1", append([]string{"-workdir", realWork}, common...)...)
	g.waitNode(t, "build1")

	// The rogue calls its id "build1" (its node-id file is its own to write)
	// and has a state directory, so a credential, of its own.
	rogueState := t.TempDir()
	if err := os.WriteFile(filepath.Join(rogueState, "node-id"), []byte("build1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	rogue := startNodeProc(t, bin, "rogue", append([]string{"-workdir", rogueWork, "-state", rogueState}, common...)...)
	// A second rogue claims the name build1 under an id of its own.
	rogue2 := startNodeProc(t, bin, "build1", append([]string{"-workdir", rogue2Work}, common...)...)

	// Until both are refused, or one got a link (then the replay below
	// shows what it can do with it).
	refused := func() int {
		mu.Lock()
		defer mu.Unlock()
		return strings.Count(log.String(), "refused node")
	}
	for deadline := time.Now().Add(20 * time.Second); refused() < 2 && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if strings.Contains(rogue.output(), "CONNECTED") && strings.Contains(rogue2.output(), "CONNECTED") {
			break
		}
	}
	if n := refused(); n < 2 {
		t.Errorf("%d of the 2 rogues were refused", n)
	}
	mu.Lock()
	for _, r := range refusals {
		if !errors.Is(r.Err, ErrIdentityTaken) || (r.NodeID != "build1" && r.Name != "build1") {
			t.Errorf("refusal %+v", r)
		}
	}
	if len(refusals) < 2 {
		t.Errorf("OnRefused (the daemon's event) heard of %d refusals, want 2 or more", len(refusals))
	}
	mu.Unlock()
	for _, n := range g.reg.List() {
		if n.Connected && n.Name != "build1" {
			t.Errorf("a rogue is connected: %+v", n)
		}
	}
	if strings.Contains(rogue.output(), "CONNECTED") || strings.Contains(rogue2.output(), "CONNECTED") {
		t.Errorf("a rogue got a link:\nrogue: %s\nrogue2: %s", rogue.output(), rogue2.output())
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rp, err := g.reg.Start(ctx, "build1", hostapi.StartSpec{Command: "touch ran-here", Env: map[string]string{"BUILD_SECRET": "s3"}})
	if err != nil {
		t.Fatal(err)
	}
	if code, _, err := runWait(t, rp); code != 0 || err != nil {
		t.Fatalf("the command on build1: %d %v", code, err)
	}
	if !exists(filepath.Join(realWork, "ran-here")) {
		t.Error("the command meant for build1 did not run on build1")
	}
	for _, w := range []string{rogueWork, rogue2Work} {
		if exists(filepath.Join(w, "ran-here")) {
			t.Errorf("the command meant for build1 ran on a rogue (%s)", w)
		}
	}
}

// TestSecurityEnrolmentSurvivesRestart: the bindings are kept in the
// identity file, so a gateway restart does not hand a name to the first
// node that claims it afterwards.
func TestSecurityEnrolmentSurvivesRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "node-identities.json")
	real := Hello{NodeID: "id-real-0001", Name: "build1", Key: strings.Repeat("ab", nodeKeyBytes)}
	rogueKey := strings.Repeat("cd", nodeKeyBytes)
	e, err := loadEnrolments(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.admit(real, time.Now()); err != nil {
		t.Fatal(err)
	}
	e, err = loadEnrolments(path) // the restarted gateway
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range []Hello{
		{NodeID: "build1", Name: "rogue", Key: rogueKey},         // its id is the real node's name
		{NodeID: "id-rogue-0002", Name: "build1", Key: rogueKey}, // the real node's name
		{NodeID: "id-real-0001", Name: "build1", Key: rogueKey},  // the real node's id, another key
		{NodeID: "id-rogue-0003", Name: "id-real-0001", Key: rogueKey},
	} {
		if err := e.admit(h, time.Now()); !errors.Is(err, ErrIdentityTaken) {
			t.Errorf("admit(%+v) = %v, want ErrIdentityTaken", h, err)
		}
	}
	if err := e.admit(real, time.Now()); err != nil {
		t.Errorf("the real node after the restart: %v", err)
	}
	renamed := real
	renamed.Name = "build1b"
	if err := e.admit(renamed, time.Now()); err != nil {
		t.Errorf("the real node renamed: %v", err)
	}
	if err := e.admit(Hello{NodeID: "id-new-0004", Name: "build1", Key: rogueKey}, time.Now()); err != nil {
		t.Errorf("a new node under the freed name: %v", err)
	}
}
