package sessions

import (
	"context"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sandboxctl/sandboxctl/sessions/toolapi"

	"github.com/sandboxctl/sandboxctl/api"

	"github.com/sandboxctl/sandboxctl/sessions/config"
	"github.com/sandboxctl/sandboxctl/sessions/keys"
	"github.com/sandboxctl/sandboxctl/vocab"
)

// bg starts a background session on the sandbox fake host and returns its id
// and process.
func bg(t *testing.T, m *Manager, h *fakeHost, p api.ExecParams, pty bool) (string, *fakeProc) {
	t.Helper()
	proc := newFakeProc(pty)
	startWith(h, proc)
	p.Background = true
	p.PTY = pty
	if p.Command == "" {
		p.Command = "sleep 100"
	}
	r, err := m.Exec(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	id := r.Details.SessionID
	if id == "" {
		t.Fatalf("no session id: %v", r.Details)
	}
	return id, proc
}

// waitDone waits until session id has finished.
func waitDone(t *testing.T, m *Manager, id string) {
	t.Helper()
	m.mu.Lock()
	s := m.sessions[id]
	m.mu.Unlock()
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		t.Fatalf("session %s did not finish", id)
	}
}

func TestProcessUnknownAction(t *testing.T) {
	m, _ := newTestManager(t, nil)
	_, err := m.Process(context.Background(), api.ProcessParams{Action: "explode"})
	if !errors.Is(err, toolapi.ErrInvalidInput) || !strings.Contains(err.Error(), "list, poll, log, write, send-keys, paste, submit, kill, clear, remove, resize") {
		t.Fatalf("err = %v", err)
	}
	_, err = m.Process(context.Background(), api.ProcessParams{Action: "poll"})
	var ie *toolapi.InputError
	if !errors.As(err, &ie) || ie.Field != "sessionId" {
		t.Fatalf("missing sessionId: %v", err)
	}
}

