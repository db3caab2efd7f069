package main_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandboxctl/sandboxctl/internal/audit"
	"github.com/sandboxctl/sandboxctl/internal/testbuild"
)

// snapshotEvent is a sandbox event as /v1/events sends it.
type snapshotEvent struct {
	Cursor  int64  `json:"cursor"`
	Type    string `json:"type"`
	AgentID string `json:"agentId"`
	Details struct {
		Action   string `json:"action"`
		Snapshot string `json:"snapshot"`
		Name     string `json:"name"`
	} `json:"details"`
}

// sandboxEventsUntil reads the daemon's sandbox events from the start
// until done is true of those read (or the deadline), and returns them.
func sandboxEventsUntil(t *testing.T, base string, deadline time.Duration, done func([]snapshotEvent) bool) []snapshotEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), deadline)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", base+"/v1/events?since=0", nil)
	req.Header.Set("Authorization", "Bearer "+filesToolToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("events: %v", err)
	}
	defer resp.Body.Close()
	var evs []snapshotEvent
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		var ev snapshotEvent
		if json.Unmarshal(sc.Bytes(), &ev) == nil && ev.Type == "sandbox" {
			evs = append(evs, ev)
			if done(evs) {
				break
			}
		}
	}
	return evs
}

// TestSandboxSnapshotCLIEvents: the snapshot commands of the CLI, which
// act in its own process, are events like the API's. Run with no daemon,
// snapshot, rollback, fork, --rm and a prune are spooled under the state
// directory and journalled, in their order and with their snapshot, by
// the daemon when it starts; with the daemon running, a CLI snapshot is
// journalled while it runs. Nothing is left in the spool.
func TestSandboxSnapshotCLIEvents(t *testing.T) {
	e, alice, bob := filesEnv(t)
	sup, err := testbuild.Package(t.TempDir(), "cmd/sandboxctl-supervisor")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("SANDBOXCTL_SUPERVISOR", sup) // rollback and fork restore the tmpfs through it
	t.Cleanup(func() {
		e.run(t, "sandbox", "rm", "--agent", alice)
		e.run(t, "sandbox", "rm", "--agent", bob)
	})
	must := func(args ...string) {
		t.Helper()
		if r := e.run(t, args...); r.code != 0 {
			t.Fatalf("sandboxctl %v: %+v", args, r)
		}
	}
	must("sandbox", "create", "--agent", alice)
	must("sandbox", "snapshot", alice, "--name", "one")
	must("sandbox", "snapshot", alice, "--name", "two")
	must("sandbox", "rollback", alice, "one")
	must("sandbox", "fork", alice, bob, "--snapshot", "one")
	must("sandbox", "snapshots", alice, "--rm", "two")
	must("sandbox", "snapshots", alice, "--keep", "0")
	spool := filepath.Join(e.state, "events", "spool")
	if ents, err := os.ReadDir(spool); err != nil || len(ents) != 6 {
		t.Fatalf("spooled with no daemon: %v %v, want 6 events", ents, err)
	}

	want := []struct{ action, snapshot, agent string }{
		{"snapshotted", "one", alice}, {"snapshotted", "two", alice}, {"rolled-back", "one", alice},
		{"forked", "one", bob}, {"snapshot-removed", "two", alice}, {"snapshot-removed", "one", alice},
	}
	base := serveFiles(t, e)
	evs := sandboxEventsUntil(t, base, 60*time.Second, func(evs []snapshotEvent) bool { return len(evs) >= len(want) })
	if len(evs) < len(want) {
		t.Fatalf("events after the daemon started: %+v, want %d", evs, len(want))
	}
	for i, w := range want {
		ev := evs[i]
		if ev.Details.Action != w.action || ev.Details.Snapshot != w.snapshot || ev.AgentID != w.agent || ev.Cursor <= 0 || ev.Details.Name == "" {
			t.Errorf("event %d: %+v, want %s of snapshot %s for %s", i, ev, w.action, w.snapshot, w.agent)
		}
	}

	// Audited as done through the CLI, by the uid that ran it.
	var cliRecs int
	for _, r := range byKind(auditRecords(t, e), audit.KindSandbox, "") {
		if r.Actor.Via == "cli" && r.Sandbox != nil && r.AgentID != "" {
			if r.Actor.UID == nil || *r.Actor.UID != os.Getuid() {
				t.Errorf("CLI record's actor: %+v", r.Actor)
			}
			cliRecs++
		}
	}
	if cliRecs != len(want) {
		t.Errorf("audit records via cli: %d, want %d", cliRecs, len(want))
	}

	must("sandbox", "snapshot", alice, "--name", "three")
	evs = sandboxEventsUntil(t, base, 60*time.Second, func(evs []snapshotEvent) bool {
		last := evs[len(evs)-1]
		return last.Details.Action == "snapshotted" && last.Details.Snapshot == "three"
	})
	if last := evs[len(evs)-1]; last.Details.Action != "snapshotted" || last.Details.Snapshot != "three" {
		t.Fatalf("a CLI snapshot while the daemon runs: events %+v", evs)
	}
	if ents, err := os.ReadDir(spool); err != nil || len(ents) != 0 {
		names := []string{}
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Fatalf("spool after the daemon took the events in: %s %v", strings.Join(names, " "), err)
	}
}
