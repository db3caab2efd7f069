// Package hosttest is the conformance suite every sessions.Host runs: the
// same exec and process tool calls (docs/tools.md), through a sessions.Manager
// wired to the host under test, with the same assertions on details fields
// and texts. A host package's test calls Run with a factory for its Target.
//
// The commands are POSIX sh that busybox runs too (the sandbox test image is
// busybox): no bash-isms, no GNU-only flags. Side effects are checked with
// Target.Inspect, outside the sessions machinery, so that "the tool says it
// was killed" is never taken as proof that it was.
package hosttest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sandboxctl/sandboxctl/api"

	"github.com/sandboxctl/sandboxctl/sessions/toolapi"
)

// Tools is the pair of tools under test (toolapi.Tools): *sessions.Manager,
// or a client of the daemon's HTTP API.
type Tools = toolapi.Tools

// Target is one host under test.
type Target struct {
	// Tools runs the exec and process tools, configured so that commands on
	// Host run without approval (security full, ask off).
	Tools Tools
	// Host is the value for ExecParams.Host ("gateway", "sandbox", "node").
	Host string
	// AgentID and SessionKey are the caller identity used for every call.
	AgentID, SessionKey string
	// Inspect runs a shell command where the tools' commands run, but
	// outside the sessions machinery (os/exec locally, docker exec for a
	// sandbox), and returns its combined output. It checks side effects.
	Inspect func(ctx context.Context, command string) (string, error)
	// Scratch is a directory writable by commands, as the commands see it.
	// Targets may share it: every case uses unique file names.
	Scratch string
	// Restart stands for the daemon dying (its tools are dropped without
	// being closed, as a SIGKILL leaves them) and starting again on the same
	// host state: it returns the tools of a new daemon that recovered the
	// host's sessions. Nil for a host that keeps no session across a
	// restart; the restart case is then skipped with that reason.
	Restart func(t *testing.T) Tools
	// RestartNode stands for the node agent dying (SIGKILL of `sandboxctl
	// node run`) and a new one starting on the same node state; it returns
	// once the new agent is connected. Nil for a host without node agents;
	// the node agent restart case is then skipped.
	RestartNode func(t *testing.T)
}

// Run runs every case as a parallel subtest, then the daemon restart case
// on its own (a new daemon takes over every session of the host, so nothing
// else may run then); newTarget is called once per subtest and should
// register its own cleanup with t.Cleanup.
func Run(t *testing.T, newTarget func(t *testing.T) Target) {
	t.Run("cases", func(t *testing.T) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				tg := newTarget(t)
				c.fn(t, &harness{t: t, tg: tg})
			})
		}
	})
	t.Run("DaemonRestartWhileRunning", func(t *testing.T) {
		testDaemonRestartWhileRunning(t, &harness{t: t, tg: newTarget(t)})
	})
	t.Run("NodeAgentRestartWhileRunning", func(t *testing.T) {
		testNodeAgentRestartWhileRunning(t, &harness{t: t, tg: newTarget(t)})
	})
}

var cases = []struct {
	name string
	fn   func(t *testing.T, h *harness)
}{
	{"ForegroundEcho", testForegroundEcho},
	{"NonZeroExit", testNonZeroExit},
	{"StdoutAndStderr", testStdoutAndStderr},
	{"EnvAndWorkdir", testEnvAndWorkdir},
	{"TimeoutKillsTree", testTimeoutKillsTree},
	{"TimeoutKillsSetsidChild", testTimeoutKillsSetsidChild},
	{"YieldThenPoll", testYieldThenPoll},
	{"BackgroundWriteEOF", testBackgroundWriteEOF},
	{"ForegroundCatGetsEOF", testForegroundCatGetsEOF},
	{"PTYIsTerminal", testPTYIsTerminal},
	{"PTYSize", testPTYSize},
	{"PTYResize", testPTYResize},
	{"PTYDeviceStatusReport", testPTYDSR},
	{"PTYSendKeys", testPTYSendKeys},
	{"PTYPaste", testPTYPaste},
	{"UnknownSession", testUnknownSession},
	{"KillBackground", testKillBackground},
	{"PIDIsTheCommands", testPIDIsTheCommands},
}

