package daemon

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/sandboxctl/sandboxctl/api"
	"github.com/sandboxctl/sandboxctl/hostexec"
	"github.com/sandboxctl/sandboxctl/internal/apiclient"
	"github.com/sandboxctl/sandboxctl/internal/apiclient/tcpclient"
	"github.com/sandboxctl/sandboxctl/internal/eventjournal"
	"github.com/sandboxctl/sandboxctl/sessions"
	"github.com/sandboxctl/sandboxctl/sessions/config"
	"github.com/sandboxctl/sandboxctl/sessions/toolapi"
	"github.com/sandboxctl/sandboxctl/vocab"
)

// startJournalDaemon serves a real gateway Manager whose events go through
// a journal of segBytes in dir.
func startJournalDaemon(t *testing.T, dir string, segBytes int64, opts Options) (*running, *sessions.Manager) {
	t.Helper()
	runner, err := hostexec.NewRunner(t.Context(), hostexec.Options{Logf: t.Logf})
	if err != nil {
		t.Fatalf("gateway host: %v", err)
	}
	j, err := eventjournal.Open(dir, segBytes)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = j.Close() })
	cfg := config.Default()
	cfg.Exec.Host, cfg.Exec.Security, cfg.Exec.Ask = "gateway", "full", "off"
	cfg.Exec.NotifyOnExitEmptySuccess = true
	mgr, err := sessions.New(sessions.Options{
		Config:  cfg,
		Hosts:   map[vocab.Host]sessions.Host{"gateway": sessions.NewGatewayHost(runner, t.TempDir())},
		Logf:    t.Logf,
		Journal: j,
	})
	if err != nil {
		t.Fatal(err)
	}
	opts.Tools, opts.Streams, opts.Journal = mgr, mgr, j
	opts.IsInvalidInput = toolapi.IsInvalidInput
	return startServer(t, opts), mgr
}

// collect reads events until n of them arrived (or fails at the deadline).
func collect(t *testing.T, c *apiclient.Client, q apiclient.EventsQuery, n int) []api.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	st, err := c.EventsSince(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var evs []api.Event
	for len(evs) < n {
		var ev api.Event
		if err := st.Next(&ev); err != nil {
			t.Fatalf("after %d of %d events: %v (%+v)", len(evs), n, err, evs)
		}
		evs = append(evs, ev)
	}
	return evs
}

// runBackground runs command as a background session and waits for its end.
func runBackground(t *testing.T, c *apiclient.Client, agent, command string) string {
	t.Helper()
	res, err := c.Exec(t.Context(), api.ExecParams{Command: command, Background: true, AgentID: agent})
	if err != nil {
		t.Fatal(err)
	}
	id := res.Details.SessionID
	wait := 20000.0
	for {
		p, err := c.Process(t.Context(), api.ProcessParams{Action: "poll", SessionID: id, AgentID: agent, TimeoutMs: &wait})
		if err != nil {
			t.Fatal(err)
		}
		if p.Details.Status != api.StatusRunning {
			return id
		}
	}
}

// TestRealEventsReplayFromCursor: a client that was away gets, with its
// last cursor, exactly the events after it — with the exit code in each
// exit event — and an agent filter shows one agent's only.
func TestRealEventsReplayFromCursor(t *testing.T) {
	r, _ := startJournalDaemon(t, t.TempDir(), 0, Options{})
	ids := []string{
		runBackground(t, r.client, "a1", "echo one"),
		runBackground(t, r.client, "a2", "exit 7"),
		runBackground(t, r.client, "a1", "echo three; exit 3"),
	}
	zero := int64(0)
	all := collect(t, r.client, apiclient.EventsQuery{Since: &zero}, 3)
	for i, ev := range all {
		if ev.Type != "exit" || ev.SessionID != ids[i] || ev.Cursor != int64(i+1) {
			t.Errorf("event %d: %+v, want the exit of %s with cursor %d", i, ev, ids[i], i+1)
		}
	}
	if code := all[1].Details.ExitCode; code != api.Code(7) {
		t.Errorf("exit event of exit 7: exitCode %v (%+v)", code, all[1])
	}
	// Reconnecting with the first cursor: the two after it, nothing else.
	since := all[0].Cursor
	if evs := collect(t, r.client, apiclient.EventsQuery{Since: &since}, 2); evs[0].SessionID != ids[1] || evs[1].SessionID != ids[2] {
		t.Errorf("since %d: %+v", since, evs)
	}
	// Only a1's: the first and the third; then a live one of a1's arrives
	// while a2's is skipped.
	done := make(chan []api.Event, 1)
	go func() { done <- collect(t, r.client, apiclient.EventsQuery{Since: &zero, Agent: "a1"}, 3) }()
	runBackground(t, r.client, "a2", "echo skipped")
	live := runBackground(t, r.client, "a1", "echo live")
	evs := <-done
	if evs[0].SessionID != ids[0] || evs[1].SessionID != ids[2] || evs[2].SessionID != live {
		t.Errorf("agent a1: %+v", evs)
	}
}

