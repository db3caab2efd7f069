package sessions

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/sandboxctl/sandboxctl/api"
	"github.com/sandboxctl/sandboxctl/internal/audit"
	"github.com/sandboxctl/sandboxctl/sessions/hostapi"
	"github.com/sandboxctl/sandboxctl/sessions/output"
	"github.com/sandboxctl/sandboxctl/vocab"
)

// Timing of the kill path. The host's Kill sends SIGTERM and SIGKILL after its
// own grace (3 s); if Wait still has not returned killFinalizeAfter later the
// session is finalized anyway so that it never stays "running" forever.
const (
	killCallTimeout   = 10 * time.Second
	killFinalizeAfter = 10 * time.Second
	// readerGrace bounds how long the exit is held back for the output
	// readers after Wait returned: a grandchild that inherited the pipes
	// (`nohup sleep 600 &`) must not keep the session "running".
	readerGrace = 2 * time.Second
	readChunk   = 32 * 1024
	tailChars   = 2000
	eventChars  = 180
)

// session is one started command.
type session struct {
	id                  string
	scope               string
	agentID, sessionKey string
	command, name       string
	cwd                 string
	host                vocab.Host
	pty                 bool
	proc                Process
	// place is where the command runs, in words (`Engine "e1"`, `node
	// "n1"`; hostapi.Started.Place); awaited says it has an awaitedRecord;
	// placeholder says proc is an awaitedProc: the session awaits its host
	// after a restart (placeAwaited).
	place                string
	awaited, placeholder bool
	inputWait            InputWaiter                                         // nil: the host cannot tell
	forget               func(ctx context.Context) error                     // nil: the host keeps nothing
	sendSignal           func(ctx context.Context, sig syscall.Signal) error // nil: the host cannot signal
	doubt                func() string                                       // nil: the host never loses sight of it
	pid                  int
	startedAt            time.Time // by the injected clock (results, list, TTL)
	startedReal          time.Time // by the real clock (timeouts run on real timers)
	// reqID, actor and node (host node) are the exec request's, for its
	// audit records.
	reqID, node string
	actor       audit.Actor

	mu        sync.Mutex
	agg       *output.Log // all output, by stream; streams follow it by offset
	raw       *rawState   // the exact bytes, for ExecParams.Raw; nil otherwise
	pendOut   *output.Tail
	pendErr   *output.Tail
	watch     chan struct{} // closed on new output or exit; nil when nobody waits
	stdinOpen bool
	// awaitingApproval: the command waits for a human's approval and has
	// not started (status approval-pending).
	awaitingApproval bool
	visible          bool // backgrounded: the process tool sees it
	attached         bool // a streamed exec's: the process tool finds it by id while the stream follows it (not listed)
	finished         bool
	status           string
	exitCode         int
	signal           string
	reason           string
	endedAt          time.Time
	timedOut         time.Duration // > 0: the timeout fired after this long
	killReason       string        // set by kill/remove/Close
	timer            *time.Timer
	killStarted      bool
	done             chan struct{} // closed by finalize
	// readRaw counts the raw output bytes read (both streams; for a
	// recovered session from the position its kept output ended at);
	// delivered is readRaw as of the last poll that drained the pending
	// output (see cursorStore).
	readRaw   int64
	delivered int64
	// spillPath is the file holding the output of a finished session
	// (spill.go); while it is set, agg, pendOut and pendErr are nil
	// except under inflateLocked. spillEnd is agg.End() as spilled.
	spillPath string
	spillEnd  int64
}

func (m *Manager) newSession(p api.ExecParams, host vocab.Host, cwd, command string, st Started, keepStdin bool) *session {
	s := &session{
		scope:       scopeKey(p.AgentID, p.SessionKey),
		agentID:     p.AgentID,
		sessionKey:  p.SessionKey,
		command:     command,
		name:        deriveName(command),
		cwd:         cwd,
		host:        host,
		pty:         p.PTY,
		proc:        st.Process,
		inputWait:   st.InputWait,
		place:       st.Place,
		forget:      st.Forget,
		sendSignal:  st.Signal,
		doubt:       st.Doubt,
		pid:         st.PID(),
		startedAt:   m.now(),
		startedReal: time.Now(),
		agg:         output.NewLog(m.lim.MaxOutputChars),
		pendOut:     output.NewTail(m.lim.PendingMaxOutputChars),
		pendErr:     output.NewTail(m.lim.PendingMaxOutputChars),
		stdinOpen:   keepStdin,
		done:        make(chan struct{}),
	}
	if p.Raw {
		s.raw = newRawState(s)
	}
	return s
}

