package sessions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/sandboxctl/sandboxctl/api"
	"github.com/sandboxctl/sandboxctl/internal/atomicfile"
	"github.com/sandboxctl/sandboxctl/sessions/output"
	"github.com/sandboxctl/sandboxctl/vocab"

	"golang.org/x/sys/unix"
)

// awaitedRecord is a running background session of a host whose sessions
// come back late after a daemon restart (HostCaps.Later: an Engine that
// may not answer yet, a node that has not reconnected yet). A restarted
// daemon shows it as a placeholder session, in doubt, until its host
// brings it back (issue 32 items 5 and 9): never "No session found".
type awaitedRecord struct {
	ID         string     `json:"id"`
	Host       vocab.Host `json:"host"`
	Place      string     `json:"place,omitempty"` // `Engine "e1"`, `node "n1"`
	AgentID    string     `json:"agentId,omitempty"`
	SessionKey string     `json:"sessionKey,omitempty"`
	Command    string     `json:"command"`
	Cwd        string     `json:"cwd,omitempty"`
	PTY        bool       `json:"pty,omitempty"`
	StartedAt  time.Time  `json:"startedAt"`
}

// awaitedStore keeps the awaitedRecords in one small file, written
// atomically when a session of a late host goes to the background and
// when it ends. A missing or unreadable file starts empty (at worst a
// session is not shown until its host brings it back).
//
// Its space is reserved: a ballast file beside it (awaitedReserveBytes,
// allocated while there is room) is given up when the state filesystem is
// full, so the records of running sessions are still written then; the
// ballast comes back with the next write that finds room for it.
type awaitedStore struct {
	path string

	mu sync.Mutex
	m  map[string]awaitedRecord
}

// awaitedReserveBytes is the ballast kept beside the awaited file: room
// for two copies (the atomic write's temporary file and the old one) of
// about 400 records.
const awaitedReserveBytes = 256 << 10

func openAwaited(path string) *awaitedStore {
	a := &awaitedStore{path: path, m: map[string]awaitedRecord{}}
	if path == "" {
		return a
	}
	if data, err := os.ReadFile(path); err == nil {
		_ = json.Unmarshal(data, &a.m)
	}
	_ = a.reserve()
	return a
}

func (a *awaitedStore) reservePath() string { return a.path + ".reserve" }

