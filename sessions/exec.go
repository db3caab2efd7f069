package sessions

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/sandboxctl/sandboxctl/api"

	"github.com/sandboxctl/sandboxctl/envguard"
	"github.com/sandboxctl/sandboxctl/internal/audit"
	"github.com/sandboxctl/sandboxctl/internal/termsize"
	"github.com/sandboxctl/sandboxctl/sessions/toolapi"
	"github.com/sandboxctl/sandboxctl/vocab"
)

// execPlan is a validated exec request.
type execPlan struct {
	p               api.ExecParams
	command         string
	host            vocab.Host
	security        vocab.Security
	ask             vocab.Ask
	window          time.Duration // yield window; 0 = background at once
	background      bool          // background:true
	explicitYield   bool
	timeout         time.Duration // foreground timeout; 0 = none
	explicitTimeout bool
	keepStdin       bool
	denied          string      // set when the request is refused before anything runs
	reqID           string      // ties the request's audit records together
	actor           audit.Actor // who asked (audit.ActorFrom)
	// started, when set, is called with a Follower once the session exists
	// (ExecStream).
	started func(toolapi.Follower)
}

// Exec runs the exec tool (docs/tools.md).
//
// Steps, in order: validate → background/yield → elevated → host →
// security/ask → env → workdir → guard → start → wait up to the yield
// window. env comes before workdir because the env check is pure while
// resolving a sandbox workdir may create the container.
//
// Bad input returns an error matching ErrInvalidInput (an *InputError naming
// the field); nothing has started then. Refusals by security mode, allowlist
// or a missing approver are a Result with details.status "denied". Without
// a Guard the Manager fails closed: security deny is denied everywhere; on
// the sandbox allowlist and full run; on gateway/node only full runs and
// allowlist is denied ("allowlist not available: the command guard is not
// configured"); ask=always is denied everywhere ("approval required but no
// approver is configured").
//
// Stdin: a foreground non-PTY run gets EOF on stdin at once, so `cat` with
// no input finishes instead of hanging through the yield window. Runs with
// background:true, an explicit yieldMs, or pty:true keep stdin open for
// process write/send-keys.
//
// Lifetime: the session runs on the Manager's lifetime, not ctx. ctx only
// bounds the wait for the yield window: if it ends first (the client went
// away), the run continues as a background session and Exec returns its
// "running" result with a warning; the exit event reports the end.
//
// Timeouts: timeout (seconds) defaults to the configured timeoutSec for the
// foreground part. A run that is backgrounded (background:true, or its yield
// window expired) and gave no explicit timeout has none from then on, unless
// exec.backgroundTimeoutSec is configured (measured from the start). On
// expiry the whole tree is killed and the session fails with signal SIGKILL
// and reason "timeout after Ns".
func (m *Manager) Exec(ctx context.Context, p api.ExecParams) (api.Result, error) {
	return m.observedExec(ctx, p, nil)
}

// observedExec is exec, reported to the Observer as it answers.
func (m *Manager) observedExec(ctx context.Context, p api.ExecParams, started func(toolapi.Follower)) (api.Result, error) {
	begun := time.Now()
	res, err := m.exec(ctx, p, started)
	if m.obs != nil {
		m.obs.ExecAnswered(res, err, time.Since(begun))
	}
	return res, err
}