func TestProcessScoping(t *testing.T) {
	m, hosts := newTestManager(t, nil)
	idA, procA := bg(t, m, hosts["sandbox"], api.ExecParams{SessionKey: "A", AgentID: "shared-agent"}, false)
	idB, _ := bg(t, m, hosts["sandbox"], api.ExecParams{SessionKey: "B", AgentID: "shared-agent"}, false)
	idAgent, _ := bg(t, m, hosts["sandbox"], api.ExecParams{AgentID: "A"}, false) // agentId "A" is not sessionKey "A"
	idDefault, _ := bg(t, m, hosts["sandbox"], api.ExecParams{}, false)

	listIDs := func(p api.ProcessParams) string {
		p.Action = "list"
		r, err := m.Process(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, s := range r.Details.Sessions {
			ids = append(ids, s.SessionID)
		}
		return strings.Join(ids, ",")
	}
	for _, tt := range []struct {
		p    api.ProcessParams
		want string
	}{
		{api.ProcessParams{SessionKey: "A", AgentID: "shared-agent"}, idA},
		{api.ProcessParams{SessionKey: "A"}, ""},
		{api.ProcessParams{SessionKey: "A", AgentID: "other"}, ""}, // same key, another agent
		{api.ProcessParams{SessionKey: "B", AgentID: "shared-agent"}, idB},
		{api.ProcessParams{AgentID: "A"}, idAgent},
		{api.ProcessParams{AgentID: "shared-agent"}, ""},
		{api.ProcessParams{}, idDefault},
	} {
		if got := listIDs(tt.p); got != tt.want {
			t.Errorf("list %+v = %q, want %q", tt.p, got, tt.want)
		}
	}

	// Session B (and everyone else) cannot touch A's session, whatever the action.
	for _, action := range []string{"poll", "log", "write", "send-keys", "paste", "submit", "kill", "clear", "remove", "resize"} {
		for _, caller := range []api.ProcessParams{{SessionKey: "B", AgentID: "shared-agent"}, {AgentID: "A"}, {}, {AgentID: "shared-agent"},
			{SessionKey: "A"}, {SessionKey: "A", AgentID: "other"}} {
			p := caller
			p.Action, p.SessionID, p.Data, p.Keys, p.Text = action, idA, "x", []string{"enter"}, "t"
			p.TimeoutMs = ptr(30000.0)
			p.Cols, p.Rows = ptr(80), ptr(24)
			start := time.Now()
			r, err := m.Process(context.Background(), p)
			if err != nil {
				t.Fatalf("%s by %+v: %v", action, caller, err)
			}
			if text(r) != "No session found for "+idA || r.Details.Error != "not_found" || !errors.Is(r.Err(), api.ErrNoSession) {
				t.Fatalf("%s by %+v = %q %v", action, caller, text(r), r.Details)
			}
			if time.Since(start) > 10*time.Second { // a poll would wait its 30 s
				t.Fatalf("%s on a foreign id took %s", action, time.Since(start))
			}
		}
	}
	if procA.kills.Load() != 0 || procA.stdinString() != "" {
		t.Fatal("a foreign caller reached session A")
	}
	// And unknown ids answer at once too.
	r, _ := m.Process(context.Background(), api.ProcessParams{Action: "poll", SessionID: "no-such-id", TimeoutMs: ptr(30000.0)})
	if text(r) != "No session found for no-such-id" {
		t.Fatalf("unknown id: %q", text(r))
	}
	if (api.Result{Details: api.Details{Status: "completed"}}).Err() != nil {
		t.Fatal("ordinary result has an Err")
	}
}

func TestProcessListFormat(t *testing.T) {
	clk := newClock()
	m, hosts := newTestManager(t, nil, func(o *Options) { o.Now = clk.Now })
	id1, p1 := bg(t, m, hosts["sandbox"], api.ExecParams{Command: "npm run build --watch"}, false)
	clk.Advance(time.Second)
	id2, _ := bg(t, m, hosts["sandbox"], api.ExecParams{Command: "FOO=1 /usr/bin/python3 -u server.py"}, false)
	p1.exit(0, "")
	waitDone(t, m, id1)
	clk.Advance(65 * time.Second)
	r, _ := m.Process(context.Background(), api.ProcessParams{Action: "list"})
	want := fmt.Sprintf("%s running 1m05s :: python3 server.py\n%s completed 1s :: npm run", id2, id1)
	if text(r) != want {
		t.Fatalf("list =\n%s\nwant\n%s", text(r), want)
	}
	// empty scope
	r, _ = m.Process(context.Background(), api.ProcessParams{Action: "list", AgentID: "nobody"})
	if text(r) != "No running or recent sessions." {
		t.Fatalf("empty list = %q", text(r))
	}
}

// Sessions lists every scope's visible sessions with their agent and
// session key, newest first; an agent id keeps that agent's only.
func TestSessionsAcrossScopes(t *testing.T) {
	clk := newClock()
	m, hosts := newTestManager(t, nil, func(o *Options) { o.Now = clk.Now })
	idA, _ := bg(t, m, hosts["sandbox"], api.ExecParams{Command: "sleep 1", AgentID: "a", SessionKey: "k1"}, false)
	clk.Advance(time.Second)
	idB, _ := bg(t, m, hosts["sandbox"], api.ExecParams{Command: "sleep 2", AgentID: "b"}, false)
	type row struct{ id, agent, key, command string }
	rows := func(agent string) []row {
		var out []row
		for _, s := range m.Sessions(agent) {
			out = append(out, row{s.SessionID, *s.AgentID, *s.SessionKey, s.Command})
		}
		return out
	}
	if got, want := rows(""), []row{{idB, "b", "", "sleep 2"}, {idA, "a", "k1", "sleep 1"}}; !slices.Equal(got, want) {
		t.Fatalf("every scope: %v, want %v", got, want)
	}
	if got, want := rows("a"), []row{{idA, "a", "k1", "sleep 1"}}; !slices.Equal(got, want) {
		t.Fatalf("agent a: %v, want %v", got, want)
	}
	if got := rows("nobody"); len(got) != 0 {
		t.Fatalf("agent nobody: %v", got)
	}
}

func TestProcessPoll(t *testing.T) {
	m, hosts := newTestManager(t, nil)
	id, p := bg(t, m, hosts["sandbox"], api.ExecParams{}, false)
	poll := func(timeout float64) string {
		r, err := m.Process(context.Background(), api.ProcessParams{Action: "poll", SessionID: id, TimeoutMs: ptr(timeout)})
		if err != nil {
			t.Fatal(err)
		}
		return text(r)
	}
	if got := poll(0); got != "(no new output)\n\nProcess still running." {
		t.Fatalf("empty poll = %q", got)
	}
	start := time.Now()
	if got := poll(50); got != "(no new output)\n\nProcess still running." || time.Since(start) < 40*time.Millisecond {
		t.Fatalf("timed poll = %q after %s", got, time.Since(start))
	}
	p.say("out\n")
	p.sayErr("err\n")
	time.Sleep(50 * time.Millisecond)
	if got := poll(0); got != "out\nerr\n\nProcess still running." {
		t.Fatalf("poll = %q", got)
	}
	if got := poll(0); got != "(no new output)\n\nProcess still running." {
		t.Fatalf("poll after drain = %q", got)
	}
	// a poll waiting for output wakes up on exit
	go func() { time.Sleep(30 * time.Millisecond); p.exit(-1, "SIGTERM") }()
	if got := poll(10000); got != "(no new output)\n\nProcess exited with signal SIGTERM." {
		t.Fatalf("exit poll = %q", got)
	}
	// negative timeout is bad input
	if _, err := m.Process(context.Background(), api.ProcessParams{Action: "poll", SessionID: id, TimeoutMs: ptr(-1.0)}); !errors.Is(err, toolapi.ErrInvalidInput) {
		t.Fatalf("negative timeoutMs: %v", err)
	}
}

func TestProcessPollPendingCap(t *testing.T) {
	m, hosts := newTestManager(t, func(c *config.File) { c.Exec.PendingMaxOutputChars = 1000 })
	id, p := bg(t, m, hosts["sandbox"], api.ExecParams{}, false)
	p.say(strings.Repeat("a", 1500) + strings.Repeat("b", 500))
	p.exit(0, "")
	waitDone(t, m, id)
	r, _ := m.Process(context.Background(), api.ProcessParams{Action: "poll", SessionID: id})
	want := "[... 1000 chars dropped ...]\n" + strings.Repeat("a", 500) + strings.Repeat("b", 500) + "\n\nProcess exited with code 0."
	if text(r) != want {
		t.Fatalf("poll = %q...", text(r)[:60])
	}
	// the log still has everything (aggregated cap is 200000)
	lr, _ := m.Process(context.Background(), api.ProcessParams{Action: "log", SessionID: id})
	if *lr.Details.TotalChars != 2000 || *lr.Details.Truncated {
		t.Fatalf("log details = %v", lr.Details)
	}
}

func TestProcessLog(t *testing.T) {
	m, hosts := newTestManager(t, nil)
	id, p := bg(t, m, hosts["sandbox"], api.ExecParams{}, false)
	var b strings.Builder
	for i := range 250 {
		fmt.Fprintf(&b, "line %d\n", i)
	}
	p.say(b.String())
	p.exit(0, "")
	waitDone(t, m, id)
	lines := func(from, to int) string {
		var out []string
		for i := from; i < to; i++ {
			out = append(out, fmt.Sprintf("line %d", i))
		}
		return strings.Join(out, "\n")
	}
	tests := []struct {
		name          string
		offset, limit *int
		want          string
		err           bool
	}{
		{"default last 200 with hint", nil, nil, lines(50, 250) + "\n\n[showing lines 50-249 of 250; use offset and limit to page, e.g. offset:0 limit:200]", false},
		{"limit only", nil, ptr(3), lines(247, 250), false},
		{"offset and limit", ptr(10), ptr(2), lines(10, 12), false},
		{"offset only to end", ptr(240), nil, lines(240, 250), false},
		{"offset past end", ptr(999), nil, "(no output)", false},
		{"negative offset", ptr(-1), nil, "", true},
		{"zero limit", nil, ptr(0), "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := m.Process(context.Background(), api.ProcessParams{Action: "log", SessionID: id, Offset: tt.offset, Limit: tt.limit})
			if tt.err {
				if !errors.Is(err, toolapi.ErrInvalidInput) {
					t.Fatalf("want invalid input, got %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if text(r) != tt.want {
				t.Fatalf("log = %q\nwant %q", text(r), tt.want)
			}
			if *r.Details.TotalLines != 250 || *r.Details.Truncated || *r.Details.TotalChars != len(b.String()) {
				t.Fatalf("details = %v", r.Details)
			}
		})
	}
}

// TestSecurityProcessLogHugeWindow replays issue 25 finding 11 on the
// manager: offset+limit from the request overflowed into a negative slice
// bound, and the panic took the daemon down. Every window is now clamped to
// the log without adding the two.
func TestSecurityProcessLogHugeWindow(t *testing.T) {
	m, hosts := newTestManager(t, nil)
	id, p := bg(t, m, hosts["sandbox"], api.ExecParams{}, false)
	p.say("a\nb\nc\n")
	p.exit(0, "")
	waitDone(t, m, id)
	for _, tt := range []struct {
		name          string
		offset, limit *int
		want          string
		start, n      int
	}{
		{"2^62 and 2^62", ptr(1 << 62), ptr(1 << 62), "(no output)", 3, 0},
		{"MaxInt and MaxInt", ptr(math.MaxInt), ptr(math.MaxInt), "(no output)", 3, 0},
		{"offset 1 and MaxInt", ptr(1), ptr(math.MaxInt), "b\nc", 1, 2},
		{"MaxInt limit alone", nil, ptr(math.MaxInt), "a\nb\nc", 0, 3},
		{"MaxInt offset alone", ptr(math.MaxInt), nil, "(no output)", 3, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r, err := m.Process(context.Background(), api.ProcessParams{Action: "log", SessionID: id, Offset: tt.offset, Limit: tt.limit})
			if err != nil {
				t.Fatal(err)
			}
			if text(r) != tt.want || *r.Details.Offset != tt.start || *r.Details.Limit != tt.n {
				t.Fatalf("log = %q, details %v; want %q from line %d, %d lines", text(r), r.Details, tt.want, tt.start, tt.n)
			}
		})
	}
}

func TestProcessLogTruncated(t *testing.T) {
	m, hosts := newTestManager(t, func(c *config.File) { c.Exec.MaxOutputChars = 1000 })
	id, p := bg(t, m, hosts["sandbox"], api.ExecParams{}, false)
	p.say(strings.Repeat("x\n", 1000))
	p.exit(0, "")
	waitDone(t, m, id)
	r, _ := m.Process(context.Background(), api.ProcessParams{Action: "log", SessionID: id, Offset: ptr(0), Limit: ptr(2)})
	if text(r) != "[... 1000 chars dropped ...]\nx\nx" || !*r.Details.Truncated || *r.Details.TotalLines != 500 {
		t.Fatalf("log = %q %v", text(r), r.Details)
	}
}

func TestProcessWrite(t *testing.T) {
	m, hosts := newTestManager(t, nil)
	id, p := bg(t, m, hosts["sandbox"], api.ExecParams{Command: "cat"}, false)
	r, err := m.Process(context.Background(), api.ProcessParams{Action: "write", SessionID: id, Data: "hello\n"})
	if err != nil || text(r) != "Wrote 6 bytes to session "+id+"." {
		t.Fatalf("write: %q %v", text(r), err)
	}
	if _, err := m.Process(context.Background(), api.ProcessParams{Action: "write", SessionID: id}); !errors.Is(err, toolapi.ErrInvalidInput) {
		t.Fatalf("empty write: %v", err)
	}
	r, err = m.Process(context.Background(), api.ProcessParams{Action: "write", SessionID: id, Data: "bye", EOF: true})
	if err != nil || !strings.HasSuffix(text(r), "Stdin closed.") {
		t.Fatalf("eof write: %q %v", text(r), err)
	}
	if p.stdinString() != "hello\nbye" || !p.stdinClosed {
		t.Fatalf("stdin = %q closed=%v", p.stdinString(), p.stdinClosed)
	}
	_, err = m.Process(context.Background(), api.ProcessParams{Action: "write", SessionID: id, Data: "more"})
	if !errors.Is(err, toolapi.ErrInvalidInput) || !strings.Contains(err.Error(), "no open stdin") {
		t.Fatalf("write after eof: %v", err)
	}
	p.exit(0, "")
	waitDone(t, m, id)
	_, err = m.Process(context.Background(), api.ProcessParams{Action: "write", SessionID: id, Data: "late"})
	if !errors.Is(err, toolapi.ErrInvalidInput) || !strings.Contains(err.Error(), "has exited") {
		t.Fatalf("write to finished: %v", err)
	}
}

func TestProcessWriteNoStdin(t *testing.T) {
	// A foreground run that yields has stdin closed (it was started with
	// KeepStdin=false): writing to it is a specific error.
	m, hosts := newTestManager(t, func(c *config.File) { c.Exec.BackgroundMs = 10 })
	p := newFakeProc(false)
	startWith(hosts["sandbox"], p)
	r, err := m.Exec(context.Background(), api.ExecParams{Command: "sleep 100"})
	if err != nil || r.Details.Status != api.StatusRunning {
		t.Fatalf("%v %v", r.Details, err)
	}
	_, err = m.Process(context.Background(), api.ProcessParams{Action: "write", SessionID: r.Details.SessionID, Data: "x"})
	if !errors.Is(err, toolapi.ErrInvalidInput) || !strings.Contains(err.Error(), "no open stdin") {
		t.Fatalf("write without stdin: %v", err)
	}
}

func TestProcessKeysPasteSubmit(t *testing.T) {
	m, hosts := newTestManager(t, nil)
	id, p := bg(t, m, hosts["sandbox"], api.ExecParams{Command: "vim"}, true)
	steps := []api.ProcessParams{
		{Action: "send-keys", Literal: "ls", Keys: []string{"enter", "C-c", "up", "M-x", "^D", "f5"}, Hex: []string{"1b", "0x41"}},
		{Action: "paste", Text: "a\nb"},
		{Action: "paste", Text: "raw", Bracketed: ptr(false)},
		{Action: "submit"},
	}
	for _, s := range steps {
		s.SessionID = id
		if _, err := m.Process(context.Background(), s); err != nil {
			t.Fatalf("%s: %v", s.Action, err)
		}
	}
	want := "ls" + "\x1bA" + "\r\x03\x1b[A\x1bx\x04\x1b[15~" + keys.PasteStart + "a\nb" + keys.PasteEnd + "raw" + "\r"
	if got := p.stdinString(); got != want {
		t.Fatalf("stdin = %q\nwant    %q", got, want)
	}
	_, err := m.Process(context.Background(), api.ProcessParams{Action: "send-keys", SessionID: id, Keys: []string{"enter", "hyperjump"}})
	if !errors.Is(err, toolapi.ErrInvalidInput) || !strings.Contains(err.Error(), `"hyperjump"`) || !errors.Is(err, keys.ErrUnknownKey) {
		t.Fatalf("unknown key: %v", err)
	}
	if _, err := m.Process(context.Background(), api.ProcessParams{Action: "send-keys", SessionID: id}); !errors.Is(err, toolapi.ErrInvalidInput) {
		t.Fatalf("empty send-keys: %v", err)
	}
	if _, err := m.Process(context.Background(), api.ProcessParams{Action: "send-keys", SessionID: id, Hex: []string{"zz"}}); !errors.Is(err, toolapi.ErrInvalidInput) {
		t.Fatalf("bad hex: %v", err)
	}
	if _, err := m.Process(context.Background(), api.ProcessParams{Action: "paste", SessionID: id}); !errors.Is(err, toolapi.ErrInvalidInput) {
		t.Fatalf("empty paste: %v", err)
	}
}

func TestProcessResize(t *testing.T) {
	m, hosts := newTestManager(t, nil)
	id, p := bg(t, m, hosts["sandbox"], api.ExecParams{}, true)
	if _, err := m.Process(context.Background(), api.ProcessParams{Action: "resize", SessionID: id, Cols: ptr(200), Rows: ptr(50)}); err != nil {
		t.Fatal(err)
	}
	if p.size != [2]int{200, 50} {
		t.Fatalf("size = %v", p.size)
	}
	for _, pp := range []api.ProcessParams{{}, {Cols: ptr(0), Rows: ptr(10)}, {Cols: ptr(10)}} {
		pp.Action, pp.SessionID = "resize", id
		if _, err := m.Process(context.Background(), pp); !errors.Is(err, toolapi.ErrInvalidInput) {
			t.Fatalf("resize %+v: %v", pp, err)
		}
	}
	id2, _ := bg(t, m, hosts["sandbox"], api.ExecParams{}, false)
	if _, err := m.Process(context.Background(), api.ProcessParams{Action: "resize", SessionID: id2, Cols: ptr(80), Rows: ptr(24)}); !errors.Is(err, toolapi.ErrInvalidInput) {
		t.Fatalf("resize non-pty: %v", err)
	}
}

func TestProcessKillClearRemove(t *testing.T) {
	m, hosts := newTestManager(t, nil)
	id, p := bg(t, m, hosts["sandbox"], api.ExecParams{}, false)

	_, err := m.Process(context.Background(), api.ProcessParams{Action: "clear", SessionID: id})
	if !errors.Is(err, toolapi.ErrInvalidInput) || !strings.Contains(err.Error(), "still running") {
		t.Fatalf("clear running: %v", err)
	}
	r, err := m.Process(context.Background(), api.ProcessParams{Action: "kill", SessionID: id})
	if err != nil || r.Details.Status != api.StatusFailed || *r.Details.Signal != "SIGTERM" || p.kills.Load() != 1 {
		t.Fatalf("kill: %q %v %v", text(r), r.Details, err)
	}
	r, _ = m.Process(context.Background(), api.ProcessParams{Action: "kill", SessionID: id})
	if !strings.Contains(text(r), "is not running") || p.kills.Load() != 1 {
		t.Fatalf("second kill: %q", text(r))
	}
	pr, _ := m.Process(context.Background(), api.ProcessParams{Action: "poll", SessionID: id})
	if !strings.HasSuffix(text(pr), "Process exited with signal SIGTERM.") {
		t.Fatalf("poll after kill = %q", text(pr))
	}
	if _, err := m.Process(context.Background(), api.ProcessParams{Action: "clear", SessionID: id}); err != nil {
		t.Fatal(err)
	}
	if r, _ := m.Process(context.Background(), api.ProcessParams{Action: "poll", SessionID: id}); r.Details.Error != "not_found" {
		t.Fatalf("cleared session still there: %q", text(r))
	}

	// remove kills a running session and forgets it at once
	id2, p2 := bg(t, m, hosts["sandbox"], api.ExecParams{}, false)
	r, err = m.Process(context.Background(), api.ProcessParams{Action: "remove", SessionID: id2})
	if err != nil || !*r.Details.Killed {
		t.Fatalf("remove: %v %v", r.Details, err)
	}
	if r, _ := m.Process(context.Background(), api.ProcessParams{Action: "log", SessionID: id2}); r.Details.Error != "not_found" {
		t.Fatal("removed session still visible")
	}
	deadline := time.Now().Add(5 * time.Second)
	for p2.kills.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if p2.kills.Load() == 0 {
		t.Fatal("remove did not kill")
	}
}

func TestProcessKillNoSignalReported(t *testing.T) {
	// The host reports a plain exit after the kill: the session is still
	// "failed" and records SIGKILL.
	m, hosts := newTestManager(t, nil)
	id, p := bg(t, m, hosts["sandbox"], api.ExecParams{}, false)
	p.killFunc = func(p *fakeProc) { p.exit(143, "") }
	r, _ := m.Process(context.Background(), api.ProcessParams{Action: "kill", SessionID: id})
	if r.Details.Status != api.StatusFailed || *r.Details.Signal != "SIGKILL" || r.Details.Reason != "killed" {
		t.Fatalf("kill: %v", r.Details)
	}
}

func TestSweepTTL(t *testing.T) {
	clk := newClock()
	m, hosts := newTestManager(t, func(c *config.File) { c.Exec.CleanupMs = 60000 }, func(o *Options) { o.Now = clk.Now })
	id, p := bg(t, m, hosts["sandbox"], api.ExecParams{}, false)
	idRunning, _ := bg(t, m, hosts["sandbox"], api.ExecParams{}, false)
	p.exit(0, "")
	waitDone(t, m, id)
	clk.Advance(59 * time.Second)
	if n := m.sweep(); n != 0 {
		t.Fatalf("swept %d before the TTL", n)
	}
	clk.Advance(time.Second)
	if n := m.sweep(); n != 1 {
		t.Fatalf("swept %d at the TTL, want 1", n)
	}
	if r, _ := m.Process(context.Background(), api.ProcessParams{Action: "poll", SessionID: id}); r.Details.Error != "not_found" {
		t.Fatal("expired session still visible")
	}
	clk.Advance(10 * time.Hour)
	m.sweep()
	if r, _ := m.Process(context.Background(), api.ProcessParams{Action: "poll", SessionID: idRunning}); r.Details.Error == "not_found" {
		t.Fatal("running session swept")
	}
	if m.Limits().SweepEvery != 30*time.Second {
		t.Fatalf("sweep interval %s", m.Limits().SweepEvery)
	}
}

func TestExitEvents(t *testing.T) {
	tests := []struct {
		name       string
		emptyOK    bool
		notify     bool
		run        func(p *fakeProc)
		want       string // regexp; "" = no event
		foreground bool
		silent     bool // details.notify false: the agent is not told
	}{
		{"completed", false, true, func(p *fakeProc) { p.say(strings.Repeat("y", 300) + "\nDONE\n"); p.exit(0, "") },
			`^Exec completed \(ID, code 0\) :: y{175}\nDONE$`, false, false},
		{"failed signal", false, true, func(p *fakeProc) { p.say("boom"); p.exit(-1, "SIGKILL") }, `^Exec failed \(ID, signal SIGKILL\) :: boom$`, false, false},
		{"non-zero", false, true, func(p *fakeProc) { p.exit(7, "") }, `^Exec completed \(ID, code 7\)$`, false, false},
		// No exit code exists: the reason, not a made-up "code -1".
		{"failed without a code", false, true, func(p *fakeProc) { p.say("x"); p.exitErr(errors.New("supervisor lost")) },
			`^Exec failed \(ID\): supervisor lost :: x$`, false, false},
		// Every end has its event (issue 31); the config only decides
		// whether the agent is told.
		{"empty success not notified", false, true, func(p *fakeProc) { p.exit(0, "") }, `^Exec completed \(ID, code 0\)$`, false, true},
		{"empty success when enabled", true, true, func(p *fakeProc) { p.exit(0, "") }, `^Exec completed \(ID, code 0\)$`, false, false},
		{"notify off", false, false, func(p *fakeProc) { p.say("x"); p.exit(0, "") }, `^Exec completed \(ID, code 0\) :: x$`, false, true},
		{"foreground has none", false, true, func(p *fakeProc) { p.say("x"); p.exit(0, "") }, "", true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, hosts := newTestManager(t, func(c *config.File) {
				c.Exec.NotifyOnExit, c.Exec.NotifyOnExitEmptySuccess = tt.notify, tt.emptyOK
			})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			events := m.Subscribe(ctx)
			p := newFakeProc(false)
			startWith(hosts["sandbox"], p)
			var id string
			if tt.foreground {
				go tt.run(p)
				if _, err := m.Exec(context.Background(), api.ExecParams{Command: "x", AgentID: "ag", SessionKey: "sk"}); err != nil {
					t.Fatal(err)
				}
			} else {
				r, err := m.Exec(context.Background(), api.ExecParams{Command: "x", Background: true, AgentID: "ag", SessionKey: "sk"})
				if err != nil {
					t.Fatal(err)
				}
				id = r.Details.SessionID
				tt.run(p)
				waitDone(t, m, id)
			}
			select {
			case ev := <-events:
				if tt.want == "" {
					t.Fatalf("unexpected event %q", ev.Text)
				}
				re := regexp.MustCompile(strings.ReplaceAll(tt.want, "ID", regexp.QuoteMeta(id)))
				if !re.MatchString(ev.Text) || ev.Type != "exit" || ev.SessionID != id || ev.AgentID != "ag" || ev.SessionKey != "sk" {
					t.Fatalf("event = %+v, want %s", ev, tt.want)
				}
				if *ev.Details.Notify != !tt.silent {
					t.Fatalf("event details.notify = %v, want %v", *ev.Details.Notify, !tt.silent)
				}
			case <-time.After(200 * time.Millisecond):
				if tt.want != "" {
					t.Fatal("no event")
				}
			}
		})
	}
}

