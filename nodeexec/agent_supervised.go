package nodeexec

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"time"

	"github.com/sandboxctl/sandboxctl/sandbox/supervisor"
	"github.com/sandboxctl/sandboxctl/sessions/hostapi"
)

// SupervisorDir is the host supervisor's state directory under a node's
// state directory (AgentOptions.Supervisor serves it).
func SupervisorDir(stateDir string) string { return filepath.Join(stateDir, "sup") }

// Keys of what the node keeps with a run in the host supervisor (its
// session's meta), so that the next agent can report it and its gateway
// adopt it.
const (
	metaRunID    = "runId"
	metaKey      = "idempotencyKey"
	metaOwner    = "owner"
	metaDeadline = "deadlineMs"
)

// maxKept is the most kept output a kept frame carries (base64 makes it
// 4/3 as large, under MaxFrameBytes); older output is reported dropped.
const maxKept = 512 << 10

// openSupervised starts spec in the host supervisor, its run tag as the
// session id.
func (a *agent) openSupervised(ctx context.Context, spec hostapi.StartSpec, key string, st RunState, deadline time.Time) (runProc, error) {
	pr, err := a.runner.Prepare(spec)
	if err != nil {
		return nil, err
	}
	meta := map[string]string{
		metaRunID: st.RunID, metaKey: key, metaOwner: st.Owner, supervisor.MetaSessionID: st.SessionID,
		supervisor.MetaAgentID: st.AgentID, supervisor.MetaSessionKey: st.SessionKey, supervisor.MetaCommand: st.Command, supervisor.MetaCwd: st.Dir,
	}
	if !deadline.IsZero() {
		meta[metaDeadline] = strconv.FormatInt(deadline.UnixMilli(), 10)
	}
	p, err := a.sup.Open(ctx, supervisor.OpenSpec{
		ID: pr.Tag, Argv: pr.Argv, Env: pr.Env, Dir: pr.Dir,
		PTY: spec.PTY, Cols: pr.Cols, Rows: pr.Rows, KeepStdin: spec.KeepStdin || spec.PTY, Meta: meta,
	})
	if err != nil {
		return nil, fmt.Errorf("host supervisor: %w", err)
	}
	return p, nil
}

// runStateOf is what the node reports of a supervisor session.
func runStateOf(in supervisor.SessionInfo) RunState {
	return RunState{
		RunID: in.Meta[metaRunID], PID: in.PID, Running: in.Running, Command: in.Meta[supervisor.MetaCommand],
		Owner: in.Meta[metaOwner], SessionID: in.Meta[supervisor.MetaSessionID], AgentID: in.Meta[supervisor.MetaAgentID],
		SessionKey: in.Meta[supervisor.MetaSessionKey], Dir: in.Meta[supervisor.MetaCwd], PTY: in.PTY, KeepStdin: in.KeepStdin || in.PTY,
		StartedAtMs: in.StartedAt,
	}
}

// loadHeld takes over what the host supervisor kept from a previous agent:
// each session becomes a held run (reported in hello, resumed or ended once
// a gateway answered). Sessions of a supervisor that died with the agent
// were ended by the sweep; they become lost runs whose exit says why.
func (a *agent) loadHeld(ctx context.Context) {
	infos, lost, err := a.sup.List(ctx)
	if err != nil {
		a.logf("nodeexec: the host supervisor's runs: %v", err)
	}
	for _, in := range infos {
		st := runStateOf(in)
		if validID("runId", st.RunID) != nil {
			a.logf("nodeexec: host supervisor session %s is no run of this node; ending it", in.ID)
			held := in
			r := newNodeRun(a, "", "", in.ID, st)
			r.held = &held
			a.end(r)
			continue
		}
		held := in
		r := newNodeRun(a, st.RunID, in.Meta[metaKey], in.ID, st)
		r.held = &held
		if ms, err := strconv.ParseInt(in.Meta[metaDeadline], 10, 64); err == nil && in.Running {
			r.armTimeout(time.UnixMilli(ms), 0)
		}
		a.hold(r)
		a.logf("nodeexec: run %s (%q) of a previous agent is kept by the host supervisor", r.id, st.Command)
	}
	for _, l := range lost {
		st := runStateOf(l.Info)
		if validID("runId", st.RunID) != nil {
			continue
		}
		st.Running = false
		// No tag: the sweep removed its session from the supervisor.
		r := newNodeRun(a, st.RunID, l.Info.Meta[metaKey], "", st)
		r.exit = &exitInfo{Code: -1, Error: l.Reason}
		if l.Exit != nil {
			r.exit = &exitInfo{Code: l.Exit.Code, Signal: l.Exit.Signal}
		}
		a.hold(r)
		a.logf("nodeexec: run %s was lost: %s", r.id, l.Reason)
	}
}

