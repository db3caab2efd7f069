package runtimecli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"text/template"
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
			return cli.UsageErrorf("sandbox: missing subcommand (ls|create|rm|pause|resume|extend|prune|explain|shell|snapshot|snapshots|rollback|fork|expose|previews|unexpose)")
		},
	}
	cmd.AddCommand(
		newSandboxListCommand(c),
		newSandboxCreateCommand(c),
		newSandboxRemoveCommand(c),
		newSandboxStateCommand(c, "pause", "Freeze a sandbox: its commands stop, and new ones are refused until it is resumed", (*sandbox.Manager).Pause),
		newSandboxStateCommand(c, "resume", "Unfreeze a paused sandbox", (*sandbox.Manager).Resume),
		newSandboxExtendCommand(c),
		newSandboxPruneCommand(c),
		newSandboxExplainCommand(c),
		newSandboxShellCommand(c),
	)
	cmd.AddCommand(snapshotCommands(c)...)
	cmd.AddCommand(previewCommands(c)...)
	return cmd
}

// SandboxCreateOptions are the arguments of `sandbox create`.
type SandboxCreateOptions struct {
	SandboxOptions
	Template string
	Labels   []string // KEY=VALUE
	TTL      time.Duration
}

// object reports whether the options ask for more than the scope's
// default sandbox (a template, labels or a TTL).
func (o SandboxCreateOptions) object() bool {
	return o.Template != "" || len(o.Labels) > 0 || o.TTL != 0
}

func newSandboxCreateCommand(c *cli.CLI) *cobra.Command {
	var opts SandboxCreateOptions
	cmd := &cobra.Command{
		Use:   "create [--agent ID] [--session KEY] [--template T] [--label k=v]... [--ttl 1h]",
		Short: "Create the sandbox of a scope (without --template, --label or --ttl: start or reuse it if it exists)",
		Args:  cli.ExactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return RunSandboxCreate(cmd.Context(), c, opts)
		},
	}
	addScopeFlags(cmd, &opts.SandboxOptions)
	cmd.Flags().StringVar(&opts.Template, "template", "", "template from sandbox.templates (default: the top-level settings)")
	cmd.Flags().StringArrayVar(&opts.Labels, "label", nil, "label KEY=VALUE (repeatable)")
	cmd.Flags().DurationVar(&opts.TTL, "ttl", 0, "remove the sandbox this long after its creation (e.g. 30m, 2h)")
	return cmd
}

// SandboxListOptions are the arguments of `sandbox ls`.
type SandboxListOptions struct {
	Filters []string // label=K=V, agent=ID, template=T, state=S
	Format  string   // table (default), json, or a Go template such as '{{.ID}}'
}

func newSandboxListCommand(c *cli.CLI) *cobra.Command {
	var opts SandboxListOptions
	cmd := &cobra.Command{
		Use:     "ls [--filter label=k=v|agent=ID|template=T|state=S]... [--format table|json|TEMPLATE]",
		Aliases: []string{"list"},
		Short:   "List the managed sandboxes",
		Args:    cli.ExactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return RunSandboxList(cmd.Context(), c, opts)
		},
	}
	cmd.Flags().StringArrayVarP(&opts.Filters, "filter", "f", nil, "filter: label=KEY=VALUE, agent=ID, template=NAME or state=STATE (repeatable; all must match)")
	cmd.Flags().StringVar(&opts.Format, "format", "", "table, json, or a Go template over ID, FullID, Name, State, Template, Labels, Agent, Session, Scope, Image, CreatedAt, ExpiresAt")
	return cmd
}

// SandboxRemoveOptions are the arguments of `sandbox rm`.
type SandboxRemoveOptions struct {
	SandboxOptions
	// Names are ids, unique id prefixes or names.
	Names []string
	// Workspace removes each sandbox's workspace on the host too.
	Workspace bool
}

func newSandboxRemoveCommand(c *cli.CLI) *cobra.Command {
	var opts SandboxRemoveOptions
	cmd := &cobra.Command{
		Use:     "rm ID... [--workspace] | rm --agent ID [--session KEY] [--workspace]",
		Aliases: []string{"remove"},
		Short:   "Remove sandboxes by id or name, or the one of a scope (with --workspace, their workspaces too)",
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Names = args
			return RunSandboxRemove(cmd.Context(), c, opts)
		},
	}
	addScopeFlags(cmd, &opts.SandboxOptions)
	cmd.Flags().BoolVar(&opts.Workspace, "workspace", false, "also remove the sandbox's workspace directory on the host")
	return cmd
}

func newSandboxStateCommand(c *cli.CLI, verb, short string, do func(*sandbox.Manager, context.Context, string) (sandbox.Info, error)) *cobra.Command {
	return &cobra.Command{
		Use:   verb + " ID",
		Short: short,
		Args:  cli.ExactArgs(1, "ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runSandboxChange(cmd.Context(), c, verb, func(ctx context.Context, m *sandbox.Manager) (sandbox.Info, error) {
				return do(m, ctx, args[0])
			})
		},
	}
}