func TestSubscribeClosed(t *testing.T) {
	m, _ := newTestManager(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	ch := m.Subscribe(ctx)
	cancel()
	select {
	case _, ok := <-ch:
		if ok {
			t.Fatal("event on a cancelled subscription")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("subscription not closed after ctx ended")
	}
	ch2 := m.Subscribe(context.Background())
	if err := m.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, ok := <-ch2; ok {
		t.Fatal("subscription not closed by Close")
	}
}

func TestCloseKillsEverything(t *testing.T) {
	cfg := config.Default()
	h := &fakeHost{}
	m, err := New(Options{Config: cfg, Hosts: map[vocab.Host]Host{"sandbox": h}})
	if err != nil {
		t.Fatal(err)
	}
	var procs []*fakeProc
	for range 5 {
		p := newFakeProc(false)
		procs = append(procs, p)
		startWith(h, p)
		if _, err := m.Exec(context.Background(), api.ExecParams{Command: "sleep 1000", Background: true}); err != nil {
			t.Fatal(err)
		}
	}
	// One foreground run in its yield window too.
	fg := newFakeProc(false)
	procs = append(procs, fg)
	startWith(h, fg)
	res := make(chan api.Result, 1)
	go func() { r, _ := m.Exec(context.Background(), api.ExecParams{Command: "sleep 1000"}); res <- r }()
	for m.liveCount() < 6 {
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := m.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for i, p := range procs {
		if p.kills.Load() == 0 {
			t.Fatalf("process %d not killed by Close", i)
		}
	}
	if r := <-res; r.Details.Status != api.StatusFailed || r.Details.Reason != "manager closed" {
		t.Fatalf("foreground result after Close: %v", r.Details)
	}
	if err := m.Close(ctx); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestPTYDSRAnsweredAcrossChunks(t *testing.T) {
	m, hosts := newTestManager(t, nil)
	id, p := bg(t, m, hosts["sandbox"], api.ExecParams{}, true)
	p.say("\x1b[31mred\x1b[0m \x1b[")
	time.Sleep(20 * time.Millisecond) // let the reader see the split query
	p.say("?6n done\u200b\n")
	select {
	case <-p.written:
	case <-time.After(5 * time.Second):
		t.Fatal("DSR not answered")
	}
	if got := p.stdinString(); got != "\x1b[1;1R" {
		t.Fatalf("reply = %q", got)
	}
	p.exit(0, "")
	waitDone(t, m, id)
	r, _ := m.Process(context.Background(), api.ProcessParams{Action: "log", SessionID: id})
	if text(r) != "\x1b[31mred\x1b[0m  done" {
		t.Fatalf("log = %q", text(r))
	}
}
