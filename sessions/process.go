package sessions

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/sandboxctl/sandboxctl/sessions/toolapi"

	"github.com/sandboxctl/sandboxctl/api"

	"github.com/sandboxctl/sandboxctl/sessions/keys"
	"github.com/sandboxctl/sandboxctl/sessions/output"
)

// Process actions (docs/tools.md).
var processActions = api.ProcessActions

const (
	maxPollWait     = 30 * time.Second
	defaultLogLines = 200
	killWait        = 5 * time.Second
)

// Process runs the process tool (docs/tools.md) in the caller's scope: the pair
// (agentId, sessionKey).
//
// An unknown session id, or one of another scope, is answered at once (poll
// never waits for it) with a Result whose text is "No session found for ID"
// and details {status:"failed", error:"not_found", sessionId}; Result.Err
// converts it to an error wrapping ErrNoSession. Only backgrounded sessions
// are visible: a foreground run that finished in its window is not listed.
//
// Bad input — an unknown action, a missing sessionId or data, a write to a
// finished session or to one without stdin, an unknown key name, clear of a
// running session, resize of a non-PTY session — returns an *InputError
// (errors.Is(err, ErrInvalidInput)).
func (m *Manager) Process(ctx context.Context, p api.ProcessParams) (api.Result, error) {
	res, err := m.process(ctx, p)
	if m.obs != nil {
		m.obs.ProcessAnswered(p, res, err)
	}
	return res, err
}

// process is Process, unreported.
func (m *Manager) process(ctx context.Context, p api.ProcessParams) (api.Result, error) {
	if m.isClosed() {
		return api.Result{}, ErrClosed
	}
	action := strings.ToLower(strings.TrimSpace(p.Action))
	if !slices.Contains(processActions, action) {
		return api.Result{}, inputErr("action", "unknown action %q (valid: %s)", p.Action, strings.Join(processActions, ", "))
	}
	scope := scopeKey(p.AgentID, p.SessionKey)
	if action == "list" {
		return m.list(scope), nil
	}
	id := strings.TrimSpace(p.SessionID)
	if id == "" {
		return api.Result{}, inputErr("sessionId", "sessionId is required for action %s", action)
	}
	s := m.lookup(id, scope)
	if s == nil {
		if reason := m.evictedReason(id, scope); reason != "" {
			r := notFoundResult(id)
			r.Content[0].Text += " (" + reason + ")"
			r.Details.Reason = reason
			return r, nil
		}
		return notFoundResult(id), nil
	}
	switch action {
	case "poll":
		return m.poll(ctx, s, p)
	case "log":
		return m.log(s, p)
	case "write":
		if p.Data == "" && !p.EOF {
			return api.Result{}, inputErr("data", "write needs data (or eof:true to close stdin)")
		}
		if err := m.recordInput(ctx, s, "write", []byte(p.Data), ""); err != nil {
			return api.Result{}, err
		}
		return m.write(s, []byte(p.Data), p.EOF, "write")
	case "send-keys":
		data, err := encodeSendKeys(p)
		if err != nil {
			return api.Result{}, err
		}
		if err := m.recordInput(ctx, s, "send-keys", data, ""); err != nil {
			return api.Result{}, err
		}
		return m.write(s, data, false, "send-keys")
	case "paste":
		if p.Text == "" {
			return api.Result{}, inputErr("text", "paste needs text")
		}
		bracketed := p.Bracketed == nil || *p.Bracketed
		data := keys.Paste(p.Text, bracketed)
		if err := m.recordInput(ctx, s, "paste", data, ""); err != nil {
			return api.Result{}, err
		}
		return m.write(s, data, false, "paste")
	case "submit":
		if err := m.recordInput(ctx, s, "submit", []byte("\r"), ""); err != nil {
			return api.Result{}, err
		}
		return m.write(s, []byte("\r"), false, "submit")
	case "kill":
		if strings.TrimSpace(p.Signal) != "" {
			sig, name, err := parseKillSignal(p.Signal)
			if err != nil {
				return api.Result{}, err
			}
			if err := m.recordInput(ctx, s, "kill", nil, name); err != nil {
				return api.Result{}, err
			}
			return m.signalAction(ctx, s, sig, name)
		}
		if err := m.recordInput(ctx, s, "kill", nil, "SIGKILL"); err != nil {
			return api.Result{}, err
		}
		return m.killAction(ctx, s)
	case "clear":
		return m.clear(s)
	case "remove":
		if err := m.recordInput(ctx, s, "remove", nil, ""); err != nil {
			return api.Result{}, err
		}
		return m.remove(s)
	case "resize":
		return m.resize(ctx, s, p)
	}
	return api.Result{}, fmt.Errorf("process: action %q not implemented", action)
}