// hold registers a run taken over from a previous agent; a retried
// system.run with its idempotency key re-attaches to it.
func (a *agent) hold(r *nodeRun) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.runs[r.id] = r
	if r.key != "" && validID("idempotencyKey", r.key) == nil {
		e := &idemEntry{runID: r.id, at: time.Now(), ready: make(chan struct{}),
			answer: &frame{Type: frameStarted, RunID: r.id, Started: &startedInfo{PID: r.state.PID, PTY: r.state.PTY, Cwd: r.state.Dir}}}
		close(e.ready)
		a.idem[r.key] = e
	}
}

// resume hands run r to link l from where the gateway's output of it ends
// (rs). A run the gateway adopts (it restarted) first gets its kept output
// sent, then what follows it. A held run is attached in the supervisor
// from there; a lost one reports its end.
func (a *agent) resume(l *agentLink, r *nodeRun, rs Resume) {
	ctx, cancel := context.WithTimeout(a.ctx, 30*time.Second)
	defer cancel()
	from := [2]int64{rs.Stdout, rs.Stderr}
	r.mu.Lock()
	defer r.mu.Unlock()
	if rs.Adopt {
		kept := &frame{Type: frameKept, RunID: r.id, Kept: &keptInfo{}}
		if r.proc != nil || r.held != nil {
			data, so, se, err := a.sup.Read(ctx, r.tag)
			if err != nil {
				a.logf("nodeexec: run %s: read its kept output: %v", r.id, err)
			} else {
				if n := len(data) - maxKept; n > 0 {
					data, kept.Kept.Dropped = data[n:], int64(n)
				}
				if r.held != nil {
					kept.Kept.Dropped += r.held.Dropped
				}
				kept.Data, kept.Kept.Stdout, kept.Kept.Stderr = data, so, se
				from = [2]int64{so, se}
			}
		}
		if err := l.send(kept); err != nil {
			return // the link is gone; the next one resumes the run
		}
	}
	switch {
	case r.held != nil:
		p, err := a.sup.Attach(ctx, *r.held, from[0], from[1])
		if err != nil {
			a.logf("nodeexec: run %s: attach in the host supervisor: %v", r.id, err)
			r.exit = &exitInfo{Code: -1, Error: "the node could not follow it in its host supervisor: " + err.Error()}
			_ = l.send(&frame{Type: frameExit, RunID: r.id, Exit: r.exit})
			return
		}
		r.proc, r.held, r.pos, r.link = p, nil, from, l
		r.cond.Broadcast()
		go r.begin()
	case r.proc == nil:
		// Lost with its supervisor: its end is all there is.
		if r.exit != nil && l.send(&frame{Type: frameExit, RunID: r.id, Exit: r.exit}) == nil {
			go a.delivered(r)
		}
	default:
		// What went out on the lost link but never arrived is sent again
		// (what the gateway has beyond it, from a kept frame, it drops).
		if !rs.Adopt && !r.resendLocked(l, from) {
			return
		}
		r.link = l
		r.cond.Broadcast()
	}
}