// run starts the output readers and the waiter. m.wg tracks them.
func (m *Manager) run(s *session) {
	var readers sync.WaitGroup
	for _, st := range []struct {
		r      io.Reader
		stream output.Stream
	}{{s.proc.Stdout(), output.StreamStdout}, {s.proc.Stderr(), output.StreamStderr}} {
		if st.r == nil {
			continue
		}
		readers.Add(1)
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			defer readers.Done()
			m.read(s, st.r, st.stream)
		}()
	}
	readersDone := make(chan struct{})
	m.wg.Add(2)
	go func() {
		defer m.wg.Done()
		readers.Wait()
		close(readersDone)
	}()
	go func() {
		defer m.wg.Done()
		code, sig, err := s.proc.Wait(m.ctx)
		if err != nil && m.ctx.Err() != nil {
			// Close cancelled the wait: the kill path finalizes.
			err = fmt.Errorf("wait: %w", err)
		}
		if !m.waitReaders(s, readersDone) {
			m.logf("sessions: %s exited but its output is still open (a background child holds it); finishing anyway", s.id)
			// Unblock the readers where the host allows it, so that no
			// goroutine outlives the session.
			for _, r := range []io.Reader{s.proc.Stdout(), s.proc.Stderr()} {
				if c, ok := r.(io.Closer); ok {
					_ = c.Close()
				}
			}
		}
		m.finalize(s, code, sig, err)
	}()
}

// maskHold is how long output that may start a secret's value waits for
// the bytes that tell.
const maskHold = 50 * time.Millisecond

// read copies one stream into the session's buffers, answering DSR queries
// of a PTY. A raw session leaves them to its caller's terminal, which gets
// the query among the exact bytes and answers it itself: a second answer
// from here would reach the program first, and wrong.
func (m *Manager) read(s *session, r io.Reader, stream output.Stream) {
	// Real secret values are masked in every form of the output, the
	// exact bytes included (docs/secrets.md).
	r = m.mask.Reader(r, maskHold)
	if s.raw != nil && !s.pty {
		m.readRawOutput(s, r, stream)
		return
	}
	dec := output.NewDecoder(s.pty)
	buf := make([]byte, readChunk)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			text, dsr := dec.Feed(buf[:n])
			if s.raw != nil {
				dsr = 0
			}
			for range dsr {
				if _, werr := s.proc.Write([]byte(output.DSRReply)); werr != nil {
					m.logf("sessions: %s: answering DSR: %v", s.id, werr)
					break
				}
			}
			m.appendOutputRaw(s, stream, text, n)
			if s.raw != nil {
				m.appendRaw(s, stream, buf[:n])
			}
		}
		if err != nil {
			m.logReadEnd(s, err)
			m.appendOutputRaw(s, stream, dec.Flush(), 0)
			return
		}
	}
}

// logReadEnd logs why reading s's output stopped, unless it is the usual
// end: EOF, a closed pipe, or (at debug level) the end of the place the
// command ran in (hostapi.ErrEnded: its sandbox was removed), which the
// session's status reports.
func (m *Manager) logReadEnd(s *session, err error) {
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrClosedPipe):
	case errors.Is(err, hostapi.ErrEnded):
		m.logf("debug: sessions: %s: output ended with its environment (%v)", s.id, err)
	default:
		m.logf("sessions: %s: reading output: %v", s.id, err)
	}
}

// appendOutputRaw appends text of stream, decoded from raw bytes read:
// both are counted under one lock, so a poll's cursor never covers bytes
// whose text it did not deliver.
func (m *Manager) appendOutputRaw(s *session, stream output.Stream, text string, raw int) {
	s.mu.Lock()
	m.appendOutputLocked(s, stream, text, int64(raw))
	s.mu.Unlock()
}