// exec is Exec, calling started (when not nil) once the session exists.
func (m *Manager) exec(ctx context.Context, p api.ExecParams, started func(toolapi.Follower)) (api.Result, error) {
	if m.isClosed() {
		return api.Result{}, ErrClosed
	}
	// Recorded before anything else: under audit.onFailure refuse a
	// request that cannot be recorded does not run.
	reqID := newRequestID()
	if err := m.record(ctx, execRecord(audit.KindExecRequest, reqID, p)); err != nil {
		return api.Result{}, fmt.Errorf("exec: %w", err)
	}
	plan, err := m.plan(p)
	if err != nil {
		m.refused(ctx, reqID, p, "", err)
		return api.Result{}, err
	}
	plan.started = started
	plan.reqID, plan.actor = reqID, audit.ActorFrom(ctx)
	if plan.denied != "" {
		m.refused(ctx, reqID, p, plan.host, errors.New(plan.denied))
		return deniedResult(plan.denied, nil), nil
	}
	// Before anything is made for it (a sandbox, an approval request).
	if err := m.checkRunning(p.AgentID); err != nil {
		m.refused(ctx, reqID, p, plan.host, err)
		return api.Result{}, err
	}
	host, spec, warnings, err := m.prepare(ctx, plan)
	if err != nil {
		m.refused(ctx, reqID, p, plan.host, err)
		return api.Result{}, err
	}
	if m.needsGuard(plan) {
		v, err := m.guard.Check(ctx, GuardRequest{
			Command: spec.Command, Cwd: spec.Dir, Host: plan.host, Env: p.Env,
			Security: plan.security, Ask: plan.ask,
			AgentID: p.AgentID, SessionKey: p.SessionKey, Node: p.Node, PTY: p.PTY,
		})
		if err != nil {
			m.refused(ctx, reqID, p, plan.host, fmt.Errorf("guard: %w", err))
			return api.Result{}, fmt.Errorf("exec: guard: %w", err)
		}
		_ = m.record(ctx, guardRecord(reqID, plan, v))
		switch v.Decision {
		case vocab.DecisionRun:
			if v.Command != "" {
				spec.Command = v.Command
			}
			spec.Confine = v.Confine
		case vocab.DecisionDeny:
			reason := v.Reason
			if reason == "" {
				reason = "denied by the command guard"
			}
			return deniedResult(reason, warnings), nil
		case vocab.DecisionApprovalPending:
			_ = m.record(ctx, approvalRecord(reqID, plan, v.Approval, spec.Command))
			m.Publish(api.Event{Type: vocab.EventApproval, AgentID: p.AgentID, SessionKey: p.SessionKey, Details: v.Approval,
				Text: fmt.Sprintf("Approval requested (%v) :: %s", v.Approval.ApprovalSlug, spec.Command)})
			if v.Pending != nil {
				return m.startAfterApproval(v, plan, host, spec, warnings)
			}
			return approvalResult(v.Approval, plan, spec.Command, spec.Dir, warnings), nil
		default:
			return api.Result{}, fmt.Errorf("exec: guard returned unknown decision %q", v.Decision)
		}
	}
	return m.start(ctx, plan, host, spec, warnings)
}

// prepare picks the host, checks the env and resolves the working
// directory: the start spec of plan, with the warnings so far.
func (m *Manager) prepare(ctx context.Context, plan execPlan) (Host, StartSpec, []string, error) {
	p := plan.p
	host := m.hosts[plan.host]
	if host == nil {
		return nil, StartSpec{}, nil, fmt.Errorf("exec: host %q is not configured on this daemon: %w", plan.host, ErrHostUnavailable)
	}
	// env is checked before the workdir although docs/tools.md lists it after:
	// the check is pure, and resolving a sandbox workdir may create the
	// container — bad input must change nothing (docs/tools.md, "Bad input").
	if err := envguard.CheckRequest(plan.host, p.Env); err != nil {
		return nil, StartSpec{}, nil, &toolapi.InputError{Field: "env", Msg: "env: " + err.Error(), Err: err}
	}
	var warnings []string
	dir, warn, err := host.ResolveWorkdir(ctx, p.AgentID, p.SessionKey, p.Workdir)
	if err != nil {
		return nil, StartSpec{}, nil, fmt.Errorf("exec: workdir: %w", err)
	}
	// A requested workdir that cannot be used is an error on every front
	// door (the API, MCP, the CLI): running `rm -rf *` in a fallback
	// directory is worse than not running it. Only a default directory's
	// trouble stays a warning.
	if warn != "" && (p.Workdir != "" || p.StrictWorkdir) {
		reason, _, _ := strings.Cut(warn, "; using ")
		return nil, StartSpec{}, nil, inputErr("workdir", "%s", reason)
	}
	if warn != "" {
		warnings = append(warnings, warn)
	}
	spec := StartSpec{
		Command: plan.command, Env: p.Env, Dir: dir,
		PTY: p.PTY, Cols: sizeOr(p.Cols, termsize.DefaultCols), Rows: sizeOr(p.Rows, termsize.DefaultRows),
		KeepStdin: plan.keepStdin,
		AgentID:   p.AgentID, SessionKey: p.SessionKey,
		Node: p.Node, Security: plan.security, Ask: plan.ask,
	}
	return host, spec, warnings, nil
}

