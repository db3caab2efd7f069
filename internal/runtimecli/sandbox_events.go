package runtimecli

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/sandboxctl/sandboxctl/api"
	"github.com/sandboxctl/sandboxctl/internal/audit"
	"github.com/sandboxctl/sandboxctl/internal/cli"
	"github.com/sandboxctl/sandboxctl/internal/eventjournal"
	"github.com/sandboxctl/sandboxctl/sandbox"
	"github.com/sandboxctl/sandboxctl/vocab"
)

// Events of the `sandbox` commands that act in the CLI's own process (the
// snapshot commands): the journal has one writer, the daemon, so the CLI
// spools each event under the state directory (eventjournal.Spool) and
// the daemon journals it, the moment it runs or when it next starts. The
// event is the one the daemon's API publishes for the same action
// (sandboxEvent).

// spoolInterval is how often a running daemon takes in spooled events.
const spoolInterval = time.Second

// eventsDir is the event journal's directory of state directory state.
func eventsDir(state string) string { return filepath.Join(state, "events") }

// cliEvents spools the sandbox events of one CLI command.
type cliEvents struct {
	c     *cli.CLI
	state string
}

func newCLIEvents(c *cli.CLI) (cliEvents, error) {
	cfg, err := c.LoadConfig()
	if err != nil {
		return cliEvents{}, err
	}
	state, err := c.StateDir(cfg)
	if err != nil {
		return cliEvents{}, err
	}
	return cliEvents{c: c, state: state}, nil
}

// snapshot spools the event of a snapshot action on in. The action is
// done: a failure to spool is a warning, not the command's error (a retry
// would do the action twice).
func (e cliEvents) snapshot(action string, in sandbox.Info, snapshot string) {
	ev := sandboxEvent(action, in, func(d *api.Details) { d.Snapshot = snapshot })
	if err := eventjournal.Spool(eventsDir(e.state), ev); err != nil {
		fmt.Fprintf(e.c.Err, "warning: sandbox %s %s: the event was not recorded: %v\n", in.Name, action, err)
	}
}

// snapshotOrigin is the sandbox a snapshot was taken of, as far as the
// snapshot knows it (the sandbox may be gone).
func snapshotOrigin(snap sandbox.SnapshotInfo) sandbox.Info {
	return sandbox.Info{Sandbox: api.Sandbox{ID: snap.OriginID, Name: snap.Origin, AgentID: snap.AgentID, SessionKey: snap.SessionKey,
		ScopeKey: snap.ScopeKey, Template: snap.Template}}
}

// drainSpooledEvents journals the events spooled by CLI commands, now and
// every spoolInterval until ctx ends, each published as the daemon's own
// and audited as done through the CLI by the spooling file's owner.
func drainSpooledEvents(ctx context.Context, state string, publish func(api.Event), rec audit.Recorder, logf func(string, ...any)) {
	take := func() {
		_, err := eventjournal.Drain(eventsDir(state), func(s eventjournal.Spooled) {
			publish(s.Event)
			if ev := s.Event; ev.Type == vocab.EventSandbox && rec != nil {
				actor := audit.Actor{Via: "cli"}
				if s.UID >= 0 {
					actor.UID = &s.UID
				}
				name := ""
				if ev.Details.Name != nil {
					name = *ev.Details.Name
				}
				_ = rec.Record(ctx, audit.Record{Kind: audit.KindSandbox, Actor: actor, AgentID: ev.AgentID, SessionKey: ev.SessionKey,
					Host: "sandbox", Sandbox: &audit.Sandbox{Action: ev.Details.Action, ID: ev.Details.ID, Name: name}})
			}
		})
		if err != nil {
			logf("warning: %v", err)
		}
	}
	take()
	t := time.NewTicker(spoolInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			take()
		}
	}
}