func (m *Manager) list(scope string) api.Result {
	rows := m.listRows(func(s *session) bool { return s.scope == scope })
	lines := make([]string, 0, len(rows))
	infos := make([]api.Details, 0, len(rows))
	for _, r := range rows {
		lines = append(lines, r.line)
		infos = append(infos, r.info)
	}
	text := strings.Join(lines, "\n")
	if text == "" {
		text = "No running or recent sessions."
	}
	return textResult(text, api.Details{Status: api.StatusCompleted, Sessions: infos})
}

// Sessions lists the visible sessions of every scope, newest first, for
// operators (GET /v1/sessions): each entry is what the process tool's list
// action shows, plus its agentId and sessionKey. A non-empty agentID keeps
// that agent's sessions only.
func (m *Manager) Sessions(agentID string) []api.Details {
	rows := m.listRows(func(s *session) bool { return agentID == "" || s.agentID == agentID })
	out := make([]api.Details, 0, len(rows))
	for _, r := range rows {
		r.info.AgentID = new(r.agentID)
		r.info.SessionKey = new(r.sessionKey)
		out = append(out, r.info)
	}
	return out
}

// listRow is one session as the list action shows it.
type listRow struct {
	started             time.Time
	id                  string
	line                string
	info                api.Details
	agentID, sessionKey string
}

// listRows describes the visible sessions that match, newest first.
func (m *Manager) listRows(match func(*session) bool) []listRow {
	m.mu.Lock()
	var mine []*session
	for _, s := range m.sessions {
		if match(s) {
			mine = append(mine, s)
		}
	}
	m.mu.Unlock()
	now := m.now()
	var rows []listRow
	for _, s := range mine {
		s.mu.Lock()
		if !s.visible {
			s.mu.Unlock()
			continue
		}
		end := now
		if s.finished {
			end = s.endedAt
		}
		dur := end.Sub(s.startedAt)
		status := s.statusLocked()
		if s.waitingForInputLocked() {
			status = "waiting-for-input"
		}
		info := s.stateDetailsLocked()
		info.StartedAt = s.startedAt.UnixMilli()
		info.RuntimeMs = new(dur.Milliseconds())
		info.Cwd = s.cwd
		info.Command = s.command
		info.Host = string(s.host)
		info.PTY = new(s.pty)
		release := m.inflateLocked(s)
		info.Tail = new(s.agg.Last(tailChars))
		release()
		rows = append(rows, listRow{s.startedAt, s.id,
			fmt.Sprintf("%s %s %s :: %s", s.id, status, formatDuration(dur), s.name), info, s.agentID, s.sessionKey})
		s.mu.Unlock()
	}
	slices.SortFunc(rows, func(a, b listRow) int {
		if c := b.started.Compare(a.started); c != 0 {
			return c
		}
		return strings.Compare(a.id, b.id)
	})
	return rows
}

