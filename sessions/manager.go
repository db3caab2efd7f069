package sessions

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/sandboxctl/sandboxctl/api"
	"github.com/sandboxctl/sandboxctl/internal/audit"
	"github.com/sandboxctl/sandboxctl/sessions/config"
	"github.com/sandboxctl/sandboxctl/sessions/output"
	"github.com/sandboxctl/sandboxctl/sessions/toolapi"
	"github.com/sandboxctl/sandboxctl/vocab"
)

// Options configure a Manager.
type Options struct {
	// Config is the loaded configuration (config.Default() for defaults).
	// Zero numeric values in Config.Exec mean "the default".
	Config config.File
	// Hosts maps "sandbox", "gateway" and "node" to their implementations.
	// A host that is missing is only an error when a request selects it.
	Hosts map[vocab.Host]Host
	// Guard judges gateway/node commands (and sandbox ones with ask=always).
	// Optional: without it, see Manager.Exec for the fail-closed rules.
	Guard Guard
	// Now is the clock for timestamps and the TTL sweep (default time.Now).
	Now func() time.Time
	// Logf receives diagnostics (default: discard).
	Logf func(format string, args ...any)
	// Mask, when set, replaces the credential broker's real secret values
	// by their placeholders in every command's decoded output
	// (docs/secrets.md); raw byte streams are passed as they are.
	Mask *output.Masker
	// Getenv reads the SANDBOXCTL_* / PI_BASH_* overrides (default os.Getenv).
	Getenv func(string) string
	// CursorFile keeps how far polls delivered the output of sessions that
	// outlive the daemon, so that a restarted daemon does not deliver it
	// again (e.g. <state>/cursors.json); "" keeps none.
	CursorFile string
	// AwaitedFile keeps the running background sessions of hosts whose
	// sessions come back late after a restart (an Engine, a node), so that
	// a restarted daemon shows them, in doubt, until they come back (e.g.
	// <state>/awaited.json); "" keeps none.
	AwaitedFile string
	// SpillDir, when set, holds the output of finished sessions kept for
	// polling (one file each, removed when the session is forgotten), so
	// that it is not held in memory (e.g. <state>/output). Emptied at New.
	// "" keeps it in memory.
	SpillDir string
	// Journal, when set, numbers and keeps every event before subscribers
	// get it (eventjournal.Journal), so clients can replay what they missed.
	Journal EventJournal
	// Audit, when set, records every exec request, guard verdict,
	// approval and session start and exit (audit.Log). An error from it
	// refuses the request before anything runs (audit.onFailure refuse).
	Audit audit.Recorder
	// Observer, when set, is told when tool calls answer, commands end and
	// approvals are decided (the daemon's metrics): the calls are counted
	// here, where every front door arrives, and no layer is added to a
	// request's path.
	Observer Observer
}

// Observer is told about tool calls, commands and approvals as they end.
// Its methods must be quick and safe for concurrent use.
type Observer interface {
	// ExecAnswered reports an exec call (streamed or not) as it answers:
	// its result, or err, and how long the call took.
	ExecAnswered(res api.Result, err error, took time.Duration)
	// ProcessAnswered reports a process call as it answers: its input,
	// and its result or err.
	ProcessAnswered(p api.ProcessParams, res api.Result, err error)
	// CommandFinished reports a command that ended on host with status
	// (completed or failed) after running for ran.
	CommandFinished(host vocab.Host, status string, ran time.Duration)
	// ApprovalDecided reports the verdict on a session's pending approval
	// (run or deny), whether askFallback gave it when the request expired,
	// and how long the session waited for it.
	ApprovalDecided(decision vocab.Decision, expired bool, waited time.Duration)
}

// Limits are the effective numeric settings after defaults, environment
// overrides and clamping.
type Limits struct {
	YieldMs               int           // default yield window (backgroundMs), 10..120000
	TimeoutSec            int           // default foreground timeout
	BackgroundTimeoutSec  int           // timeout of backgrounded runs without one; 0 = none
	MaxOutputChars        int           // aggregated output cap, 1000..200000
	PendingMaxOutputChars int           // unpolled output cap per stream, 1000..200000
	JobTTL                time.Duration // finished-session lifetime, 1 min..3 h
	SweepEvery            time.Duration // max(30 s, JobTTL/6)
	// Session quotas (limits.sessions): running per agent and in all,
	// finished sessions kept per agent and in all.
	RunningPerAgent, Running   int
	RetainedPerAgent, Retained int
}

