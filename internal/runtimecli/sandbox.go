package runtimecli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sandboxctl/sandboxctl/internal/cli"
	"github.com/sandboxctl/sandboxctl/sandbox"
)

// SandboxOptions select a sandbox by the caller's identity.
type SandboxOptions struct {
	AgentID    string
	SessionKey string
}

func (o SandboxOptions) scope() sandbox.Scope {
	return sandbox.Scope{AgentID: o.AgentID, SessionKey: o.SessionKey}
}

func addScopeFlags(cmd *cobra.Command, o *SandboxOptions) {
	cmd.Flags().StringVar(&o.AgentID, "agent", "", "agent id")
	cmd.Flags().StringVar(&o.SessionKey, "session", "", "session key")
}

func newSandboxCommand(c *cli.CLI) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sandbox",
		Short: cli.RuntimeShort("sandbox"),
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			return cli.UsageErrorf("sandbox: missing subcommand (ls|create|rm|prune|explain|shell)")
		},
	}
	cmd.AddCommand(
		&cobra.Command{
			Use:     "ls",
			Aliases: []string{"list"},
			Short:   "List the managed sandboxes",
			Args:    cli.ExactArgs(0),
			RunE: func(cmd *cobra.Command, _ []string) error {
				return RunSandboxList(cmd.Context(), c)
			},
		},
		newSandboxCreateCommand(c),
		newSandboxRemoveCommand(c),
		newSandboxPruneCommand(c),
		newSandboxExplainCommand(c),
		newSandboxShellCommand(c),
	)
	return cmd
}

func newSandboxCreateCommand(c *cli.CLI) *cobra.Command {
	var opts SandboxOptions
	cmd := &cobra.Command{
		Use:   "create [--agent ID] [--session KEY]",
		Short: "Create (or start, or reuse) the sandbox of a scope",
		Args:  cli.ExactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return RunSandboxCreate(cmd.Context(), c, opts)
		},
	}
	addScopeFlags(cmd, &opts)
	return cmd
}

// SandboxRemoveOptions are the arguments of `sandbox rm`.
type SandboxRemoveOptions struct {
	SandboxOptions
	Name string
}

func newSandboxRemoveCommand(c *cli.CLI) *cobra.Command {
	var opts SandboxRemoveOptions
	cmd := &cobra.Command{
		Use:     "rm NAME | rm --agent ID [--session KEY]",
		Aliases: []string{"remove"},
		Short:   "Remove a sandbox by name or by scope",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 1 {
				return cli.UsageErrorf("sandbox rm: unexpected argument %q", args[1])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				opts.Name = args[0]
			}
			return RunSandboxRemove(cmd.Context(), c, opts)
		},
	}
	addScopeFlags(cmd, &opts.SandboxOptions)
	return cmd
}

func newSandboxPruneCommand(c *cli.CLI) *cobra.Command {
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "prune [--dry-run]",
		Short: "Remove sandboxes idle longer than prune.idleHours or older than prune.maxAgeDays",
		Args:  cli.ExactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return RunSandboxPrune(cmd.Context(), c, dryRun)
		},
	}
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "only print what would be removed")
	return cmd
}

func newSandboxExplainCommand(c *cli.CLI) *cobra.Command {
	var opts SandboxOptions
	cmd := &cobra.Command{
		Use:   "explain [--agent ID] [--session KEY]",
		Short: "Print a scope's effective config, hash, container and whether it would be recreated",
		Args:  cli.ExactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return RunSandboxExplain(cmd.Context(), c, opts)
		},
	}
	addScopeFlags(cmd, &opts)
	return cmd
}

// newSandboxManager builds a sandbox.Manager from the config and state
// directory of this invocation.
func newSandboxManager(ctx context.Context, c *cli.CLI) (*sandbox.Manager, error) {
	cfg, err := c.LoadConfig()
	if err != nil {
		return nil, err
	}
	state, err := c.StateDir(cfg)
	if err != nil {
		return nil, err
	}
	if err := c.CheckDaemonConfig(state); err != nil {
		return nil, err
	}
	m, err := sandbox.NewManager(ctx, sandbox.Options{Config: cfg.Sandbox, StateDir: state})
	if err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	return m, nil
}

// RunSandboxList prints the managed sandboxes.
func RunSandboxList(ctx context.Context, c *cli.CLI) error {
	m, err := newSandboxManager(ctx, c)
	if err != nil {
		return err
	}
	defer m.Close()
	list, err := m.List(ctx)
	if err != nil {
		return err
	}
	sort.Slice(list, func(i, j int) bool { return list[i].Name < list[j].Name })
	if c.JSON {
		return cli.WriteJSON(c.Out, list)
	}
	return printSandboxes(c.Out, list, time.Now())
}