func (m *Manager) poll(ctx context.Context, s *session, p api.ProcessParams) (api.Result, error) {
	var wait time.Duration
	if p.TimeoutMs != nil {
		if err := checkNumber("timeoutMs", *p.TimeoutMs); err != nil {
			return api.Result{}, err
		}
		wait = pollWait(*p.TimeoutMs)
	}
	var deadline <-chan time.Time
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		deadline = t.C
	}
	s.mu.Lock()
	for !s.finished && !s.waitingForInputLocked() && s.pendOut.Len() == 0 && s.pendErr.Len() == 0 && s.pendOut.Dropped() == 0 && s.pendErr.Dropped() == 0 && deadline != nil {
		w := s.watchLocked()
		s.mu.Unlock()
		select {
		case <-w:
		case <-deadline:
			deadline = nil
		case <-ctx.Done():
			deadline = nil
		}
		s.mu.Lock()
	}
	release := m.inflateLocked(s)
	out := joinNonEmpty(strings.TrimRight(s.pendOut.Drain(), "\n"), strings.TrimRight(s.pendErr.Drain(), "\n"))
	release()
	s.delivered = s.readRaw
	delivered := s.delivered
	d := s.stateDetailsLocked()
	var state string
	switch {
	case s.waitingForInputLocked():
		state = "Process still running, waiting for input."
	case !s.finished && s.doubtLocked() != "":
		state = fmt.Sprintf("Process state %s.", s.doubtLocked())
	case !s.finished:
		state = "Process still running."
	case s.status == api.StatusCompleted:
		state = fmt.Sprintf("Process exited with code %d.", s.exitCode)
	case s.signal != "":
		state = fmt.Sprintf("Process exited with signal %s.", s.signal)
	default:
		state = fmt.Sprintf("Process failed: %s.", s.reason)
	}
	s.mu.Unlock()
	if m.capsOf(s.host).Recover != nil {
		if err := m.cursors.set(m.cursorKey(s.host, s.id), delivered); err != nil {
			m.logf("sessions: %s: %v", s.id, err)
		}
	}
	if out == "" {
		out = "(no new output)"
	}
	return textResult(out+"\n\n"+state, d), nil
}

func joinNonEmpty(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "\n" + b
}

// logLines splits aggregated output into lines; a trailing newline does not
// start an extra empty line.
func logLines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}

func (m *Manager) log(s *session, p api.ProcessParams) (api.Result, error) {
	if p.Offset != nil && *p.Offset < 0 {
		return api.Result{}, inputErr("offset", "offset must not be negative (got %d)", *p.Offset)
	}
	if p.Limit != nil && *p.Limit <= 0 {
		return api.Result{}, inputErr("limit", "limit must be positive (got %d)", *p.Limit)
	}
	s.mu.Lock()
	release := m.inflateLocked(s)
	content := s.agg.String()
	chars := s.agg.Len()
	dropped := s.agg.Dropped()
	release()
	d := s.stateDetailsLocked()
	finished := s.finished
	s.mu.Unlock()

	lines := logLines(content)
	total := len(lines)
	start, end := 0, total
	hint := ""
	switch {
	case p.Offset != nil && p.Limit != nil:
		// Never offset+limit: both come from the request and their sum
		// can overflow into a negative bound.
		start = min(*p.Offset, total)
		end = start + min(*p.Limit, total-start)
	case p.Offset != nil:
		start = min(*p.Offset, total)
	case p.Limit != nil:
		start = max(total-*p.Limit, 0)
	default:
		start = max(total-defaultLogLines, 0)
		if start > 0 {
			hint = fmt.Sprintf("\n\n[showing lines %d-%d of %d; use offset and limit to page, e.g. offset:0 limit:%d]",
				start, end-1, total, defaultLogLines)
		}
	}
	text := strings.Join(lines[start:end], "\n")
	if dropped > 0 && start == 0 {
		text = strings.TrimSuffix(output.DroppedNote(dropped), "\n") + "\n" + text
	}
	if text == "" {
		text = "(no output yet)"
		if finished {
			text = "(no output)"
		}
	}
	d.TotalLines = new(total)
	d.TotalChars = new(chars)
	d.Truncated = new(dropped > 0)
	d.DroppedChars = new(dropped)
	d.Offset = new(start)
	d.Limit = new(end - start)
	return textResult(text+hint, d), nil
}

