package sessions

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/sandboxctl/sandboxctl/api"

	"github.com/sandboxctl/sandboxctl/sessions/output"
	"github.com/sandboxctl/sandboxctl/vocab"
)

// RecoveredSession is one session found by a host's HostCaps.Recover.
type RecoveredSession struct {
	// ID is the session id to keep, if the host knows it; "" or an id already
	// in use gets a fresh one.
	ID                  string
	Command             string
	Dir                 string // the working directory (hostapi.StartSpec.Dir)
	AgentID, SessionKey string
	PTY                 bool
	// StdinOpen says whether process write can still reach the process.
	StdinOpen bool
	PID       int
	StartedAt time.Time
	// Output is what the host kept (raw bytes, streams interleaved).
	// Covered is the raw byte count (both streams) that Output ends at, so
	// its first byte is at Covered-len(Output) and everything before was
	// dropped; Process streams what follows (from a later offset when it
	// reports, with Skipped, output the host dropped in between).
	Output  []byte
	Covered int64
	// Skipped, when set, is how much output after Covered the host no
	// longer had when it re-attached the running process (a supervisor
	// drops the oldest output it keeps): the process streams from that far
	// past Covered.
	Skipped func() int64
	// Finished sessions carry their end; running ones carry the started
	// Process, which streams the output after Output and reports the exit
	// (a finished one may carry it for Forget).
	Finished bool
	// Lost, on a finished session, says why its end is unknown (its
	// processes were ended when it was found): the session is failed with
	// this reason.
	Lost     string
	ExitCode int
	Signal   string
	EndedAt  time.Time
	Started
}

// Recover adopts the sessions that hosts with HostCaps.Recover still hold:
// they become background sessions of their scope (listed, polled, logged,
// killed like any other). It returns how many it adopted; a host that fails
// is reported in the error while the others are still adopted.
func (m *Manager) Recover(ctx context.Context) (int, error) {
	if m.isClosed() {
		return 0, ErrClosed
	}
	names := make([]vocab.Host, 0, len(m.hosts))
	for name := range m.hosts {
		names = append(names, name)
	}
	slices.Sort(names)
	n, err := m.recoverApprovals(ctx)
	var errs []error
	if err != nil {
		errs = append(errs, err)
	}
	for _, name := range names {
		caps := m.capsOf(name)
		if caps.Recover == nil {
			continue
		}
		var late <-chan RecoveredSession
		if caps.late() {
			// Its running sessions show, in doubt, until it brings
			// them back.
			m.placeAwaited(name)
			late = caps.Later(m.ctx)
		}
		list, err := caps.Recover(ctx)
		if err != nil {
			errs = append(errs, fmt.Errorf("recover %s sessions: %w", name, err))
		}
		for _, rs := range list {
			if err := m.adopt(name, rs); err != nil {
				errs = append(errs, fmt.Errorf("recover %s session %s: %w", name, rs.ID, err))
				continue
			}
			n++
		}
		if late != nil {
			// After the sessions above: its end fails the placeholders
			// still waiting.
			m.adoptLater(name, late)
		}
	}
	m.retainCursors()
	return n, errors.Join(errs...)
}

// recoverApprovals cancels the approval requests the previous daemon left
// unused (GuardCaps.CancelUnused) and brings back each session that waited on one
// as failed, with the reason and an exit event.
func (m *Manager) recoverApprovals(ctx context.Context) (int, error) {
	if m.guard == nil || m.guard.Caps().CancelUnused == nil {
		return 0, nil
	}
	list, err := m.guard.Caps().CancelUnused(ctx, approvalCancelReason)
	if err != nil {
		return 0, fmt.Errorf("cancel the previous daemon's approval requests: %w", err)
	}
	n := 0
	var errs []error
	for _, a := range list {
		reason := fmt.Sprintf("approval %s: %s", a.Slug, approvalCancelReason)
		if a.Decision != "" {
			reason = fmt.Sprintf("approval %s (decided %s too late): %s", a.Slug, a.Decision, approvalCancelReason)
		}
		m.logf("sessions: cancelled approval %s of agent %q (%s): the exec that waited on it died with the previous daemon", a.Slug, a.AgentID, a.Command)
		for _, id := range a.SessionIDs {
			host := a.Host
			if host == "" {
				host = vocab.HostGateway
			}
			rs := RecoveredSession{ID: id, Command: a.Command, Dir: a.Cwd, AgentID: a.AgentID, SessionKey: a.SessionKey,
				StartedAt: a.CreatedAt, Finished: true, Lost: reason}
			s, err := m.adoptSession(host, rs)
			if err != nil {
				errs = append(errs, fmt.Errorf("session %s of approval %s: %w", id, a.Slug, err))
				continue
			}
			n++
			s.mu.Lock()
			ev := m.exitEventLocked(s)
			s.mu.Unlock()
			if ev != nil {
				m.emit(*ev)
			}
		}
	}
	return n, errors.Join(errs...)
}