// TestRealEventsSlowReaderMissesNothing: events published while a reader
// does not read (600, more than a live subscriber's 256 buffer) all reach
// it once it reads, in order.
func TestRealEventsSlowReaderMissesNothing(t *testing.T) {
	r, mgr := startJournalDaemon(t, t.TempDir(), 0, Options{})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	zero := int64(0)
	st, err := r.client.EventsSince(ctx, apiclient.EventsQuery{Since: &zero})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	const n = 600
	for i := 0; i < n; i++ {
		mgr.Publish(api.Event{Type: "approval", Text: fmt.Sprintf("event %d", i)})
	}
	for i := 0; i < n; i++ {
		var ev api.Event
		if err := st.Next(&ev); err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		if ev.Cursor != int64(i+1) || ev.Text != fmt.Sprintf("event %d", i) {
			t.Fatalf("event %d: %+v", i, ev)
		}
	}
}

// TestRealEventsFellOffTheEnd: a cursor older than the bounded journal
// holds gets a "gap" event saying how many were lost, then the rest.
func TestRealEventsFellOffTheEnd(t *testing.T) {
	r, mgr := startJournalDaemon(t, t.TempDir(), 2000, Options{})
	for i := 0; i < 200; i++ {
		mgr.Publish(api.Event{Type: "approval", Text: fmt.Sprintf("event %d", i)})
	}
	since := int64(5)
	evs := collect(t, r.client, apiclient.EventsQuery{Since: &since}, 2)
	gap, first := evs[0], evs[1]
	if gap.Type != api.EventGap || *gap.Details.Missed != first.Cursor-6 || gap.Cursor != first.Cursor-1 {
		t.Fatalf("first events after cursor 5: %+v then %+v, want a gap counting the %d missed", gap, first, first.Cursor-6)
	}
	if first.Cursor <= 6 {
		t.Fatalf("the journal still holds cursor 6 (first %d): the test did not overflow it", first.Cursor)
	}
	// A bad cursor is refused.
	if _, err := r.client.Call(t.Context(), "GET", "/v1/events?since=x", nil); err == nil {
		t.Error("since=x accepted")
	}
}

// TestRealEventsPinnedAgent: over TCP an agent token sees only its agent's
// events from the journal, may not ask for another agent's, and is not
// told how many events of others it missed. Its session streams are
// scoped to it too.
func TestRealEventsPinnedAgent(t *testing.T) {
	const tool, aliceTok = "tool-token-for-the-tests", "alice-token-for-the-tests"
	r, mgr := startJournalDaemon(t, t.TempDir(), 1500, Options{Listen: "127.0.0.1:0", Token: tool,
		AgentTokens: map[string]string{aliceTok: "alice"}})
	base := "http://" + r.srv.TCPAddr().String()
	alice := tcpclient.New(base, aliceTok, nil)
	defer alice.CloseIdleConnections()
	for i := 0; i < 100; i++ {
		mgr.Publish(api.Event{Type: "approval", AgentID: "bob", Text: fmt.Sprintf("bob %d", i)})
	}
	mgr.Publish(api.Event{Type: "approval", AgentID: "alice", Text: "alice's"})
	zero := int64(0)
	evs := collect(t, alice, apiclient.EventsQuery{Since: &zero}, 2)
	if evs[0].Type != api.EventGap || evs[0].Details.Missed != nil {
		t.Errorf("pinned gap: %+v, want a gap without a count", evs[0])
	}
	if evs[1].AgentID != "alice" || evs[1].Text != "alice's" {
		t.Errorf("pinned: %+v, want alice's event alone", evs[1])
	}
	_, err := alice.EventsSince(t.Context(), apiclient.EventsQuery{Agent: "bob"})
	var apiErr *apiclient.APIError
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusForbidden {
		t.Errorf("alice asking for bob's events: %v, want 403", err)
	}
	// Bob's session is not alice's to follow, whatever agent she names.
	res, err := r.client.Exec(t.Context(), api.ExecParams{Command: "echo secret", Background: true, AgentID: "bob"})
	if err != nil {
		t.Fatal(err)
	}
	id := res.Details.SessionID
	if _, err := alice.SessionStream(t.Context(), "bob", "", id, 0, false); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound {
		t.Errorf("alice following bob's session: %v, want 404", err)
	}
}