// appendOutputLocked is appendOutputRaw with s.mu held.
func (m *Manager) appendOutputLocked(s *session, stream output.Stream, text string, raw int64) {
	n := utf8.RuneCountInString(text)
	s.readRaw += raw
	if text != "" {
		// A reader still running after the session finished (its pipe
		// was held open by a child) writes into the spilled output.
		release := m.inflateLocked(s)
		s.agg.WriteStream(stream, text, n)
		pend := s.pendOut
		if stream == output.StreamStderr {
			pend = s.pendErr
		}
		pend.WriteCounted(text, n)
		release()
		s.wakeLocked()
	}
}

// wakeLocked wakes poll waiters.
func (s *session) wakeLocked() {
	if s.watch != nil {
		close(s.watch)
		s.watch = nil
	}
}

// watchLocked returns a channel closed on the next output or exit.
func (s *session) watchLocked() <-chan struct{} {
	if s.watch == nil {
		s.watch = make(chan struct{})
	}
	return s.watch
}

// finalize records the end of s once; later calls are ignored.
func (m *Manager) finalize(s *session, code int, sig string, err error) {
	s.mu.Lock()
	if s.finished {
		s.mu.Unlock()
		return
	}
	s.finished = true
	s.endedAt = m.now()
	if s.timer != nil {
		s.timer.Stop()
	}
	switch {
	case s.timedOut > 0:
		s.status, s.exitCode, s.signal = api.StatusFailed, -1, "SIGKILL"
		s.reason = api.TimeoutReason(formatSeconds(s.timedOut))
	case s.killReason != "":
		s.status, s.exitCode = api.StatusFailed, -1
		s.signal = sig
		if s.signal == "" {
			s.signal = "SIGKILL"
		}
		s.reason = s.killReason
	case err != nil:
		s.status, s.exitCode, s.signal = api.StatusFailed, -1, sig
		s.reason = err.Error()
	case sig != "":
		s.status, s.exitCode, s.signal = api.StatusFailed, -1, sig
		s.reason = api.SignalReason(sig)
	default:
		s.status, s.exitCode = api.StatusCompleted, code
	}
	s.stdinOpen = false
	if s.raw != nil {
		s.raw.orphan.Stop()
		s.raw.released = true
		s.raw.wakeRoomLocked()
	}
	s.wakeLocked()
	visible := s.visible
	ev := m.exitEventLocked(s)
	rec := exitRecordLocked(s)
	host, status, ran := s.host, s.status, time.Since(s.startedReal)
	started := !s.awaitingApproval // one that never started has no run time
	if visible {
		// Kept for polling: its output goes to disk. A foreground run's
		// result is read from memory at once and the session forgotten.
		m.spillLocked(s)
	}
	s.mu.Unlock()

	m.mu.Lock()
	delete(m.live, s)
	m.mu.Unlock()
	_ = m.record(context.Background(), rec)
	if s.awaited && m.ctx.Err() == nil {
		// Ended while the daemon serves (not cut off by its stop).
		if err := m.awaited.remove(s.id); err != nil {
			m.logf("sessions: %s: %v", s.id, err)
		}
	}
	if visible && ev != nil {
		m.emit(*ev)
	}
	if m.obs != nil && started {
		m.obs.CommandFinished(host, status, ran)
	}
	m.enforceRetention()
	// Last: a waiter on done sees the session settled, retention included.
	close(s.done)
}