func printSandboxes(w io.Writer, list []sandbox.Info, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tENGINE\tSTATE\tSCOPE\tCREATED\tLAST USED\tCONFIG")
	for _, s := range list {
		cfgState := "current"
		if !s.Current {
			cfgState = "outdated"
		}
		scope := s.ScopeKey
		switch s.Pool {
		case sandbox.PoolReady:
			scope = "(warm pool)"
		case sandbox.PoolTaken:
			scope += " (from the pool)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.Name, s.Engine, s.State, scope, ago(now, s.CreatedAt), ago(now, s.LastUsedAt), cfgState)
	}
	return tw.Flush()
}

func ago(now, t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return now.Sub(t).Round(time.Second).String() + " ago"
}

// RunSandboxCreate ensures the sandbox of a scope exists and runs.
func RunSandboxCreate(ctx context.Context, c *cli.CLI, opts SandboxOptions) error {
	m, err := newSandboxManager(ctx, c)
	if err != nil {
		return err
	}
	defer m.Close()
	res, err := m.Ensure(ctx, opts.scope())
	if err != nil {
		return err
	}
	if c.JSON {
		return cli.WriteJSON(c.Out, res)
	}
	what := "reused"
	switch {
	case res.Created:
		what = "created"
	case res.Started:
		what = "started"
	}
	_, err = fmt.Fprintf(c.Out, "%s %s (%s)\n", what, res.Name, res.ScopeKey)
	return err
}

// RunSandboxRemove removes a sandbox by name, or the one of a scope.
func RunSandboxRemove(ctx context.Context, c *cli.CLI, opts SandboxRemoveOptions) error {
	byScope := opts.AgentID != "" || opts.SessionKey != ""
	switch {
	case opts.Name != "" && byScope:
		return cli.UsageErrorf("sandbox rm: give a NAME or --agent/--session, not both")
	case opts.Name == "" && !byScope:
		return cli.UsageErrorf("sandbox rm: missing NAME (or --agent ID / --session KEY)")
	}
	m, err := newSandboxManager(ctx, c)
	if err != nil {
		return err
	}
	defer m.Close()
	name := opts.Name
	if byScope {
		err = m.Remove(ctx, opts.scope())
		name = "sandbox of " + sandbox.ScopeKey(m.Config().Scope, opts.scope())
	} else {
		err = m.RemoveByName(ctx, opts.Name)
	}
	if err != nil {
		return err
	}
	if c.JSON {
		return cli.WriteJSON(c.Out, map[string]any{"removed": name})
	}
	_, err = fmt.Fprintf(c.Out, "removed %s\n", name)
	return err
}

// RunSandboxPrune removes (or with dryRun lists) idle and old sandboxes.
func RunSandboxPrune(ctx context.Context, c *cli.CLI, dryRun bool) error {
	m, err := newSandboxManager(ctx, c)
	if err != nil {
		return err
	}
	defer m.Close()
	pruned, err := m.Prune(ctx, dryRun)
	if c.JSON {
		if jerr := cli.WriteJSON(c.Out, map[string]any{"dryRun": dryRun, "pruned": orEmpty(pruned)}); jerr != nil && err == nil {
			err = jerr
		}
		return err
	}
	verb := "removed"
	if dryRun {
		verb = "would remove"
	}
	for _, s := range pruned {
		fmt.Fprintf(c.Out, "%s %s (%s)\n", verb, s.Name, s.ScopeKey)
	}
	if err == nil && len(pruned) == 0 {
		fmt.Fprintln(c.Out, "nothing to prune")
	}
	return err
}

func orEmpty(l []sandbox.Info) []sandbox.Info {
	if l == nil {
		return []sandbox.Info{}
	}
	return l
}

// RunSandboxExplain prints why a scope's sandbox looks the way it does.
func RunSandboxExplain(ctx context.Context, c *cli.CLI, opts SandboxOptions) error {
	m, err := newSandboxManager(ctx, c)
	if err != nil {
		return err
	}
	defer m.Close()
	ex, err := m.Explain(ctx, opts.scope())
	if err != nil {
		return err
	}
	if c.JSON {
		return cli.WriteJSON(c.Out, ex)
	}
	_, err = io.WriteString(c.Out, formatExplanation(ex))
	return err
}

func formatExplanation(ex sandbox.Explanation) string {
	var b strings.Builder
	fmt.Fprintf(&b, "scope:        %s\n", ex.ScopeKey)
	fmt.Fprintf(&b, "name:         %s\n", ex.Name)
	fmt.Fprintf(&b, "config hash:  %s\n", ex.ConfigHash)
	fmt.Fprintf(&b, "engine:       %s\n", orNone(ex.Engine))
	if ex.Container != nil {
		fmt.Fprintf(&b, "container:    %s (%s), image %s, created %s\n", short12(ex.Container.ID), ex.Container.State, ex.Container.Image, ex.Container.CreatedAt.Format(time.RFC3339))
	} else {
		b.WriteString("container:    none\n")
	}
	fmt.Fprintf(&b, "recreate:     %s\n", ex.Recreate)
	fmt.Fprintf(&b, "runtime:      %s\n", ex.Runtime)
	if ex.RuntimeNote != "" {
		fmt.Fprintf(&b, "              %s\n", ex.RuntimeNote)
	}
	fmt.Fprintf(&b, "limits:       user %s, memory %s (swap %s), cpus %g, pids %d\n",
		orNone(ex.Limits.User), orNone(ex.Limits.Memory), orNone(ex.Limits.MemorySwap), ex.Limits.CPUs, ex.Limits.PidsLimit)
	tmpfs := make([]string, 0, len(ex.Limits.Tmpfs))
	for p, size := range ex.Limits.Tmpfs {
		tmpfs = append(tmpfs, p+" "+size)
	}
	sort.Strings(tmpfs)
	fmt.Fprintf(&b, "tmpfs:        %s\n", strings.Join(tmpfs, ", "))
	if len(ex.Hardening) > 0 {
		b.WriteString("hardening:\n")
		keys := make([]string, 0, len(ex.Hardening))
		for k := range ex.Hardening {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			v, _ := json.Marshal(ex.Hardening[k])
			fmt.Fprintf(&b, "  %s: %s\n", k, v)
		}
	}
	var cfg bytes.Buffer
	if json.Indent(&cfg, ex.Config, "  ", "  ") == nil {
		fmt.Fprintf(&b, "config:\n  %s\n", cfg.String())
	}
	return b.String()
}

// orNone shows an unset limit as "none".
func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func short12(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
