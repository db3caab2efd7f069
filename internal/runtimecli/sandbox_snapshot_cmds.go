package runtimecli

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/docker/go-units"
	"github.com/spf13/cobra"

	"github.com/sandboxctl/sandboxctl/internal/cli"
	"github.com/sandboxctl/sandboxctl/sandbox"
)

// The snapshot commands (docs/snapshots.md) act on the Engine and the
// state directory directly, as the other `sandbox` commands do; each
// action's event is spooled for the daemon to journal (sandbox_events.go).

func snapshotCommands(c *cli.CLI) []*cobra.Command {
	return []*cobra.Command{
		newSandboxSnapshotCommand(c),
		newSandboxSnapshotsCommand(c),
		newSandboxRollbackCommand(c),
		newSandboxForkCommand(c),
	}
}

// withSandboxManager runs do with a Manager for the state directory and
// the command's event spool.
func withSandboxManager(ctx context.Context, c *cli.CLI, do func(*sandbox.Manager, cliEvents) error) error {
	ev, err := newCLIEvents(c)
	if err != nil {
		return err
	}
	m, err := newSandboxManager(ctx, c)
	if err != nil {
		return err
	}
	defer m.Close()
	return do(m, ev)
}

func newSandboxSnapshotCommand(c *cli.CLI) *cobra.Command {
	var name, session string
	cmd := &cobra.Command{
		Use:   "snapshot AGENT [--session KEY] [--name NAME]",
		Short: "Copy the files of an agent's sandbox (workspace and tmpfs contents) into a snapshot",
		Args:  cli.ExactArgs(1, "AGENT"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withSandboxManager(cmd.Context(), c, func(m *sandbox.Manager, ev cliEvents) error {
				snap, err := m.Snapshot(cmd.Context(), sandbox.Scope{AgentID: args[0], SessionKey: session}, name)
				if err != nil {
					return fmt.Errorf("sandbox snapshot: %w", err)
				}
				ev.snapshot("snapshotted", snapshotOrigin(snap), snap.Name)
				if c.JSON {
					return cli.WriteJSON(c.Out, snap)
				}
				_, err = fmt.Fprintf(c.Out, "%s: %s in %d files (%s)\n", snap.Name, units.BytesSize(float64(snap.Bytes)), snap.Files, snap.Method)
				return err
			})
		},
	}
	cmd.Flags().StringVar(&name, "name", "", "the snapshot's name (default snap-<time>)")
	cmd.Flags().StringVar(&session, "session", "", "session key (scope session)")
	return cmd
}

func newSandboxSnapshotsCommand(c *cli.CLI) *cobra.Command {
	var session, rm string
	var olderThan time.Duration
	keep := -1
	cmd := &cobra.Command{
		Use:   "snapshots AGENT [NAME] [--rm NAME] [--prune-older DURATION] [--keep N]",
		Short: "List, describe, remove or prune the snapshots of an agent's sandbox",
		Args:  cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			s := sandbox.Scope{AgentID: args[0], SessionKey: session}
			return withSandboxManager(cmd.Context(), c, func(m *sandbox.Manager, ev cliEvents) error {
				switch {
				case len(args) == 2:
					snap, err := m.SnapshotOf(s, args[1])
					if err != nil {
						return fmt.Errorf("sandbox snapshots: %w", err)
					}
					return cli.WriteJSON(c.Out, snap)
				case rm != "":
					snap, err := m.RemoveSnapshot(s, rm)
					if err != nil {
						return fmt.Errorf("sandbox snapshots --rm: %w", err)
					}
					ev.snapshot("snapshot-removed", snapshotOrigin(snap), snap.Name)
					_, err = fmt.Fprintf(c.Out, "removed %s\n", rm)
					return err
				case olderThan > 0 || keep >= 0:
					gone, err := m.PruneSnapshots(s, olderThan, keep)
					for _, g := range gone {
						ev.snapshot("snapshot-removed", snapshotOrigin(g), g.Name)
						fmt.Fprintf(c.Out, "removed %s\n", g.Name)
					}
					if err != nil {
						return fmt.Errorf("sandbox snapshots: prune: %w", err)
					}
					return nil
				}
				list, err := m.Snapshots(s)
				if err != nil {
					return fmt.Errorf("sandbox snapshots: %w", err)
				}
				if c.JSON {
					if list == nil {
						list = []sandbox.SnapshotInfo{}
					}
					return cli.WriteJSON(c.Out, list)
				}
				tw := tabwriter.NewWriter(c.Out, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "NAME\tCREATED\tSIZE\tFILES\tMETHOD\tTEMPLATE\tORIGIN")
				now := time.Now()
				for _, sn := range list {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", sn.Name, ago(now, sn.CreatedAt), units.BytesSize(float64(sn.Bytes)), sn.Files, sn.Method, sn.Template, sn.Origin)
				}
				return tw.Flush()
			})
		},
	}
	cmd.Flags().StringVar(&session, "session", "", "session key (scope session)")
	cmd.Flags().StringVar(&rm, "rm", "", "remove this snapshot")
	cmd.Flags().DurationVar(&olderThan, "prune-older", 0, "remove the snapshots older than this (e.g. 24h)")
	cmd.Flags().IntVar(&keep, "keep", -1, "remove all but the newest N snapshots")
	return cmd
}

func newSandboxRollbackCommand(c *cli.CLI) *cobra.Command {
	var session string
	cmd := &cobra.Command{
		Use:   "rollback AGENT NAME [--session KEY]",
		Short: "Put an agent's sandbox back to a snapshot (its container is made anew: running commands end)",
		Args:  cli.ExactArgs(2, "AGENT", "NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ev, err := newCLIEvents(c)
			if err != nil {
				return err
			}
			return runSandboxChange(cmd.Context(), c, "rollback", func(ctx context.Context, m *sandbox.Manager) (sandbox.Info, error) {
				out, err := m.Rollback(ctx, sandbox.Scope{AgentID: args[0], SessionKey: session}, args[1])
				if err == nil {
					ev.snapshot("rolled-back", out, args[1])
				}
				return out, err
			})
		},
	}
	cmd.Flags().StringVar(&session, "session", "", "session key (scope session)")
	return cmd
}

func newSandboxForkCommand(c *cli.CLI) *cobra.Command {
	var session, newSession, snapshot string
	cmd := &cobra.Command{
		Use:   "fork AGENT NEW-AGENT [--snapshot NAME] [--session KEY] [--new-session KEY]",
		Short: "Start a sandbox for NEW-AGENT from a snapshot of AGENT's (default: a snapshot of it now)",
		Args:  cli.ExactArgs(2, "AGENT", "NEW-AGENT"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ev, err := newCLIEvents(c)
			if err != nil {
				return err
			}
			return runSandboxChange(cmd.Context(), c, "fork", func(ctx context.Context, m *sandbox.Manager) (sandbox.Info, error) {
				out, err := m.Fork(ctx, sandbox.Scope{AgentID: args[0], SessionKey: session}, snapshot, sandbox.Scope{AgentID: args[1], SessionKey: newSession})
				if err == nil {
					ev.snapshot("forked", out, snapshot)
				}
				return out, err
			})
		},
	}
	cmd.Flags().StringVar(&snapshot, "snapshot", "", "the snapshot of AGENT to start from (default: one taken now, removed after)")
	cmd.Flags().StringVar(&session, "session", "", "AGENT's session key (scope session)")
	cmd.Flags().StringVar(&newSession, "new-session", "", "the new sandbox's session key (scope session)")
	return cmd
}