// exitEventLocked builds the exit event of a finished session. Every
// backgrounded session that ends gets one, whatever its output, so that a
// client following the event stream learns of each end; details.notify is
// false when the config says the agent is not to be told (docs/tools.md:
// notifyOnExit, empty successes only with notifyOnExitEmptySuccess).
func (m *Manager) exitEventLocked(s *session) *api.Event {
	out := strings.TrimSpace(s.agg.String())
	notify := m.cfg.Exec.NotifyOnExit
	var head string
	if s.status == api.StatusCompleted {
		if out == "" && s.exitCode == 0 && !m.cfg.Exec.NotifyOnExitEmptySuccess {
			notify = false
		}
		head = fmt.Sprintf("Exec completed (%s, code %d)", s.id, s.exitCode)
	} else if s.signal != "" {
		head = fmt.Sprintf("Exec failed (%s, signal %s)", s.id, s.signal)
	} else {
		// No exit code exists (details.exitCode is null): say why instead
		// of a made-up "code -1".
		head = fmt.Sprintf("Exec failed (%s): %s", s.id, s.reason)
	}
	text := head
	if out != "" {
		text += " :: " + lastChars(out, eventChars)
	}
	details := s.stateDetailsLocked()
	details.Notify = new(notify)
	return &api.Event{
		Type: vocab.EventExit, Text: text, SessionID: s.id, AgentID: s.agentID, SessionKey: s.sessionKey,
		Time:    s.endedAt,
		Details: details,
	}
}

// kill ends s's process tree in the background and makes sure it finalizes.
// reason is recorded unless a timeout already claimed the session.
func (m *Manager) kill(s *session, reason string) {
	s.mu.Lock()
	if s.finished || s.killStarted {
		if !s.finished && s.killReason == "" && s.timedOut == 0 {
			s.killReason = reason
		}
		s.mu.Unlock()
		return
	}
	s.killStarted = true
	if s.timedOut == 0 {
		s.killReason = reason
	}
	s.mu.Unlock()
	// A killed command's output is read to its end, held back by nobody.
	s.releaseRaw()
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), killCallTimeout)
		err := s.proc.Kill(ctx)
		cancel()
		if err != nil {
			m.logf("sessions: %s: kill: %v", s.id, err)
		}
		t := time.NewTimer(killFinalizeAfter)
		defer t.Stop()
		select {
		case <-s.done:
		case <-t.C:
			m.logf("sessions: %s: still not exited %s after kill; marking it failed", s.id, killFinalizeAfter)
			m.finalize(s, -1, "SIGKILL", nil)
		}
	}()
}

// armTimeout (re)arms the session timeout d measured from the session start;
// d <= 0 disarms it.
func (m *Manager) armTimeoutLocked(s *session, d time.Duration) {
	if s.timer != nil {
		s.timer.Stop()
		s.timer = nil
	}
	if d <= 0 || s.finished {
		return
	}
	remaining := d - time.Since(s.startedReal)
	s.timer = time.AfterFunc(max(remaining, 0), func() {
		s.mu.Lock()
		if s.finished || s.timedOut > 0 {
			s.mu.Unlock()
			return
		}
		s.timedOut = d
		s.mu.Unlock()
		m.logf("sessions: %s: timeout after %s; killing", s.id, d)
		m.kill(s, "")
	})
}

// stateDetailsLocked is the state part shared by poll, kill and events.
func (s *session) stateDetailsLocked() api.Details {
	d := api.Details{Status: s.statusLocked(), SessionID: s.id, Name: new(s.name), PID: new(s.pid)}
	if s.waitingForInputLocked() {
		d.WaitingForInput = true
	}
	if doubt := s.doubtLocked(); doubt != "" {
		d.Reason = doubt
	}
	if s.finished {
		if s.status == api.StatusCompleted {
			d.ExitCode = api.Code(s.exitCode)
		} else {
			d.ExitCode, d.Signal, d.Reason = api.NoExitCode(), new(s.signal), s.reason
		}
	}
	return d
}

// doubtLocked is why the state of a running session is unknown right now
// (Started.Doubt: its host lost sight of it), "" when it is known.
func (s *session) doubtLocked() string {
	if s.finished {
		return ""
	}
	if s.doubt != nil {
		return s.doubt()
	}
	return ""
}

func (s *session) statusLocked() string {
	if !s.finished {
		if s.awaitingApproval {
			return api.StatusApprovalPending
		}
		return api.StatusRunning
	}
	return s.status
}

// formatSeconds prints d as "5s", "1.5s".
func formatSeconds(d time.Duration) string {
	sec := d.Seconds()
	if sec == float64(int64(sec)) {
		return fmt.Sprintf("%ds", int64(sec))
	}
	return fmt.Sprintf("%gs", sec)
}

// formatDuration is the compact duration of `process list`.
func formatDuration(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	default:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
}