// start starts spec on host as a new session and waits for it up to the
// yield window.
func (m *Manager) start(ctx context.Context, plan execPlan, host Host, spec StartSpec, warnings []string) (api.Result, error) {
	p := plan.p
	id, err := m.reserveID(p.AgentID)
	if err != nil {
		return api.Result{}, err
	}
	// A foreground run on a host that detects input waits keeps stdin open
	// and returns early if the command blocks on it (see HostCaps.InputWait).
	watchInput := !plan.keepStdin && host.Caps().InputWait
	started := spec
	started.SessionID = id
	started.KeepStdin = spec.KeepStdin || watchInput
	started.StartWait = m.startWait(plan)
	st, err := host.Start(m.ctx, started)
	if err != nil {
		m.releaseID(id)
		// A node re-checks its own policy: its refusal or pending approval
		// is a result, not a failure.
		if reason, pe, ok := nodeRefusal(err); ok {
			if pe == nil {
				_ = m.record(ctx, guardRecord(plan.reqID, plan, GuardVerdict{Decision: vocab.DecisionDeny, Reason: "node: " + reason}))
				return deniedResult(reason, warnings), nil
			}
			approval := pe.Details()
			_ = m.record(ctx, approvalRecord(plan.reqID, plan, approval, spec.Command))
			m.Publish(api.Event{Type: vocab.EventApproval, AgentID: p.AgentID, SessionKey: p.SessionKey, Details: approval,
				Text: fmt.Sprintf("Approval requested on node %s (%v) :: %s", p.Node, approval.ApprovalSlug, spec.Command)})
			if await := host.Caps().AwaitApproval; await != nil {
				// As on the gateway: the request is a session now, and its
				// command starts once a human decided on the node.
				pending := &PendingApproval{Await: func(ctx context.Context) (GuardVerdict, error) { return await(ctx, pe) }}
				return m.startAfterApproval(GuardVerdict{Decision: vocab.DecisionApprovalPending, Approval: approval, Pending: pending}, plan, host, spec, warnings)
			}
			return approvalResult(approval, plan, spec.Command, spec.Dir, warnings), nil
		}
		m.refused(ctx, plan.reqID, p, plan.host, err)
		if errors.As(err, new(interface{ InvalidParameter() })) {
			// The host looked at the command and could not start it (its
			// workdir, its program, its environment): the caller's input.
			return api.Result{}, &toolapi.InputError{Field: "start", Msg: fmt.Sprintf("exec: start on %s host: %v", plan.host, err), Err: err}
		}
		return api.Result{}, fmt.Errorf("exec: start on %s host: %w", plan.host, err)
	}
	warnings = append(warnings, st.Warnings...)
	iw := st.InputWait
	if watchInput && iw == nil {
		// The host fell back to a path that cannot tell: EOF at once.
		_ = st.CloseStdin()
		watchInput = false
	}
	s := m.newSession(p, plan.host, spec.Dir, p.Command, st, plan.keepStdin || watchInput)
	s.id = id
	s.reqID, s.actor, s.node = plan.reqID, plan.actor, m.nodeOf(plan)
	s.visible = plan.background
	s.attached = plan.started != nil
	if err := m.register(s); err != nil {
		kctx, cancel := context.WithTimeout(context.Background(), killCallTimeout)
		_ = st.Kill(kctx)
		_, _, _ = st.Wait(kctx)
		cancel()
		return api.Result{}, err
	}
	s.mu.Lock()
	timeout := plan.timeout
	if plan.background && !plan.explicitTimeout {
		timeout = time.Duration(m.lim.BackgroundTimeoutSec) * time.Second
	}
	m.armTimeoutLocked(s, timeout)
	s.mu.Unlock()
	m.recordStart(ctx, s, spec.Command)
	m.run(s)
	if plan.started != nil {
		plan.started(newStartedFollower(m, s))
	}
	warnings = m.yield(ctx, s, plan.window, iw, warnings)
	return m.settle(s, plan, warnings), nil
}

// startWait is how long a start may wait for its host's confirmation: the
// yield window (the default one for a background run), or the timeout if
// that is shorter, so that exec answers within them when a host stalls.
func (m *Manager) startWait(plan execPlan) time.Duration {
	w := plan.window
	if w <= 0 {
		w = time.Duration(m.lim.YieldMs) * time.Millisecond
	}
	if plan.timeout > 0 && plan.timeout < w {
		w = plan.timeout
	}
	return max(w, minStartWait)
}