func (m *Manager) write(s *session, data []byte, eof bool, action string) (api.Result, error) {
	s.mu.Lock()
	if s.finished {
		st := s.status
		s.mu.Unlock()
		return api.Result{}, inputErr("sessionId", "session %s has exited (%s); cannot %s to it", s.id, st, action)
	}
	if !s.stdinOpen {
		s.mu.Unlock()
		return api.Result{}, inputErr("sessionId", "session %s has no open stdin (started in the foreground without pty, or stdin was closed); cannot %s to it", s.id, action)
	}
	if eof {
		s.stdinOpen = false
	}
	s.mu.Unlock()
	n := 0
	if len(data) > 0 {
		var err error
		n, err = s.proc.Write(data)
		if err != nil {
			return api.Result{}, fmt.Errorf("process %s: session %s: %w", action, s.id, err)
		}
	}
	text := fmt.Sprintf("Wrote %d bytes to session %s.", n, s.id)
	if action != "write" {
		text = fmt.Sprintf("Sent %d bytes to session %s (%s).", n, s.id, action)
	}
	if eof {
		if err := s.proc.CloseStdin(); err != nil {
			return api.Result{}, fmt.Errorf("process write: session %s: closing stdin: %w", s.id, err)
		}
		text += " Stdin closed."
	}
	return textResult(text, api.Details{Status: api.StatusRunning, SessionID: s.id, Bytes: new(n), EOF: new(eof)}), nil
}

func encodeSendKeys(p api.ProcessParams) ([]byte, error) {
	if len(p.Keys) == 0 && len(p.Hex) == 0 && p.Literal == "" {
		return nil, inputErr("keys", "send-keys needs keys, hex or literal")
	}
	data := []byte(p.Literal)
	h, err := keys.Hex(p.Hex)
	if err != nil {
		return nil, &toolapi.InputError{Field: "hex", Msg: err.Error(), Err: err}
	}
	data = append(data, h...)
	k, err := keys.Encode(p.Keys)
	if err != nil {
		return nil, &toolapi.InputError{Field: "keys", Msg: err.Error(), Err: err}
	}
	return append(data, k...), nil
}