// adoptLater adopts the sessions of host that ch delivers, until the
// Manager closes.
func (m *Manager) adoptLater(host vocab.Host, ch <-chan RecoveredSession) {
	go func() {
		for {
			select {
			case <-m.ctx.Done():
				return
			case rs, ok := <-ch:
				if !ok {
					// The host brought back all it holds.
					m.failAwaited(host, fmt.Sprintf("lost: its %s host no longer holds it after the daemon restarted (its sandbox or node was removed or restarted)", host))
					return
				}
				if err := m.adopt(host, rs); err != nil {
					m.logf("sessions: recover %s session %s: %v", host, rs.ID, err)
					if rs.Process != nil && !errors.Is(err, ErrClosed) {
						// Nothing would track it.
						kctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
						_ = rs.Process.Kill(kctx)
						cancel()
					}
					continue
				}
				m.logf("sessions: recovered %s session %s (%s)", host, rs.ID, rs.Command)
			}
		}
	}()
}

func (m *Manager) adopt(host vocab.Host, rs RecoveredSession) error {
	_, err := m.adoptSession(host, rs)
	return err
}

// adoptSession is adopt that returns the adopted session.
func (m *Manager) adoptSession(host vocab.Host, rs RecoveredSession) (*session, error) {
	if !rs.Finished && rs.Process == nil {
		return nil, errors.New("running session without a process")
	}
	if rs.Skipped != nil {
		if n := rs.Skipped(); n > 0 {
			// The process streams from n bytes past the kept output: the
			// kept output ends before a gap, and goes with it, so that
			// every offset stays true.
			rs.Output, rs.Covered = nil, rs.Covered+n
		}
	}
	s := &session{
		scope:       scopeKey(rs.AgentID, rs.SessionKey),
		agentID:     rs.AgentID,
		sessionKey:  rs.SessionKey,
		command:     rs.Command,
		name:        deriveName(rs.Command),
		cwd:         rs.Dir,
		host:        host,
		pty:         rs.PTY,
		proc:        rs.Process,
		inputWait:   rs.InputWait,
		forget:      rs.Forget,
		sendSignal:  rs.Started.Signal, // rs.Signal is how a finished one ended
		doubt:       rs.Doubt,
		pid:         rs.PID,
		startedAt:   rs.StartedAt,
		startedReal: time.Now(),
		agg:         output.NewLog(m.lim.MaxOutputChars),
		pendOut:     output.NewTail(m.lim.PendingMaxOutputChars),
		pendErr:     output.NewTail(m.lim.PendingMaxOutputChars),
		stdinOpen:   rs.StdinOpen && !rs.Finished,
		visible:     true,
		done:        make(chan struct{}),
	}
	if s.startedAt.IsZero() {
		s.startedAt = m.now()
	}
	// The kept output is shown by log and by the next poll. DSR queries in
	// it are old: they are removed but not answered.
	dec := output.NewDecoder(rs.PTY)
	text, _ := dec.Feed(m.mask.Mask(rs.Output))
	text += dec.Flush()
	// Offsets are raw byte offsets of the whole output: the kept output
	// starts where the host's drops end.
	s.agg.Skip(max(rs.Covered-int64(len(rs.Output)), 0))
	s.agg.WriteStream(output.StreamStdout, text, utf8.RuneCountInString(text))
	pending, missed := m.pendingOnRecover(host, rs)
	s.pendOut.AddDropped(missed)
	s.pendOut.Write(pending)
	s.readRaw, s.delivered = rs.Covered, rs.Covered
	if rs.Finished {
		s.finished = true
		s.endedAt = rs.EndedAt
		if s.endedAt.IsZero() {
			s.endedAt = m.now()
		}
		if rs.Lost != "" {
			s.status, s.exitCode, s.reason = api.StatusFailed, -1, rs.Lost
		} else if rs.Signal != "" {
			s.status, s.exitCode, s.signal = api.StatusFailed, -1, rs.Signal
			s.reason = api.SignalReason(rs.Signal)
		} else {
			s.status, s.exitCode = api.StatusCompleted, rs.ExitCode
		}
		close(s.done)
	}

	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil, ErrClosed
	}
	if old := m.sessions[rs.ID]; old != nil && old.placeholder && old.host == host {
		// The session awaited since the restart is back: it takes its
		// place under its id.
		delete(m.sessions, rs.ID)
		s.awaited = true
		if rs.Finished {
			defer func() {
				if err := m.awaited.remove(rs.ID); err != nil {
					m.logf("sessions: %s: %v", rs.ID, err)
				}
			}()
		}
	}
	if rs.ID != "" && !m.idTakenLocked(rs.ID) {
		s.id = rs.ID
	} else {
		s.id = newID(m.idTakenLocked)
	}
	m.sessions[s.id] = s
	if !rs.Finished {
		m.live[s] = struct{}{}
	}
	m.mu.Unlock()

	if !rs.Finished {
		s.mu.Lock()
		m.armTimeoutLocked(s, time.Duration(m.lim.BackgroundTimeoutSec)*time.Second)
		rec := m.awaitRecordLocked(s) // shown after the next restart too
		s.mu.Unlock()
		m.await(s, rec)
		m.run(s)
	}
	return s, nil
}