func newSandboxExtendCommand(c *cli.CLI) *cobra.Command {
	var ttl time.Duration
	cmd := &cobra.Command{
		Use:   "extend ID --ttl DURATION",
		Short: "Set a sandbox to be removed DURATION from now",
		Args:  cli.ExactArgs(1, "ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if ttl <= 0 {
				return cli.UsageErrorf("sandbox extend: --ttl must be a positive duration such as 30m or 2h")
			}
			return runSandboxChange(cmd.Context(), c, "extend", func(ctx context.Context, m *sandbox.Manager) (sandbox.Info, error) {
				return m.Extend(ctx, args[0], ttl)
			})
		},
	}
	cmd.Flags().DurationVar(&ttl, "ttl", 0, "time from now until the sandbox is removed (e.g. 30m, 2h)")
	return cmd
}

// runSandboxChange runs one change of a sandbox and prints the sandbox.
func runSandboxChange(ctx context.Context, c *cli.CLI, verb string, do func(context.Context, *sandbox.Manager) (sandbox.Info, error)) error {
	m, err := newSandboxManager(ctx, c)
	if err != nil {
		return err
	}
	defer m.Close()
	in, err := do(ctx, m)
	if err != nil {
		return fmt.Errorf("sandbox %s: %w", verb, err)
	}
	if c.JSON {
		return cli.WriteJSON(c.Out, in)
	}
	expires := ""
	if !in.ExpiresAt.IsZero() {
		expires = ", expires " + in.ExpiresAt.Format(time.RFC3339)
	}
	_, err = fmt.Fprintf(c.Out, "%s (%s): %s%s\n", in.Name, short12(in.ID), in.State, expires)
	return err
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
	m, err := newManager(ctx, sandbox.Options{Config: cfg.Sandbox, StateDir: state})
	if err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	return m, nil
}

// RunSandboxList prints the managed sandboxes that pass the filters.
func RunSandboxList(ctx context.Context, c *cli.CLI, opts SandboxListOptions) error {
	f, err := sandbox.ParseListFilter(opts.Filters)
	if err != nil {
		return cli.UsageErrorf("sandbox ls: %v", err)
	}
	var tmpl *template.Template
	switch opts.Format {
	case "", "table", "json":
	default:
		if tmpl, err = template.New("format").Option("missingkey=error").Parse(opts.Format); err != nil {
			return cli.UsageErrorf("sandbox ls: --format: %v", err)
		}
	}
	m, err := newSandboxManager(ctx, c)
	if err != nil {
		return err
	}
	defer m.Close()
	list, err := m.ListFiltered(ctx, f)
	if err != nil {
		return err
	}
	sort.Slice(list, func(i, j int) bool { return list[i].Name < list[j].Name })
	switch {
	case c.JSON || opts.Format == "json":
		return cli.WriteJSON(c.Out, orEmpty(list))
	case tmpl != nil:
		for _, in := range list {
			if err := tmpl.Execute(c.Out, newSandboxRow(in)); err != nil {
				return fmt.Errorf("sandbox ls: --format: %w", err)
			}
			if _, err := fmt.Fprintln(c.Out); err != nil {
				return err
			}
		}
		return nil
	}
	return printSandboxes(c.Out, list, time.Now())
}

// sandboxRow is what a `sandbox ls --format` template sees of a sandbox.
type sandboxRow struct {
	ID, FullID, Name, State, Template, Labels string
	Agent, Session, Scope, Image              string
	CreatedAt, ExpiresAt                      string
}

func newSandboxRow(in sandbox.Info) sandboxRow {
	r := sandboxRow{ID: short12(in.ID), FullID: in.ID, Name: in.Name, State: in.State, Template: in.Template,
		Labels: formatLabels(in.Labels), Agent: in.AgentID, Session: in.SessionKey, Scope: in.ScopeKey, Image: in.Image,
		CreatedAt: in.CreatedAt.Format(time.RFC3339)}
	if !in.ExpiresAt.IsZero() {
		r.ExpiresAt = in.ExpiresAt.Format(time.RFC3339)
	}
	return r
}

// formatLabels is k=v,k2=v2 in key order.
func formatLabels(l map[string]string) string {
	keys := make([]string, 0, len(l))
	for k := range l {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for i, k := range keys {
		keys[i] = k + "=" + l[k]
	}
	return strings.Join(keys, ",")
}

func printSandboxes(w io.Writer, list []sandbox.Info, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tTEMPLATE\tENGINE\tSTATE\tSCOPE\tLABELS\tCREATED\tEXPIRES\tLAST USED\tCONFIG")
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
		expires := "-"
		if !s.ExpiresAt.IsZero() {
			expires = "in " + s.ExpiresAt.Sub(now).Round(time.Second).String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", short12(s.ID), s.Name, s.Template, s.Engine, s.State, scope,
			orDash(formatLabels(s.Labels)), ago(now, s.CreatedAt), expires, ago(now, s.LastUsedAt), cfgState)
	}
	return tw.Flush()
}