func (m *Manager) killAction(ctx context.Context, s *session) (api.Result, error) {
	if err := s.unreachable("kill"); err != nil {
		return api.Result{}, err
	}
	s.mu.Lock()
	finished := s.finished
	s.mu.Unlock()
	if !finished {
		m.kill(s, api.KillReasonKilled)
		waitEnded(ctx, s)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.stateDetailsLocked()
	switch {
	case finished:
		return textResult(fmt.Sprintf("Session %s is not running (%s).", s.id, s.status), d), nil
	case s.finished:
		return textResult(fmt.Sprintf("Killed session %s (signal %s).", s.id, s.signal), d), nil
	}
	return textResult(fmt.Sprintf("Kill sent to session %s; it has not exited yet.", s.id), d), nil
}

// killSignals are the signals process kill accepts by name.
var killSignals = map[string]syscall.Signal{
	"SIGINT": syscall.SIGINT, "SIGTERM": syscall.SIGTERM, "SIGKILL": syscall.SIGKILL, "SIGHUP": syscall.SIGHUP,
	"SIGQUIT": syscall.SIGQUIT, "SIGUSR1": syscall.SIGUSR1, "SIGUSR2": syscall.SIGUSR2,
}

// parseKillSignal accepts a signal name with or without "SIG", any case.
func parseKillSignal(name string) (syscall.Signal, string, error) {
	n := strings.ToUpper(strings.TrimSpace(name))
	if !strings.HasPrefix(n, "SIG") {
		n = "SIG" + n
	}
	sig, ok := killSignals[n]
	if !ok {
		names := make([]string, 0, len(killSignals))
		for k := range killSignals {
			names = append(names, k)
		}
		slices.Sort(names)
		return 0, "", inputErr("signal", "unknown signal %q (valid: %s; omit it to end the session with SIGTERM, then SIGKILL)", name, strings.Join(names, ", "))
	}
	return sig, n, nil
}

// errSignalUnsupported: the host's processes take no signal but kill's.
var errSignalUnsupported = errors.New("this host cannot deliver a chosen signal")

// signalAction delivers one signal to the session's process tree and
// reports whether it ended within killWait.
func (m *Manager) signalAction(ctx context.Context, s *session, sig syscall.Signal, name string) (api.Result, error) {
	if err := s.unreachable("signal"); err != nil {
		return api.Result{}, err
	}
	s.mu.Lock()
	finished, status := s.finished, s.status
	s.mu.Unlock()
	if finished {
		s.mu.Lock()
		d := s.stateDetailsLocked()
		s.mu.Unlock()
		return textResult(fmt.Sprintf("Session %s is not running (%s).", s.id, status), d), nil
	}
	if s.sendSignal == nil {
		return api.Result{}, inputErr("signal", "the %s host cannot deliver %s; omit signal to end the session (SIGTERM, then SIGKILL)", s.host, name)
	}
	if err := s.sendSignal(ctx, sig); err != nil {
		if errors.Is(err, errSignalUnsupported) {
			return api.Result{}, inputErr("signal", "the %s host cannot deliver %s; omit signal to end the session (SIGTERM, then SIGKILL)", s.host, name)
		}
		return api.Result{}, fmt.Errorf("process kill: send %s to session %s: %w", name, s.id, err)
	}
	waitEnded(ctx, s)
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.stateDetailsLocked()
	switch {
	case !s.finished:
		return textResult(fmt.Sprintf("Sent %s to session %s; it is still running.", name, s.id), d), nil
	case s.signal != "":
		return textResult(fmt.Sprintf("Killed session %s (signal %s).", s.id, s.signal), d), nil
	case s.status == api.StatusCompleted:
		return textResult(fmt.Sprintf("Sent %s to session %s; it exited with code %d.", name, s.id, s.exitCode), d), nil
	}
	return textResult(fmt.Sprintf("Sent %s to session %s; it failed: %s.", name, s.id, s.reason), d), nil
}

// pollWait is poll's timeoutMs as a Duration, clamped to maxPollWait
// before the conversion can overflow.
func pollWait(ms float64) time.Duration {
	if ms*float64(time.Millisecond) >= float64(maxPollWait) {
		return maxPollWait
	}
	return time.Duration(ms * float64(time.Millisecond))
}

func (m *Manager) clear(s *session) (api.Result, error) {
	s.mu.Lock()
	finished := s.finished
	s.mu.Unlock()
	if !finished {
		return api.Result{}, inputErr("sessionId", "session %s is still running; kill it first or use remove", s.id)
	}
	m.forget(s)
	return textResult(fmt.Sprintf("Cleared session %s.", s.id), api.Details{Status: api.StatusCompleted, SessionID: s.id}), nil
}

func (m *Manager) remove(s *session) (api.Result, error) {
	if err := s.unreachable("remove"); err != nil {
		return api.Result{}, err
	}
	s.mu.Lock()
	running := !s.finished
	s.mu.Unlock()
	m.forget(s)
	text := fmt.Sprintf("Removed session %s.", s.id)
	if running {
		m.kill(s, api.KillReasonRemoved)
		text = fmt.Sprintf("Killed and removed session %s.", s.id)
	}
	return textResult(text, api.Details{Status: api.StatusCompleted, SessionID: s.id, Killed: new(running)}), nil
}

func (m *Manager) resize(ctx context.Context, s *session, p api.ProcessParams) (api.Result, error) {
	if p.Cols == nil || p.Rows == nil {
		return api.Result{}, inputErr("cols", "resize needs cols and rows")
	}
	cols, rows := *p.Cols, *p.Rows
	if cols < 1 || rows < 1 || cols > math.MaxUint16 || rows > math.MaxUint16 {
		return api.Result{}, inputErr("cols", "resize: cols and rows must be between 1 and 65535 (got %dx%d)", cols, rows)
	}
	s.mu.Lock()
	pty, finished := s.pty, s.finished
	s.mu.Unlock()
	if !pty {
		return api.Result{}, inputErr("sessionId", "session %s has no terminal (started without pty); cannot resize", s.id)
	}
	if finished {
		return api.Result{}, inputErr("sessionId", "session %s has exited; cannot resize", s.id)
	}
	if err := s.proc.Resize(ctx, cols, rows); err != nil {
		return api.Result{}, fmt.Errorf("process resize: session %s: %w", s.id, err)
	}
	return textResult(fmt.Sprintf("Resized session %s to %dx%d.", s.id, cols, rows),
		api.Details{Status: api.StatusRunning, SessionID: s.id, Cols: cols, Rows: rows}), nil
}

// waitEnded waits up to killWait (or ctx) for a signalled session to end,
// so the answer can say whether it did.
func waitEnded(ctx context.Context, s *session) {
	t := time.NewTimer(killWait)
	defer t.Stop()
	select {
	case <-s.done:
	case <-t.C:
	case <-ctx.Done():
	}
}