// Manager runs the exec and process tools. It is safe for concurrent use.
type Manager struct {
	cursors *cursorStore
	awaited *awaitedStore
	cfg     config.File
	lim     Limits
	hosts   map[vocab.Host]Host
	guard   Guard
	now     func() time.Time
	logf    func(string, ...any)
	mask    *output.Masker
	obs     Observer
	ctx     context.Context // lifetime of sessions; cancelled by Close
	cancel  context.CancelFunc

	mu       sync.Mutex
	sessions map[string]*session   // by id: every registered session
	reserved map[string]string     // ids handed to a host before registering -> agent id
	live     map[*session]struct{} // not yet finished (Close kills these)
	closed   bool
	evicted  tombstones // sessions forgotten over limits.sessions, and why
	spillDir string

	subMu   sync.Mutex
	subs    map[chan api.Event]struct{}
	journal EventJournal
	audit   audit.Recorder

	sweepStop chan struct{}
	sweepDone chan struct{}
	wg        sync.WaitGroup // session goroutines

	// rawBufs recycles raw sessions' read buffers (*[rawReadChunk]byte):
	// two fresh ones per command, allocated and zeroed, were a visible
	// part of a short command's cost.
	rawBufs sync.Pool
}

// EventJournal numbers and keeps events: Append returns ev with its
// cursor; an error means it is kept but may not survive a restart.
type EventJournal interface {
	Append(ev api.Event) (api.Event, error)
}

// New validates opts, applies defaults and overrides, and starts the TTL
// sweeper. Call Close to stop it and kill every running session.
func New(opts Options) (*Manager, error) {
	m := &Manager{
		cfg:      opts.Config,
		hosts:    opts.Hosts,
		guard:    opts.Guard,
		now:      opts.Now,
		logf:     opts.Logf,
		mask:     opts.Mask,
		obs:      opts.Observer,
		sessions: map[string]*session{},
		reserved: map[string]string{},
		spillDir: opts.SpillDir,
		live:     map[*session]struct{}{},
		subs:     map[chan api.Event]struct{}{},
		cursors:  openCursors(opts.CursorFile),
		awaited:  openAwaited(opts.AwaitedFile),
		journal:  opts.Journal,
		audit:    opts.Audit,
	}
	if m.audit == nil {
		m.audit = audit.Nop{}
	}
	if m.now == nil {
		m.now = time.Now
	}
	if m.logf == nil {
		m.logf = func(string, ...any) {}
	}
	if m.hosts == nil {
		m.hosts = map[vocab.Host]Host{}
	}
	getenv := opts.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	// The SANDBOXCTL_* / PI_BASH_* overrides, by the config's one rule.
	if err := m.cfg.ApplyEnv(getenv); err != nil {
		return nil, fmt.Errorf("sessions: %w", err)
	}
	// Empty modes take their defaults; config.Load has validated the rest,
	// which a configuration built in code must get right as well.
	ex := &m.cfg.Exec
	def := config.Default().Exec
	ex.Host = cmp.Or(ex.Host, def.Host)
	ex.Security = cmp.Or(ex.Security, def.Security)
	ex.Ask = cmp.Or(ex.Ask, def.Ask)
	_, hostErr := vocab.ParseHost(string(ex.Host))
	_, secErr := vocab.ParseSecurity(string(ex.Security))
	_, askErr := vocab.ParseAsk(string(ex.Ask))
	for _, c := range []struct {
		key string
		err error
	}{{"exec.host", hostErr}, {"exec.security", secErr}, {"exec.ask", askErr}} {
		if c.err != nil {
			return nil, fmt.Errorf("sessions: config %s: %w: %w", c.key, c.err, toolapi.ErrInvalidInput)
		}
	}
	m.lim = m.limits()
	if err := prepareSpillDir(m.spillDir); err != nil {
		return nil, err
	}

	m.ctx, m.cancel = context.WithCancel(context.Background())
	m.sweepStop = make(chan struct{})
	m.sweepDone = make(chan struct{})
	go m.sweeper()
	return m, nil
}