// minStartWait is the least startWait: a start under load takes a moment
// even with yieldMs 10.
const minStartWait = 2 * time.Second

// yield waits up to window for s to finish, for ctx to end (the run
// continues in the background, with a warning) or, when iw is set, for the
// command to block reading its stdin.
func (m *Manager) yield(ctx context.Context, s *session, window time.Duration, iw InputWaiter, warnings []string) []string {
	if window <= 0 {
		return warnings
	}
	t := time.NewTimer(window)
	defer t.Stop()
	var inputChanged <-chan struct{}
	if iw != nil {
		inputChanged = iw.InputWaitChanged()
	}
	for {
		select {
		case <-s.done:
		case <-t.C:
		case <-ctx.Done():
			warnings = append(warnings, "the request ended during the yield window; the command continues in the background")
		case <-inputChanged:
			if !iw.InputWait() {
				inputChanged = iw.InputWaitChanged() // the next change
				continue
			}
		}
		return warnings
	}
}

// settle turns the state of s after the yield window into the exec result:
// the final result if it finished (and it is forgotten unless backgrounded),
// otherwise it becomes a background session.
func (m *Manager) settle(s *session, plan execPlan, warnings []string) api.Result {
	s.mu.Lock()
	if s.finished && !s.visible {
		release := m.inflateLocked(s)
		r := finalResultLocked(s, m.now(), warnings)
		release()
		s.mu.Unlock()
		m.forget(s)
		return r
	}
	if !s.visible {
		s.visible = true
		if !plan.explicitTimeout {
			m.armTimeoutLocked(s, time.Duration(m.lim.BackgroundTimeoutSec)*time.Second)
		}
	}
	rec := m.awaitRecordLocked(s)
	release := m.inflateLocked(s)
	r := runningResultLocked(s, warnings)
	release()
	s.mu.Unlock()
	m.await(s, rec)
	return r
}

// needsGuard: the guard is consulted for gateway/node, and for the sandbox
// only when ask is always. Without a guard plan() already refused what needs
// one, so this is false then.
func (m *Manager) needsGuard(plan execPlan) bool {
	if m.guard == nil {
		return false
	}
	return plan.host != vocab.HostSandbox || plan.ask == vocab.AskAlways
}

// plan validates p and resolves yield, elevated, host, security and ask.
func (m *Manager) plan(p api.ExecParams) (execPlan, error) {
	pl := execPlan{p: p, command: p.Command}
	if strings.TrimSpace(p.Command) == "" {
		return pl, inputErr("command", "Provide a command to start.")
	}
	if strings.IndexByte(p.Command, 0) >= 0 {
		return pl, inputErr("command", "command contains a NUL byte")
	}
	host, err := parseParam("host", p.Host, vocab.ParseHost)
	if err != nil {
		return pl, err
	}
	security, err := parseParam("security", p.Security, vocab.ParseSecurity)
	if err != nil {
		return pl, err
	}
	ask, err := parseParam("ask", p.Ask, vocab.ParseAsk)
	if err != nil {
		return pl, err
	}
	if p.YieldMs != nil {
		if err := checkWhole("yieldMs", *p.YieldMs, api.MaxYieldMs, "ms (2 minutes)"); err != nil {
			return pl, err
		}
	}
	if p.Timeout != nil {
		if err := checkAtMost("timeout", *p.Timeout, MaxTimeoutSec, "seconds (7 days)"); err != nil {
			return pl, err
		}
	}

	// background / yield
	pl.background = p.Background
	pl.explicitYield = p.YieldMs != nil
	switch {
	case p.Background:
		pl.window = 0
	case p.YieldMs != nil:
		pl.window = time.Duration(clampFloat(*p.YieldMs, api.MinYieldMs, api.MaxYieldMs)) * time.Millisecond
	default:
		pl.window = time.Duration(m.lim.YieldMs) * time.Millisecond
	}
	pl.keepStdin = p.PTY || p.Background || p.YieldMs != nil
	// timeout: 0 (or absent) means the configured default.
	pl.timeout = time.Duration(m.lim.TimeoutSec) * time.Second
	if p.Timeout != nil && *p.Timeout > 0 {
		pl.explicitTimeout = true
		pl.timeout = secondsDuration(*p.Timeout)
	}

	// elevated
	cfgHost := m.cfg.Exec.Host
	lvl := vocab.ElevatedOff
	if p.Elevated {
		el := m.cfg.Elevated
		switch {
		case !el.Enabled:
			pl.denied = "elevated is not available: elevated.enabled is false in the configuration"
			return pl, nil
		case !slices.Contains(el.AllowFrom, p.AgentID) && !slices.Contains(el.AllowFrom, "*"):
			who := p.AgentID
			if who == "" {
				who = "(no agentId)"
			}
			pl.denied = fmt.Sprintf("elevated is not allowed for agent %s: it is not listed in elevated.allowFrom", who)
			return pl, nil
		}
		if host != "" && host != vocab.HostGateway {
			return pl, inputErr("host", "elevated runs always use the gateway host; host %q cannot be combined with elevated", host)
		}
		host = vocab.HostGateway
		lvl = el.DefaultLevel
	}

	// host
	if host == "" {
		host = cfgHost
	}
	if host != cfgHost && !p.Elevated {
		return pl, inputErr("host", "host %q is not allowed: the configured exec host is %q (only elevated runs may use another host)", host, cfgHost)
	}
	pl.host = host

	// security = min(config, request); ask = max(config, request);
	// elevated full ⇒ full/off.
	pl.security, pl.ask = vocab.EffectiveModes(m.cfg.Exec.Security, security, m.cfg.Exec.Ask, ask, lvl)

	// Refusals that need no workdir or env: fail closed without a guard.
	switch {
	case pl.security == vocab.SecurityDeny:
		pl.denied = "security mode is deny: no command may run"
	case m.guard != nil:
	case pl.ask == vocab.AskAlways:
		pl.denied = "approval required (ask=always) but no approver is configured"
	case host != vocab.HostSandbox && pl.security == vocab.SecurityAllowlist:
		pl.denied = "allowlist not available: the command guard is not configured"
	}
	return pl, nil
}

