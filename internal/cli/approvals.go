package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sandboxctl/sandboxctl/api"

	"github.com/spf13/cobra"

	"github.com/sandboxctl/sandboxctl/internal/display"
)

func newApprovalsCommand(c *CLI) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "approvals",
		Short: "List and decide approval requests (the gateway's and its nodes')",
		Args:  ExactArgs(0),
		RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "list",
		Short: "List approval requests, newest first",
		Args:  ExactArgs(0),
		RunE:  func(cmd *cobra.Command, _ []string) error { return RunApprovalsList(cmd.Context(), c) },
	}, &cobra.Command{
		Use:   "resolve ID allow-once|allow-always|deny",
		Short: "Decide an approval request (by id or slug)",
		Args:  ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return RunApprovalsResolve(cmd.Context(), c, args[0], args[1])
		},
	})
	return cmd
}

// RunApprovalsList prints the approval requests the daemon knows.
func RunApprovalsList(ctx context.Context, c *CLI) error {
	raw, done, err := c.CallDaemon(ctx, "GET", "/v1/approvals", nil)
	if err != nil || done {
		return err
	}
	var list []api.Approval
	if err := json.Unmarshal(raw, &list); err != nil {
		return fmt.Errorf("approvals list: %w", err)
	}
	if len(list) == 0 {
		_, err := fmt.Fprintln(c.Out, "no approval requests")
		return err
	}
	for i, a := range list {
		if i > 0 {
			fmt.Fprintln(c.Out)
		}
		if err := writeApproval(c.Out, a); err != nil {
			return err
		}
	}
	return nil
}

// writeApproval prints one request for a person: every value that decides
// what runs, with control characters and escapes shown, never interpreted
// by the terminal.
func writeApproval(w io.Writer, a api.Approval) error {
	who := orNone(a.AgentID)
	if a.SessionKey != "" {
		who += " (session " + visible(a.SessionKey) + ")"
	}
	if _, err := fmt.Fprintf(w, "%s  %s, on %s, expires %s\n", a.ID, a.Status, visible(a.Where), time.UnixMilli(a.ExpiresAtMs).Format(time.TimeOnly)); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 1, ' ', 0)
	fmt.Fprintf(tw, "  agent:\t%s\n", visible(who))
	fmt.Fprintf(tw, "  host:\t%s\n", visible(a.Host))
	fmt.Fprintf(tw, "  cwd:\t%s\n", visible(a.Cwd))
	fmt.Fprintf(tw, "  command:\t%s\n", visible(a.Command))
	if a.Shell != "" {
		fmt.Fprintf(tw, "  shell:\t%s\n", visible(a.Shell))
	}
	if len(a.Argv) > 0 {
		q := make([]string, len(a.Argv))
		for i, s := range a.Argv {
			q[i] = visible(strconv.Quote(s))
		}
		fmt.Fprintf(tw, "  argv:\t[%s]\n", strings.Join(q, ", "))
	}
	label := "  env:"
	if len(a.Env) == 0 {
		fmt.Fprintf(tw, "%s\t(none added)\n", label)
	}
	for _, k := range slices.Sorted(maps.Keys(a.Env)) {
		fmt.Fprintf(tw, "%s\t%s=%s\n", label, visible(k), visible(strconv.Quote(a.Env[k])))
		label = ""
	}
	return tw.Flush()
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// visible is s with every code point a person cannot see escaped
// (display.Escape: controls, newlines, zero-width and bidi marks, blanks
// that are not U+0020 such as U+3164 and U+2800), so a command cannot look
// like another on the terminal.
func visible(s string) string { return display.Escape(s, "") }

// RunApprovalsResolve records a decision.
func RunApprovalsResolve(ctx context.Context, c *CLI, id, decision string) error {
	switch decision {
	case "allow-once", "allow-always", "deny":
	default:
		return UsageErrorf("approvals resolve: unknown decision %q (valid: allow-once, allow-always, deny)", decision)
	}
	_, done, err := c.CallDaemon(ctx, "POST", "/v1/approvals/"+url.PathEscape(id), api.ResolveRequest{Decision: decision})
	if err != nil || done {
		return err
	}
	_, err = fmt.Fprintf(c.Out, "%s: %s\n", id, decision)
	return err
}

// CallDaemon sends one request to the state directory's daemon (starting
// it when none runs). With --json it prints the answer as is and reports
// done, so the caller only formats for people.
func (c *CLI) CallDaemon(ctx context.Context, method, path string, body any) (raw json.RawMessage, done bool, err error) {
	client, err := c.DaemonClient()
	if err != nil {
		return nil, false, err
	}
	if raw, err = client.Call(ctx, method, path, body); err != nil {
		return nil, false, err
	}
	if c.JSON {
		_, err := fmt.Fprintln(c.Out, strings.TrimSpace(string(raw)))
		return raw, true, err
	}
	return raw, false, nil
}