// reserve allocates the ballast file if it is not there (blocks, not a
// sparse file: fallocate, or zeros where the filesystem has no fallocate).
func (a *awaitedStore) reserve() error {
	if st, err := os.Stat(a.reservePath()); err == nil && st.Size() >= awaitedReserveBytes {
		return nil
	}
	f, err := os.OpenFile(a.reservePath(), os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	err = unix.Fallocate(int(f.Fd()), 0, 0, awaitedReserveBytes)
	if errors.Is(err, unix.EOPNOTSUPP) {
		_, err = f.WriteAt(make([]byte, awaitedReserveBytes), 0)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(a.reservePath())
	}
	return err
}

func (a *awaitedStore) add(r awaitedRecord) error {
	if a.path == "" {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.m[r.ID] = r
	return a.written(a.writeLocked())
}

func (a *awaitedStore) remove(id string) error {
	if a.path == "" {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.m[id]; !ok {
		return nil
	}
	delete(a.m, id)
	return a.written(a.writeLocked())
}

// written turns a write's use of the ballast into an error that says so
// (the records are written; the state filesystem is full).
func (a *awaitedStore) written(usedReserve bool, err error) error {
	if err == nil && usedReserve {
		return fmt.Errorf("%w: awaited sessions written in their reserved space; free space on the state filesystem", errStateFull)
	}
	return err
}

// errStateFull says a store wrote what it had to in its reserved space.
var errStateFull = errors.New("the state filesystem is full")

func (a *awaitedStore) list() []awaitedRecord {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]awaitedRecord, 0, len(a.m))
	for _, r := range a.m {
		out = append(out, r)
	}
	return out
}

// writeLocked writes the records; on a full filesystem it gives up the
// ballast and writes them in its room (usedReserve), and the error says
// the records are lost only when even that fails.
func (a *awaitedStore) writeLocked() (usedReserve bool, err error) {
	data, err := json.Marshal(a.m)
	if err != nil {
		return false, err
	}
	err = atomicfile.Write(a.path, data, 0o600)
	if errors.Is(err, unix.ENOSPC) {
		if rerr := os.Remove(a.reservePath()); rerr == nil {
			usedReserve = true
			err = atomicfile.Write(a.path, data, 0o600)
		}
	}
	if err != nil {
		return usedReserve, fmt.Errorf("awaited sessions: the record of running sessions is not written (after a daemon restart they show only once their host brings them back): %w", err)
	}
	if !usedReserve {
		_ = a.reserve()
	}
	return usedReserve, nil
}

// awaitRecordLocked is the record of s (backgrounded, running) when its
// host brings its sessions back late after a restart, else nil; await
// writes it (without s.mu held).
func (m *Manager) awaitRecordLocked(s *session) *awaitedRecord {
	if !m.capsOf(s.host).late() || s.finished || s.awaited {
		return nil
	}
	s.awaited = true
	return &awaitedRecord{ID: s.id, Host: s.host, Place: s.place, AgentID: s.agentID, SessionKey: s.sessionKey,
		Command: s.command, Cwd: s.cwd, PTY: s.pty, StartedAt: s.startedAt}
}

func (m *Manager) await(s *session, r *awaitedRecord) {
	if r == nil {
		return
	}
	if err := m.awaited.add(*r); err != nil {
		m.logf("sessions: %s: %v", r.ID, err)
	}
	s.mu.Lock()
	ended := s.finished
	s.mu.Unlock()
	if ended {
		// Ended meanwhile, and finalize found no record to remove.
		if err := m.awaited.remove(r.ID); err != nil {
			m.logf("sessions: %s: %v", r.ID, err)
		}
	}
}

// errAwaited is what a placeholder session answers to write, kill and the
// like: its host has not brought it back yet.
var errAwaited = fmt.Errorf("%w: its host has not brought it back since the daemon restarted", ErrHostUnavailable)

// unreachable is the error of action on s while its host cannot reach it
// (a placeholder, or a process in doubt: Started.Doubt), else nil: the
// action would not be delivered, and the command may still run.
func (s *session) unreachable(action string) error {
	s.mu.Lock()
	doubt := s.doubtLocked()
	s.mu.Unlock()
	if s.placeholder {
		return fmt.Errorf("%s session %s: %w (%s)", action, s.id, errAwaited, doubt)
	}
	if doubt != "" {
		return fmt.Errorf("%s session %s: %w: it cannot be reached: %s", action, s.id, ErrHostUnavailable, doubt)
	}
	return nil
}

// awaitedProc is the Process of a placeholder session: nothing to read,
// nothing to write; Doubt says what is awaited.
type awaitedProc struct{ doubt string }

func (p *awaitedProc) Doubt() string                          { return p.doubt }
func (p *awaitedProc) PID() int                               { return 0 }
func (p *awaitedProc) Stdout() io.Reader                      { return strings.NewReader("") }
func (p *awaitedProc) Stderr() io.Reader                      { return nil }
func (p *awaitedProc) Write([]byte) (int, error)              { return 0, errAwaited }
func (p *awaitedProc) CloseStdin() error                      { return errAwaited }
func (p *awaitedProc) Resize(context.Context, int, int) error { return errAwaited }
func (p *awaitedProc) Kill(context.Context) error             { return errAwaited }
func (p *awaitedProc) Wait(ctx context.Context) (int, string, error) {
	<-ctx.Done()
	return -1, "", ctx.Err()
}

// awaitedDoubt is the doubt of a placeholder session of host.
func awaitedDoubt(host vocab.Host, place string) string {
	if host == vocab.HostNode {
		if place == "" {
			place = "its node"
		}
		return fmt.Sprintf("unknown: %s is reconnecting (it has not reconnected since the daemon restarted); the command may still be running", place)
	}
	if place == "" {
		place = "its Engine"
	}
	return fmt.Sprintf("unknown: %s not answering since the daemon restarted; retrying (the command may still be running)", place)
}

// placeAwaited makes a placeholder session of every awaited record of host
// that no session has yet: listed and polled in its scope, running, with
// the doubt as its reason, until its host brings it back (adoptSession
// replaces it) or says it has not (failAwaited).
func (m *Manager) placeAwaited(host vocab.Host) {
	for _, r := range m.awaited.list() {
		if r.Host != host {
			continue
		}
		ap := &awaitedProc{doubt: awaitedDoubt(host, r.Place)}
		s := &session{
			scope: scopeKey(r.AgentID, r.SessionKey), agentID: r.AgentID, sessionKey: r.SessionKey,
			command: r.Command, name: deriveName(r.Command), cwd: r.Cwd, host: host, pty: r.PTY,
			proc: ap, doubt: ap.Doubt, place: r.Place, placeholder: true, awaited: true,
			startedAt: r.StartedAt, startedReal: time.Now(),
			agg: output.NewLog(m.lim.MaxOutputChars), pendOut: output.NewTail(m.lim.PendingMaxOutputChars),
			pendErr: output.NewTail(m.lim.PendingMaxOutputChars), visible: true, done: make(chan struct{}),
		}
		if s.startedAt.IsZero() {
			s.startedAt = m.now()
		}
		m.mu.Lock()
		if m.closed || m.idTakenLocked(r.ID) {
			m.mu.Unlock()
			continue
		}
		s.id = r.ID
		m.sessions[s.id] = s
		m.mu.Unlock()
		m.logf("sessions: %s session %s (%s) awaits its host: %s", host, r.ID, r.Command, ap.doubt)
	}
}

// failAwaited fails the placeholder sessions of host still waiting: the
// host has brought back every session it holds, and not these.
func (m *Manager) failAwaited(host vocab.Host, reason string) {
	m.mu.Lock()
	var left []*session
	for _, s := range m.sessions {
		if s.placeholder && s.host == host {
			left = append(left, s)
		}
	}
	m.mu.Unlock()
	for _, s := range left {
		s.mu.Lock()
		if s.finished {
			s.mu.Unlock()
			continue
		}
		s.finished, s.endedAt = true, m.now()
		s.status, s.exitCode, s.reason = api.StatusFailed, -1, reason
		close(s.done)
		ev := m.exitEventLocked(s)
		s.mu.Unlock()
		if err := m.awaited.remove(s.id); err != nil {
			m.logf("sessions: %s: %v", s.id, err)
		}
		m.logf("sessions: %s session %s: %s", host, s.id, reason)
		if ev != nil {
			m.emit(*ev)
		}
	}
}
