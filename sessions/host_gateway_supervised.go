package sessions

import (
	"context"
	"fmt"
	"time"

	"github.com/sandboxctl/sandboxctl/hostexec"
	"github.com/sandboxctl/sandboxctl/hostexec/hostsup"
	"github.com/sandboxctl/sandboxctl/sandbox/supervisor"
)

// supervisedGatewayHost runs the gateway's commands in the host supervisor
// (package hostsup), so they outlive a crash of the daemon and the next
// daemon re-adopts them (Recover).
type supervisedGatewayHost struct {
	gatewayHost
	sup *hostsup.Supervisor
}

// NewSupervisedGatewayHost returns the gateway Host whose commands, prepared
// by r, run in the host supervisor sup.
func NewSupervisedGatewayHost(r *hostexec.Runner, defaultCwd string, sup *hostsup.Supervisor) Host {
	g := NewGatewayHost(r, defaultCwd).(*gatewayHost)
	return &supervisedGatewayHost{gatewayHost: *g, sup: sup}
}

// Start runs spec in the host supervisor under a fresh run tag, which is
// also the supervisor's session id.
func (g *supervisedGatewayHost) Start(ctx context.Context, spec StartSpec) (Started, error) {
	spec.Tag = "" // a fresh one
	pr, err := g.r.Prepare(spec)
	if err != nil {
		return Started{}, fmt.Errorf("gateway: %w", err)
	}
	p, err := g.sup.Open(ctx, supervisor.OpenSpec{
		ID: pr.Tag, Argv: pr.Argv, Env: pr.Env, Dir: pr.Dir,
		PTY: spec.PTY, Cols: pr.Cols, Rows: pr.Rows, KeepStdin: spec.KeepStdin || spec.PTY,
		Meta: map[string]string{
			supervisor.MetaSessionID: spec.SessionID, supervisor.MetaCommand: spec.Command, supervisor.MetaCwd: spec.Dir,
			supervisor.MetaAgentID: spec.AgentID, supervisor.MetaSessionKey: spec.SessionKey,
		},
	})
	if err != nil {
		return Started{}, fmt.Errorf("gateway: host supervisor: %w", err)
	}
	st := g.started(p)
	if pr.Warning != "" {
		st.Warnings = []string{pr.Warning} // what the start could not honour
	}
	return st, nil
}

// Caps implements Host: the supervisor sees, from the kernel, when a
// command blocks reading its stdin, and keeps sessions across the daemon's
// restart.
func (g *supervisedGatewayHost) Caps() HostCaps {
	return HostCaps{InputWait: true, Recover: g.recover}
}

// recover is HostCaps.Recover: the sessions the host supervisor kept
// across the daemon's restart, and those of a supervisor that died, as
// lost.
func (g *supervisedGatewayHost) recover(ctx context.Context) ([]RecoveredSession, error) {
	found, lost, err := g.sup.Sessions(ctx)
	out := make([]RecoveredSession, 0, len(found)+len(lost))
	for _, l := range lost {
		in := l.Info
		r := RecoveredSession{
			ID: in.Meta[supervisor.MetaSessionID], Command: in.Meta[supervisor.MetaCommand], Dir: in.Meta[supervisor.MetaCwd],
			AgentID: in.Meta[supervisor.MetaAgentID], SessionKey: in.Meta[supervisor.MetaSessionKey], PTY: in.PTY,
			PID: in.PID, StartedAt: time.UnixMilli(in.StartedAt),
			Finished: true, Lost: l.Reason,
		}
		if l.NoRecord {
			// Its daemon session id and agent went with the record: it
			// comes back under its tag, in the default scope, so that it
			// is reported rather than gone.
			r.ID, r.Command, r.StartedAt = in.ID, "(unknown: its record was lost)", time.Time{}
		}
		if l.Exit != nil {
			// Its end is known; only its output is gone, and the log says so.
			r.Lost, r.ExitCode, r.Signal, r.EndedAt = "", l.Exit.Code, l.Exit.Signal, time.UnixMilli(l.Exit.EndedAt)
			r.Output = []byte("[sandboxctl: " + l.Reason + "]\n")
		}
		out = append(out, r)
	}
	for _, f := range found {
		in := f.Info
		r := RecoveredSession{
			ID: in.Meta[supervisor.MetaSessionID], Command: in.Meta[supervisor.MetaCommand], Dir: in.Meta[supervisor.MetaCwd],
			AgentID: in.Meta[supervisor.MetaAgentID], SessionKey: in.Meta[supervisor.MetaSessionKey], PTY: in.PTY,
			StdinOpen: in.KeepStdin && in.Running, PID: in.PID, StartedAt: time.UnixMilli(in.StartedAt),
			Output: f.Output, Covered: f.StdoutOffset + f.StderrOffset,
			// A finished one's handle serves Forget: without it the
			// session would come back after every restart.
			Started: g.started(f.Proc), Skipped: f.Proc.Skipped,
		}
		if !in.Running && in.Exit != nil {
			r.Finished, r.ExitCode, r.Signal, r.EndedAt = true, in.Exit.Code, in.Exit.Signal, time.UnixMilli(in.Exit.EndedAt)
		}
		out = append(out, r)
	}
	if err != nil {
		return out, fmt.Errorf("gateway: %w", err)
	}
	return out, nil
}

// started is a command in the host supervisor: it reports input waits, and
// Forget drops the finished session from the host supervisor, which would
// otherwise offer it to a restarted daemon.
func (g *supervisedGatewayHost) started(p *supervisor.Proc) Started {
	return Started{Process: p, InputWait: p, Signal: p.Signal, Forget: func(ctx context.Context) error { return g.sup.Forget(ctx, p.ID()) }}
}