func ago(now, t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return now.Sub(t).Round(time.Second).String() + " ago"
}

// RunSandboxCreate creates the sandbox of a scope: from a template, with
// labels and a TTL when given (a scope that has one is an error), else
// it ensures the scope's sandbox exists and runs (sandbox.explicit: it
// creates it, a scope that has one is an error).
func RunSandboxCreate(ctx context.Context, c *cli.CLI, opts SandboxCreateOptions) error {
	labels := map[string]string{}
	for _, kv := range opts.Labels {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return cli.UsageErrorf("sandbox create: --label %q: want KEY=VALUE", kv)
		}
		if err := sandbox.CheckLabel(k, v); err != nil {
			return cli.UsageErrorf("sandbox create: --label: %v", err)
		}
		labels[k] = v
	}
	if opts.TTL < 0 || opts.TTL > sandbox.MaxTTL {
		return cli.UsageErrorf("sandbox create: --ttl %s: want at most %s", opts.TTL, sandbox.MaxTTL)
	}
	if opts.TTL%time.Second != 0 {
		return cli.UsageErrorf("sandbox create: --ttl %s: want whole seconds", opts.TTL)
	}
	m, err := newSandboxManager(ctx, c)
	if err != nil {
		return err
	}
	defer m.Close()
	if opts.object() || m.Config().Explicit {
		in, err := m.Create(ctx, opts.scope(), sandbox.CreateOptions{Template: opts.Template, Labels: labels, TTL: opts.TTL})
		if err != nil {
			return fmt.Errorf("sandbox create: %w", err)
		}
		if c.JSON {
			return cli.WriteJSON(c.Out, in)
		}
		_, err = fmt.Fprintf(c.Out, "created %s (%s) id %s template %s\n", in.Name, in.ScopeKey, in.ID, in.Template)
		return err
	}
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

// RunSandboxRemove removes sandboxes by id or name, or the one of a scope,
// with their workspaces when asked. It goes on past a sandbox it cannot
// remove and returns the errors.
func RunSandboxRemove(ctx context.Context, c *cli.CLI, opts SandboxRemoveOptions) error {
	byScope := opts.AgentID != "" || opts.SessionKey != ""
	switch {
	case len(opts.Names) > 0 && byScope:
		return cli.UsageErrorf("sandbox rm: give IDs or --agent/--session, not both")
	case len(opts.Names) == 0 && !byScope:
		return cli.UsageErrorf("sandbox rm: missing ID (or --agent ID / --session KEY)")
	}
	m, err := newSandboxManager(ctx, c)
	if err != nil {
		return err
	}
	defer m.Close()
	refs := opts.Names
	if byScope {
		_, name, _, _ := m.Layout(opts.scope())
		refs = []string{name}
	}
	var errs []error
	var removed []string
	for _, ref := range refs {
		name, err := removeOne(ctx, m, ref, opts.Workspace)
		if err != nil {
			if byScope {
				err = fmt.Errorf("sandbox of %s: %w", sandbox.ScopeKey(m.Config().Scope, opts.scope()), err)
			}
			errs = append(errs, err)
			continue
		}
		removed = append(removed, name)
		if !c.JSON {
			fmt.Fprintf(c.Out, "removed %s\n", name)
		}
	}
	if c.JSON {
		out := map[string]any{"removed": removed, "workspaceRemoved": opts.Workspace}
		if len(refs) == 1 && len(removed) == 1 {
			out["removed"] = removed[0]
		}
		if len(removed) > 0 {
			if err := cli.WriteJSON(c.Out, out); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// removeOne removes the sandbox ref (id, id prefix or name) and returns its
// name; a managed container this daemon does not list (another
// configuration's) is removed by name as before, without a workspace.
func removeOne(ctx context.Context, m *sandbox.Manager, ref string, workspace bool) (string, error) {
	in, err := m.Delete(ctx, ref, workspace)
	if err == nil {
		if workspace {
			return in.Name + " and its workspace", nil
		}
		return in.Name, nil
	}
	if !errors.Is(err, sandbox.ErrNotFound) || workspace {
		return "", err
	}
	if err := m.RemoveByName(ctx, ref); err != nil {
		return "", err
	}
	return ref, nil
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
	if ex.Snapshots != "" {
		fmt.Fprintf(&b, "snapshots:    %s\n", ex.Snapshots)
	}
	if ex.RuntimeNote != "" {
		fmt.Fprintf(&b, "              %s\n", ex.RuntimeNote)
	}
	fmt.Fprintf(&b, "egress:       %s: %s\n", ex.Egress.Mode, ex.Egress.Note)
	for _, r := range ex.Egress.Rules {
		fmt.Fprintf(&b, "  allow       %s\n", r)
	}
	if len(ex.Egress.Ports) > 0 {
		fmt.Fprintf(&b, "  ports       %v (transparent), proxy %s, network %s\n", ex.Egress.Ports, orNone(ex.Egress.Proxy), orNone(ex.Egress.Network))
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

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
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