// harness wraps a Target with call helpers that fill in host and identity.
type harness struct {
	t  *testing.T
	tg Target
}

func (h *harness) exec(p api.ExecParams) api.Result {
	h.t.Helper()
	p.Host, p.AgentID, p.SessionKey = h.tg.Host, h.tg.AgentID, h.tg.SessionKey
	if p.Security == "" {
		p.Security = "full"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r, err := h.tg.Tools.Exec(ctx, p)
	if err != nil {
		h.t.Fatalf("exec %q: %v", p.Command, err)
	}
	checkShape(h.t, r)
	return r
}

func (h *harness) process(p api.ProcessParams) api.Result {
	h.t.Helper()
	r, err := h.processErr(p)
	if err != nil {
		h.t.Fatalf("process %s %s: %v", p.Action, p.SessionID, err)
	}
	return r
}

func (h *harness) processErr(p api.ProcessParams) (api.Result, error) {
	h.t.Helper()
	if p.AgentID == "" && p.SessionKey == "" {
		p.AgentID, p.SessionKey = h.tg.AgentID, h.tg.SessionKey
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r, err := h.tg.Tools.Process(ctx, p)
	if err == nil {
		checkShape(h.t, r)
	}
	return r, err
}

func (h *harness) inspect(command string) string {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := h.tg.Inspect(ctx, command)
	if err != nil {
		h.t.Fatalf("inspect %q: %v (output %q)", command, err, out)
	}
	return out
}

// scratchFile returns a unique path under Scratch.
func (h *harness) scratchFile(prefix string) string {
	return strings.TrimRight(h.tg.Scratch, "/") + "/" + prefix + "-" + randomHex()
}

// exists reports whether path exists where the commands run.
func (h *harness) exists(path string) bool {
	h.t.Helper()
	out := h.inspect("if [ -e '" + path + "' ]; then echo PRESENT; else echo ABSENT; fi")
	switch strings.TrimSpace(out) {
	case "PRESENT":
		return true
	case "ABSENT":
		return false
	}
	h.t.Fatalf("inspect printed %q", out)
	return false
}

// waitGone waits until no process whose pid the command under test wrote
// to pidFile is alive where the commands run (a zombie counts as gone): a
// file such a process would have created later is then absent for good.
func (h *harness) waitGone(pidFile string, within time.Duration) {
	h.t.Helper()
	if !h.exists(pidFile) {
		h.t.Fatalf("%s is missing: the command never recorded its pid", pidFile)
	}
	script := `for p in $(cat '` + pidFile + `'); do ` +
		`if [ -d /proc/$p ] && ! grep -q '^State:[[:space:]]*Z' /proc/$p/status 2>/dev/null; then echo $p; fi; done; echo end`
	deadline := time.Now().Add(within)
	for {
		alive := strings.Fields(h.inspect(script))
		if len(alive) == 1 && alive[0] == "end" {
			return
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("processes %v of the command are still alive %v after it ended", alive[:len(alive)-1], within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// background starts p backgrounded and returns its session id; the session
// is removed (killed) when the test ends.
func (h *harness) background(p api.ExecParams) string {
	h.t.Helper()
	p.Background = true
	r := h.exec(p)
	d := r.Details
	wantStatus(h.t, r, api.StatusRunning)
	id := str(h.t, d, "sessionId")
	if id == "" {
		h.t.Fatalf("running result without sessionId: %+v", d)
	}
	h.t.Cleanup(func() {
		_, _ = h.processErr(api.ProcessParams{Action: "remove", SessionID: id})
	})
	return id
}

// pollUntil polls id (waiting up to 5 s per call) until the accumulated
// output matches want (and, if exited, the session has exited), and returns
// the accumulated output and the last result.
func (h *harness) pollUntil(id string, want *regexp.Regexp, exited bool, limit time.Duration) (string, api.Result) {
	h.t.Helper()
	var all strings.Builder
	deadline := time.Now().Add(limit)
	for {
		r := h.process(api.ProcessParams{Action: "poll", SessionID: id, TimeoutMs: ptr(5000.0)})
		text := text(r)
		body, _, _ := strings.Cut(text, "\n\nProcess ")
		if body != "(no new output)" {
			all.WriteString(body)
			all.WriteString("\n")
		}
		done := !exited || strings.Contains(text, "Process exited") || statusOf(r) != api.StatusRunning
		if want.MatchString(all.String()) && done {
			return all.String(), r
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("after %v, output %q does not match %q (exited wanted %v); last poll %q",
				limit, all.String(), want, exited, text)
		}
	}
}

func testForegroundEcho(t *testing.T, h *harness) {
	r := h.exec(api.ExecParams{Command: "echo hello"})
	d := wantStatus(t, r, api.StatusCompleted)
	if code := num(t, d, "exitCode"); code != 0 {
		t.Errorf("exitCode = %v, want 0", code)
	}
	if !strings.Contains(text(r), "hello") || strings.Contains(text(r), "exited with code") {
		t.Errorf("text = %q, want the output and no exit note", text(r))
	}
	if agg := str(t, d, "aggregated"); strings.TrimSpace(agg) != "hello" {
		t.Errorf("aggregated = %q, want hello", agg)
	}
	if ms := num(t, d, "durationMs"); ms < 0 || ms > 30000 {
		t.Errorf("durationMs = %v", ms)
	}
	if str(t, d, "cwd") == "" {
		t.Error("cwd is empty")
	}
}

func testNonZeroExit(t *testing.T, h *harness) {
	r := h.exec(api.ExecParams{Command: "echo oops; exit 3"})
	d := wantStatus(t, r, api.StatusCompleted)
	if code := num(t, d, "exitCode"); code != 3 {
		t.Errorf("exitCode = %v, want 3", code)
	}
	if txt := text(r); !strings.Contains(txt, "oops") || !strings.Contains(txt, "(Command exited with code 3)") {
		t.Errorf("text = %q, want the output and (Command exited with code 3)", txt)
	}
}

func testStdoutAndStderr(t *testing.T, h *harness) {
	r := h.exec(api.ExecParams{Command: "echo to-out; echo to-err >&2"})
	d := wantStatus(t, r, api.StatusCompleted)
	agg := str(t, d, "aggregated")
	if !strings.Contains(agg, "to-out") || !strings.Contains(agg, "to-err") {
		t.Errorf("aggregated = %q, want both streams", agg)
	}
}

func testEnvAndWorkdir(t *testing.T, h *harness) {
	r := h.exec(api.ExecParams{
		Command: `printf '%s|%s\n' "$SBX_CONFORMANCE" "$(pwd)"`,
		Env:     map[string]string{"SBX_CONFORMANCE": "it works"},
		Workdir: h.tg.Scratch,
	})
	d := wantStatus(t, r, api.StatusCompleted)
	want := "it works|" + strings.TrimRight(h.tg.Scratch, "/")
	if agg := strings.TrimSpace(str(t, d, "aggregated")); agg != want {
		t.Errorf("aggregated = %q, want %q", agg, want)
	}
	if cwd := str(t, d, "cwd"); strings.TrimRight(cwd, "/") != strings.TrimRight(h.tg.Scratch, "/") {
		t.Errorf("cwd = %q, want %q", cwd, h.tg.Scratch)
	}
}

// testTimeoutKillsTree is OpenClaw's open bug: the client side times out
// while the command goes on and creates PROOF.
func testTimeoutKillsTree(t *testing.T, h *harness) {
	proof, pids := h.scratchFile("PROOF"), h.scratchFile("PIDS")
	begin := time.Now()
	r := h.exec(api.ExecParams{Command: "echo $$ > " + pids + "; sleep 5 && touch " + proof, Timeout: ptr(1.0)})
	wantFailedBySignal(t, r)
	if reason := str(t, r.Details, "reason"); !strings.Contains(strings.ToLower(reason), "timeout") {
		t.Errorf("reason = %q, want it to mention the timeout", reason)
	}
	if d := time.Since(begin); d > 4500*time.Millisecond {
		t.Errorf("the 1 s timeout returned after %v", d)
	}
	h.waitGone(pids, 10*time.Second)
	if h.exists(proof) {
		t.Errorf("%s exists: the timeout did not kill the whole tree", proof)
	}
}

func testTimeoutKillsSetsidChild(t *testing.T, h *harness) {
	proof, pids := h.scratchFile("PROOF2"), h.scratchFile("PIDS2")
	r := h.exec(api.ExecParams{
		Command: "echo $$ > " + pids + "; (setsid sh -c 'echo $$ >> " + pids + "; sleep 3; touch " + proof + "') & " +
			"while [ \"$(wc -l < " + pids + ")\" -lt 2 ]; do sleep 0.05; done; sleep 30",
		Timeout: ptr(1.0),
	})
	wantFailedBySignal(t, r)
	h.waitGone(pids, 10*time.Second)
	if h.exists(proof) {
		t.Errorf("%s exists: a child that called setsid survived the timeout", proof)
	}
}

func testYieldThenPoll(t *testing.T, h *harness) {
	r := h.exec(api.ExecParams{Command: "sleep 1; echo done", YieldMs: ptr(10.0)})
	d := wantStatus(t, r, api.StatusRunning)
	id := str(t, d, "sessionId")
	t.Cleanup(func() { _, _ = h.processErr(api.ProcessParams{Action: "remove", SessionID: id}) })
	if pid := num(t, d, "pid"); pid <= 0 {
		t.Errorf("pid = %v", pid)
	}
	if started := num(t, d, "startedAt"); started <= 0 {
		t.Errorf("startedAt = %v", started)
	}
	if str(t, d, "cwd") == "" {
		t.Error("cwd is empty")
	}
	_ = str(t, d, "tail")
	want := fmt.Sprintf("Command still running (session %s, pid %d). Use process", id, int(num(t, d, "pid")))
	if !strings.HasPrefix(text(r), want) {
		t.Errorf("text = %q, want it to start with %q", text(r), want)
	}

	lr := h.process(api.ProcessParams{Action: "list"})
	if !strings.Contains(text(lr), id+" ") {
		t.Errorf("list %q does not show %s", text(lr), id)
	}

	out, last := h.pollUntil(id, regexp.MustCompile(`done`), true, 20*time.Second)
	if !strings.Contains(text(last), "Process exited with code 0.") {
		t.Errorf("last poll %q, want Process exited with code 0.", text(last))
	}
	ld := wantStatus(t, last, api.StatusCompleted)
	if code := num(t, ld, "exitCode"); code != 0 {
		t.Errorf("exitCode = %v", code)
	}
	if strings.Count(out, "done") != 1 {
		t.Errorf("polled output %q, want done once", out)
	}
	// A poll after everything was drained has nothing new.
	again := h.process(api.ProcessParams{Action: "poll", SessionID: id})
	if !strings.HasPrefix(text(again), "(no new output)") {
		t.Errorf("second poll %q, want (no new output)", text(again))
	}
	lg := h.process(api.ProcessParams{Action: "log", SessionID: id})
	if strings.TrimSpace(text(lg)) != "done" || num(t, lg.Details, "totalLines") != 1 {
		t.Errorf("log %q details %v", text(lg), lg.Details)
	}
}

func testBackgroundWriteEOF(t *testing.T, h *harness) {
	id := h.background(api.ExecParams{Command: "cat"})
	h.process(api.ProcessParams{Action: "write", SessionID: id, Data: "abc\n"})
	h.process(api.ProcessParams{Action: "write", SessionID: id, EOF: true})
	out, last := h.pollUntil(id, regexp.MustCompile(`abc`), true, 20*time.Second)
	if strings.TrimSpace(out) != "abc" {
		t.Errorf("output %q, want abc", out)
	}
	if d := wantStatus(t, last, api.StatusCompleted); num(t, d, "exitCode") != 0 {
		t.Errorf("exitCode = %v", wire(t, d)["exitCode"])
	}
	if _, err := h.processErr(api.ProcessParams{Action: "write", SessionID: id, Data: "late"}); err == nil {
		t.Error("write to a finished session succeeded")
	}
}

func testForegroundCatGetsEOF(t *testing.T, h *harness) {
	// A foreground run never hangs on a stdin nobody writes: the command
	// gets EOF at once, or (on a host that sees input waits) exec returns
	// at once saying it waits for input, and write+eof then finishes it.
	begin := time.Now()
	r := h.exec(api.ExecParams{Command: "cat; echo cat-finished"})
	if el := time.Since(begin); el > 5*time.Second {
		t.Errorf("cat without stdin took %v; it must not wait for the timeout", el)
	}
	if statusOf(r) == api.StatusRunning {
		d := r.Details
		if !d.WaitingForInput {
			t.Fatalf("running without waitingForInput: %v", d)
		}
		id := str(t, d, "sessionId")
		h.process(api.ProcessParams{Action: "write", SessionID: id, Data: "typed\n", EOF: true})
		out, _ := h.pollUntil(id, regexp.MustCompile(`typed\s+cat-finished`), true, 20*time.Second)
		if !strings.Contains(out, "cat-finished") {
			t.Errorf("output %q", out)
		}
		return
	}
	d := wantStatus(t, r, api.StatusCompleted)
	if code := num(t, d, "exitCode"); code != 0 {
		t.Errorf("exitCode = %v", code)
	}
	if !strings.Contains(str(t, d, "aggregated"), "cat-finished") {
		t.Errorf("aggregated = %q", *d.Aggregated)
	}
}

func testPTYIsTerminal(t *testing.T, h *harness) {
	r := h.exec(api.ExecParams{Command: `tty; echo "TERM=$TERM"`, PTY: true})
	d := wantStatus(t, r, api.StatusCompleted)
	agg := str(t, d, "aggregated")
	if !strings.Contains(agg, "/dev/pts/") || !strings.Contains(agg, "TERM=xterm-256color") {
		t.Errorf("aggregated = %q, want a /dev/pts/ device and TERM=xterm-256color", agg)
	}
}

func testPTYSize(t *testing.T, h *harness) {
	r := h.exec(api.ExecParams{Command: "stty size", PTY: true})
	d := wantStatus(t, r, api.StatusCompleted)
	if agg := strings.TrimSpace(str(t, d, "aggregated")); agg != "30 120" {
		t.Errorf("stty size printed %q, want 30 120", agg)
	}
}

func testPTYResize(t *testing.T, h *harness) {
	id := h.background(api.ExecParams{Command: `stty size; read -r x; stty size`, PTY: true})
	h.pollUntil(id, regexp.MustCompile(`30 120`), false, 20*time.Second)
	r, err := h.processErr(api.ProcessParams{Action: "resize", SessionID: id, Cols: ptr(100), Rows: ptr(40)})
	if err != nil {
		t.Fatalf("resize: %v", err)
	}
	if statusOf(r) == api.StatusFailed {
		t.Fatalf("resize: %q", text(r))
	}
	h.process(api.ProcessParams{Action: "send-keys", SessionID: id, Keys: []string{"enter"}})
	h.pollUntil(id, regexp.MustCompile(`40 100`), true, 20*time.Second)
}

// testPTYDSR: a program that asks for the cursor position (ESC[6n) and
// waits for the answer must get one, and the query must not reach the
// output. The terminal is put in non-canonical mode first, as real
// programs do: in canonical mode the reply (no newline) would sit in the
// line buffer.
func testPTYDSR(t *testing.T, h *harness) {
	r := h.exec(api.ExecParams{
		Command: `stty -icanon -echo; printf 'before\033[6n'; dd bs=6 count=1 >/dev/null 2>&1; stty icanon echo; echo got-reply`,
		PTY:     true,
		YieldMs: ptr(15000.0),
	})
	if statusOf(r) == api.StatusRunning {
		id := r.Details.SessionID
		_, _ = h.processErr(api.ProcessParams{Action: "remove", SessionID: id})
		t.Fatalf("the program still waits for its DSR answer: %q", text(r))
	}
	d := wantStatus(t, r, api.StatusCompleted)
	agg := str(t, d, "aggregated")
	if !strings.Contains(agg, "got-reply") || !strings.Contains(agg, "before") {
		t.Errorf("aggregated = %q", agg)
	}
	for _, q := range []string{"\x1b[6n", "[6n", "\x1b[?6n"} {
		if strings.Contains(agg, q) || strings.Contains(text(r), q) {
			t.Errorf("output keeps the DSR query %q: %q", q, agg)
		}
	}
}

func testPTYSendKeys(t *testing.T, h *harness) {
	id := h.background(api.ExecParams{Command: `read -r x; echo "got:$x"`, PTY: true})
	h.process(api.ProcessParams{Action: "send-keys", SessionID: id, Literal: "hi"})
	h.process(api.ProcessParams{Action: "send-keys", SessionID: id, Keys: []string{"enter"}})
	_, last := h.pollUntil(id, regexp.MustCompile(`got:hi`), true, 20*time.Second)
	wantStatus(t, last, api.StatusCompleted)
}

func testPTYPaste(t *testing.T, h *harness) {
	id := h.background(api.ExecParams{Command: `read -r a; echo "A:$a"; read -r b; echo "B:$b"`, PTY: true})
	h.process(api.ProcessParams{Action: "paste", SessionID: id, Text: "plain\n", Bracketed: ptr(false)})
	h.pollUntil(id, regexp.MustCompile(`A:plain`), false, 20*time.Second)
	// Bracketed (the default): the markers wrap the text; `read` does not
	// know bracketed paste, so the text arrives between them.
	h.process(api.ProcessParams{Action: "paste", SessionID: id, Text: "wrapped"})
	h.process(api.ProcessParams{Action: "submit", SessionID: id})
	h.pollUntil(id, regexp.MustCompile(`B:[^\n]*wrapped`), true, 20*time.Second)
}

func testUnknownSession(t *testing.T, h *harness) {
	for _, action := range []string{"poll", "log", "kill", "write", "remove"} {
		begin := time.Now()
		r, err := h.processErr(api.ProcessParams{
			Action: action, SessionID: "nope-nope", Data: "x", TimeoutMs: ptr(5000.0),
		})
		if err != nil {
			t.Errorf("%s of an unknown id: error %v, want a result", action, err)
			continue
		}
		if got := text(r); got != "No session found for nope-nope" {
			t.Errorf("%s of an unknown id: text %q, want %q", action, got, "No session found for nope-nope")
		}
		if el := time.Since(begin); el > 4*time.Second { // a poll would wait its 5 s
			t.Errorf("%s of an unknown id took %v; it must answer at once", action, el)
		}
	}
}

func testKillBackground(t *testing.T, h *harness) {
	marker, pids := h.scratchFile("KILLED"), h.scratchFile("PIDS")
	id := h.background(api.ExecParams{Command: "echo $$ > " + pids + "; sleep 3 && touch " + marker})
	// Another caller's scope must not see (or kill) the session.
	foreign, err := h.processErr(api.ProcessParams{
		Action: "kill", SessionID: id,
		AgentID: h.tg.AgentID + "-other", SessionKey: h.tg.SessionKey + "-other",
	})
	if err != nil || text(foreign) != "No session found for "+id {
		t.Errorf("kill from another scope: %q %v, want No session found for %s", text(foreign), err, id)
	}
	for deadline := time.Now().Add(10 * time.Second); !h.exists(pids); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the command did not write %s", pids)
		}
	}
	begin := time.Now()
	h.process(api.ProcessParams{Action: "kill", SessionID: id})
	if el := time.Since(begin); el > 5*time.Second {
		t.Errorf("kill took %v", el)
	}
	_, last := h.pollUntil(id, regexp.MustCompile(``), true, 15*time.Second)
	d := wantFailedBySignal(t, last)
	if !strings.Contains(text(last), "Process exited with signal "+str(t, d, "signal")+".") {
		t.Errorf("poll after kill: %q", text(last))
	}
	h.waitGone(pids, 10*time.Second)
	if h.exists(marker) {
		t.Errorf("%s exists: kill did not end the whole tree", marker)
	}
}

// testPIDIsTheCommands: details.pid is the command's pid as the machine it
// runs on numbers it, the $$ it sees (inside the container for a sandbox),
// on every host and exec path.
func testPIDIsTheCommands(t *testing.T, h *harness) {
	r := h.exec(api.ExecParams{Command: "echo pid=$$; sleep 30", Background: true})
	wantStatus(t, r, api.StatusRunning)
	id := str(t, r.Details, "sessionId")
	t.Cleanup(func() { _, _ = h.processErr(api.ProcessParams{Action: "remove", SessionID: id}) })
	out, _ := h.pollUntil(id, regexp.MustCompile(`pid=[0-9]+`), false, 15*time.Second)
	want := regexp.MustCompile(`pid=([0-9]+)`).FindStringSubmatch(out)[1]
	// JSON through an API client makes it a float64; the Manager's own is an int.
	if got := fmt.Sprint(*r.Details.PID); got != want {
		t.Fatalf("details.pid = %s, the command's $$ is %s", got, want)
	}
}

// testDaemonRestartWhileRunning: the daemon dies while a background
// command runs; the new daemon lists the session under the same id and
// follows it to its end, with what it printed before and after the restart.
func testDaemonRestartWhileRunning(t *testing.T, h *harness) {
	if h.tg.Restart == nil {
		t.Skip("this host keeps no session across a daemon restart")
	}
	gate, pids := h.scratchFile("GATE"), h.scratchFile("PIDS")
	id := h.background(api.ExecParams{Command: "echo $$ > " + pids + "; echo before-restart; " +
		"while [ ! -e " + gate + " ]; do sleep 0.05; done; echo after-restart"})
	h.pollUntil(id, regexp.MustCompile(`before-restart`), false, 10*time.Second)

	h.tg.Tools = h.tg.Restart(t)
	// A host may hand its sessions back a little later (a node, once it
	// reconnected to the new daemon).
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		list := text(h.process(api.ProcessParams{Action: "list"}))
		if strings.Contains(list, id) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the new daemon does not list %s:\n%s", id, list)
		}
	}
	h.finishAfterRestart(id, gate, pids)
}

// testNodeAgentRestartWhileRunning: the node agent dies (SIGKILL) while a
// background command runs on the node; the next agent on the node's state
// re-adopts it, and the session goes on under the same id: what it prints
// after the restart arrives once, nothing before it again, and it ends
// as the command does.
func testNodeAgentRestartWhileRunning(t *testing.T, h *harness) {
	if h.tg.RestartNode == nil {
		t.Skip("this host has no node agent")
	}
	gate, pids := h.scratchFile("GATE"), h.scratchFile("PIDS")
	id := h.background(api.ExecParams{Command: "echo $$ > " + pids + "; echo before-restart; " +
		"while [ ! -e " + gate + " ]; do sleep 0.05; done; echo after-restart"})
	h.pollUntil(id, regexp.MustCompile(`before-restart`), false, 10*time.Second)
	h.tg.RestartNode(t)
	h.finishAfterRestart(id, gate, pids)
}

// finishAfterRestart opens the gate of a restart case's command and checks
// that session id follows it to its end, each line once.
func (h *harness) finishAfterRestart(id, gate, pids string) {
	t := h.t
	t.Helper()
	h.inspect("touch " + gate)
	out, last := h.pollUntil(id, regexp.MustCompile(`after-restart`), true, 20*time.Second)
	if strings.Contains(out, "before-restart") {
		t.Errorf("the first polls after the restart repeated output already delivered: %q", out)
	}
	d := wantStatus(t, last, api.StatusCompleted)
	if code := num(t, d, "exitCode"); code != 0 {
		t.Errorf("exitCode = %v after the restart, want 0 (output %q)", code, out)
	}
	log := text(h.process(api.ProcessParams{Action: "log", SessionID: id}))
	if strings.Count(log, "before-restart") != 1 || strings.Count(log, "after-restart") != 1 {
		t.Errorf("log after the restart: %q, want each line once", log)
	}
	h.waitGone(pids, 5*time.Second)
}

// --- result helpers ---

// checkShape asserts the result shape of docs/tools.md: one text content, a details map.
func checkShape(t *testing.T, r api.Result) {
	t.Helper()
	if len(r.Content) != 1 || r.Content[0].Type != "text" {
		t.Fatalf("content = %+v, want one text entry", r.Content)
	}
	if r.Details.Status == "" {
		t.Fatalf("details without a status (text %q)", r.Content[0].Text)
	}
}

func text(r api.Result) string {
	if len(r.Content) == 0 {
		return ""
	}
	return r.Content[0].Text
}

func statusOf(r api.Result) string {
	s := r.Details.Status
	return s
}

func wantStatus(t *testing.T, r api.Result, want string) api.Details {
	t.Helper()
	if got := statusOf(r); got != want {
		t.Fatalf("details.status = %q, want %q (text %q, details %v)", got, want, text(r), r.Details)
	}
	return r.Details
}

// wantFailedBySignal asserts a run ended by a kill or timeout: status failed,
// exitCode present and null, a signal name.
func wantFailedBySignal(t *testing.T, r api.Result) api.Details {
	t.Helper()
	d := wantStatus(t, r, api.StatusFailed)
	if code, ok := wire(t, d)["exitCode"]; !ok || code != nil {
		t.Errorf("exitCode = %v (present %v), want null", code, ok)
	}
	if sig := str(t, d, "signal"); !strings.HasPrefix(sig, "SIG") {
		t.Errorf("signal = %q, want a signal name", sig)
	}
	return d
}

// wire is details as a client decodes them: their JSON object.
func wire(t *testing.T, details api.Details) map[string]any {
	t.Helper()
	raw, err := json.Marshal(details)
	if err != nil {
		t.Fatal(err)
	}
	var d map[string]any
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatal(err)
	}
	return d
}

func str(t *testing.T, details api.Details, key string) string {
	t.Helper()
	d := wire(t, details)
	v, ok := d[key]
	if !ok {
		t.Fatalf("details.%s is missing (details %v)", key, d)
	}
	s, ok := v.(string)
	if !ok {
		t.Fatalf("details.%s = %#v, want a string", key, v)
	}
	return s
}

// num reads a numeric details field as a JSON client does.
func num(t *testing.T, details api.Details, key string) float64 {
	t.Helper()
	d := wire(t, details)
	v, ok := d[key]
	if !ok {
		t.Fatalf("details.%s is missing (details %v)", key, d)
	}
	switch n := v.(type) {
	case int:
		return float64(n)
	case int64:
		return float64(n)
	case float64:
		return n
	}
	t.Fatalf("details.%s = %#v, want a number", key, v)
	return 0
}

func ptr[T any](v T) *T { return &v }

func randomHex() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