// parseParam parses the tool parameter field with its vocab parser: case
// and surrounding blanks do not matter, and "" means not given.
func parseParam[T ~string](field, v string, parse func(string) (T, error)) (T, error) {
	v = strings.ToLower(strings.TrimSpace(v))
	if v == "" {
		return "", nil
	}
	t, err := parse(v)
	if err != nil {
		return "", &toolapi.InputError{Field: field, Msg: err.Error(), Err: err}
	}
	return t, nil
}

// checkNumber checks that a number field is finite and not negative.
func checkNumber(field string, v float64) error {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return inputErr(field, "%s must be a finite number", field)
	case v < 0:
		return inputErr(field, "%s must not be negative (got %g)", field, v)
	}
	return nil
}

// secondsDuration is v seconds (finite, not negative: checkNumber), or the
// longest Duration when v is longer: converting a float beyond the int64
// range is implementation-defined in Go and gives a negative Duration on
// amd64.
func secondsDuration(v float64) time.Duration {
	if ns := v * float64(time.Second); ns < math.MaxInt64 {
		return time.Duration(ns)
	}
	return math.MaxInt64
}

// The largest timeout an exec accepts (api.MaxYieldMs: yieldMs); larger values are bad
// input (400), not clamped, so that a typo or an overflow never runs a
// command under a window or timeout nobody asked for.
const MaxTimeoutSec = 7 * 24 * 3600

// checkWhole checks a whole-number field of the exec tool: finite, whole,
// 0..limit (unit names limit in the message).
func checkWhole(field string, v float64, limit int, unit string) error {
	if err := checkAtMost(field, v, limit, unit); err != nil {
		return err
	}
	if v != math.Trunc(v) {
		return inputErr(field, "%s must be a whole number (got %g)", field, v)
	}
	return nil
}

// checkAtMost checks a number field of the exec tool: finite, 0..limit.
func checkAtMost(field string, v float64, limit int, unit string) error {
	if err := checkNumber(field, v); err != nil {
		return err
	}
	if v > float64(limit) {
		return inputErr(field, "%s must be at most %d %s (got %g)", field, limit, unit, v)
	}
	return nil
}

// sizeOr is a requested terminal dimension, or def when none was asked.
func sizeOr(v, def int) int {
	if v > 0 {
		return v
	}
	return def
}

func clampFloat(v, lo, hi float64) float64 { return math.Min(math.Max(v, lo), hi) }