// Limits returns the effective limits.
func (m *Manager) Limits() Limits { return m.lim }

func (m *Manager) limits() Limits {
	ex := m.cfg.Exec
	l := Limits{
		YieldMs:               clampInt(orDefault(ex.BackgroundMs, 10000), api.MinYieldMs, api.MaxYieldMs),
		TimeoutSec:            orDefault(ex.TimeoutSec, 1800),
		BackgroundTimeoutSec:  max(ex.BackgroundTimeoutSec, 0),
		MaxOutputChars:        clampInt(orDefault(ex.MaxOutputChars, 200000), 1000, 200000),
		PendingMaxOutputChars: clampInt(orDefault(ex.PendingMaxOutputChars, 30000), 1000, 200000),
	}
	sl, def := m.cfg.Limits.Sessions, config.Default().Limits.Sessions
	l.RunningPerAgent = orDefault(sl.RunningPerAgent, def.RunningPerAgent)
	l.Running = orDefault(sl.Running, def.Running)
	l.RetainedPerAgent = orDefault(sl.RetainedPerAgent, def.RetainedPerAgent)
	l.Retained = orDefault(sl.Retained, def.Retained)
	ttl := clampInt(orDefault(ex.CleanupMs, 1800000), 60000, 3*3600*1000)
	l.JobTTL = time.Duration(ttl) * time.Millisecond
	l.SweepEvery = max(30*time.Second, l.JobTTL/6)
	return l
}

func orDefault(v, def int) int {
	if v <= 0 {
		return def
	}
	return v
}

func clampInt(v, lo, hi int) int { return min(max(v, lo), hi) }

// Subscribe returns a channel of events. It is closed when ctx ends or the
// Manager is closed. A subscriber that does not keep up loses events (the
// buffer holds 256) rather than stalling sessions.
func (m *Manager) Subscribe(ctx context.Context) <-chan api.Event {
	ch := make(chan api.Event, 256)
	m.subMu.Lock()
	if m.subs == nil { // closed
		m.subMu.Unlock()
		close(ch)
		return ch
	}
	m.subs[ch] = struct{}{}
	m.subMu.Unlock()
	go func() {
		select {
		case <-ctx.Done():
		case <-m.ctx.Done():
		}
		m.subMu.Lock()
		if _, ok := m.subs[ch]; ok {
			delete(m.subs, ch)
			close(ch)
		}
		m.subMu.Unlock()
	}()
	return ch
}

// Publish sends ev to every subscriber, like the Manager's own exit events;
// the approvals code uses it for approval events. Time defaults to now.
func (m *Manager) Publish(ev api.Event) {
	if ev.Time.IsZero() {
		ev.Time = m.now()
	}
	m.emit(ev)
}

func (m *Manager) emit(ev api.Event) {
	m.subMu.Lock()
	defer m.subMu.Unlock()
	if m.journal != nil {
		// Under subMu: cursors are in the order subscribers see.
		var err error
		if ev, err = m.journal.Append(ev); err != nil {
			m.logf("sessions: %v", err)
		}
	}
	for ch := range m.subs {
		select {
		case ch <- ev:
		default:
			m.logf("sessions: event subscriber is full; dropped %s event for %s", ev.Type, ev.SessionID)
		}
	}
}

// Close kills every running session, waits for them to finish (bounded by
// ctx), stops the sweeper and closes every subscription. Exec and Process
// return ErrClosed afterwards. Calling Close twice is harmless.
func (m *Manager) Close(ctx context.Context) error {
	m.mu.Lock()
	already := m.closed
	m.closed = true
	var live []*session
	for s := range m.live {
		live = append(live, s)
	}
	m.mu.Unlock()
	if !already {
		close(m.sweepStop)
	}
	for _, s := range live {
		m.kill(s, api.KillReasonClosed)
	}
	var err error
	for _, s := range live {
		select {
		case <-s.done:
		case <-ctx.Done():
			err = fmt.Errorf("sessions: close: %d session(s) still running: %w", m.liveCount(), ctx.Err())
		}
		if err != nil {
			break
		}
	}
	if err == nil {
		waited := make(chan struct{})
		go func() { m.wg.Wait(); close(waited) }()
		select {
		case <-waited:
		case <-ctx.Done():
			err = fmt.Errorf("sessions: close: output readers still running: %w", ctx.Err())
		}
	}
	m.cancel()
	<-m.sweepDone
	m.subMu.Lock()
	for ch := range m.subs {
		close(ch)
	}
	m.subs = nil
	m.subMu.Unlock()
	return err
}

// Running counts the sessions not yet finished (the daemon's metrics).
func (m *Manager) Running() int { return m.liveCount() }

func (m *Manager) liveCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.live)
}

func (m *Manager) isClosed() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.closed
}

func (m *Manager) sweeper() {
	defer close(m.sweepDone)
	t := time.NewTicker(m.lim.SweepEvery)
	defer t.Stop()
	for {
		select {
		case <-m.sweepStop:
			return
		case <-t.C:
			m.sweep()
		}
	}
}

// sweep forgets finished sessions older than the TTL (by the injected clock).
func (m *Manager) sweep() int {
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for id, s := range m.sessions {
		s.mu.Lock()
		expired := s.finished && now.Sub(s.endedAt) >= m.lim.JobTTL
		s.mu.Unlock()
		if expired {
			delete(m.sessions, id)
			m.releaseHostState(s)
			n++
		}
	}
	return n
}

// idTakenLocked reports whether id is registered or reserved.
func (m *Manager) idTakenLocked(id string) bool {
	_, ok := m.sessions[id]
	_, res := m.reserved[id]
	return ok || res
}

// reserveID picks a fresh id before the host starts the command, so the
// host can record it (a supervised sandbox keeps it across daemon
// restarts), and takes one of agentID's running slots (ErrSessionQuota).
func (m *Manager) reserveID(agentID string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return "", ErrClosed
	}
	if err := m.checkRunningLocked(agentID); err != nil {
		return "", err
	}
	id := newID(m.idTakenLocked)
	m.reserved[id] = agentID
	return id, nil
}

// releaseID gives back a reserved id whose command did not start.
func (m *Manager) releaseID(id string) {
	m.mu.Lock()
	delete(m.reserved, id)
	m.mu.Unlock()
}

// register adds s under its reserved id, or a fresh one.
func (m *Manager) register(s *session) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if s.id != "" {
		delete(m.reserved, s.id)
	}
	if m.closed {
		return ErrClosed
	}
	if s.id == "" || m.idTakenLocked(s.id) {
		s.id = newID(m.idTakenLocked)
	}
	m.sessions[s.id] = s
	m.live[s] = struct{}{}
	return nil
}

func (m *Manager) forget(s *session) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.sessions[s.id] == s {
		delete(m.sessions, s.id)
		m.releaseHostState(s)
	}
}

// lookup returns the session id of scope, if visible to the process tool
// (backgrounded, or attached to a streamed exec).
func (m *Manager) lookup(id, scope string) *session {
	m.mu.Lock()
	s := m.sessions[id]
	m.mu.Unlock()
	if s == nil || s.scope != scope {
		return nil
	}
	s.mu.Lock()
	visible := s.visible || s.attached
	s.mu.Unlock()
	if !visible {
		return nil
	}
	return s
}

// forgetTimeout bounds one host call that drops a forgotten session.
const forgetTimeout = 10 * time.Second

// releaseHostState tells the host to drop a session the Manager forgot, so
// a restarted daemon does not bring it back. It does not block the caller.
func (m *Manager) releaseHostState(s *session) {
	m.removeSpill(s)
	s.mu.Lock()
	forget := s.forget
	s.mu.Unlock()
	if forget == nil {
		return
	}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), forgetTimeout)
		defer cancel()
		if err := forget(ctx); err != nil {
			m.logf("sessions: %s: host did not forget the session: %v", s.id, err)
		}
	}()
}
