package runtimecli

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/sandboxctl/sandboxctl/api"
	"github.com/sandboxctl/sandboxctl/internal/cli"
)

// previewCommands are `sandbox expose`, `sandbox previews` and `sandbox
// unexpose`: the daemon's previews (docs/previews.md) from the command line.
func previewCommands(c *cli.CLI) []*cobra.Command {
	var session string
	expose := &cobra.Command{
		Use:   "expose AGENT PORT [--session KEY]",
		Short: "Expose a port of an agent's sandbox through the daemon's TCP listener, behind a token; prints its URL",
		Long: `Expose PORT on the loopback of AGENT's sandbox through the daemon's TCP listener
(serve --listen) under /preview/ID/, behind a token of its own, and print the URL
that opens it (the token included: treat it as a secret). No port is published on
the host and the sandbox needs no network. Needs previews.enabled in the
configuration (docs/previews.md). With --json, the preview as the API answers it.`,
		Args: cli.ExactArgs(2, "AGENT", "PORT"),
		RunE: func(cmd *cobra.Command, args []string) error {
			port, err := strconv.Atoi(args[1])
			if err != nil || port < 1 || port > 65535 {
				return cli.UsageErrorf("sandbox expose: PORT %q is not a port (1-65535)", args[1])
			}
			return runExpose(cmd.Context(), c, api.OpenPreviewRequest{AgentID: args[0], SessionKey: session, Port: port})
		},
	}
	expose.Flags().StringVar(&session, "session", "", "session key (a session-scoped sandbox)")
	list := &cobra.Command{
		Use:   "previews",
		Short: "List the open previews (without their tokens)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			client, err := c.DaemonClient()
			if err != nil {
				return err
			}
			raw, err := client.Call(cmd.Context(), "GET", "/v1/previews", nil)
			if err != nil {
				return err
			}
			if c.JSON {
				_, err := fmt.Fprintf(c.Out, "%s\n", raw)
				return err
			}
			var pvs []api.Preview
			if err := json.Unmarshal(raw, &pvs); err != nil {
				return fmt.Errorf("sandbox previews: decode the daemon's answer: %w", err)
			}
			tw := tabwriter.NewWriter(c.Out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tAGENT\tSESSION\tPORT\tPATH\tCREATED")
			for _, p := range pvs {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", p.ID, p.AgentID, p.SessionKey, p.Port, p.Path, p.CreatedAt.Format("2006-01-02 15:04:05Z"))
			}
			return tw.Flush()
		},
	}
	unexpose := &cobra.Command{
		Use:   "unexpose ID",
		Short: "Close a preview and every connection through it",
		Args:  cli.ExactArgs(1, "ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			client, err := c.DaemonClient()
			if err != nil {
				return err
			}
			_, err = client.Call(cmd.Context(), "DELETE", "/v1/previews/"+url.PathEscape(args[0]), nil)
			return err
		},
	}
	return []*cobra.Command{expose, list, unexpose}
}

func runExpose(ctx context.Context, c *cli.CLI, req api.OpenPreviewRequest) error {
	client, err := c.DaemonClient()
	if err != nil {
		return err
	}
	raw, err := client.Call(ctx, "POST", "/v1/previews", req)
	if err != nil {
		return err
	}
	if c.JSON {
		_, err := fmt.Fprintf(c.Out, "%s\n", raw)
		return err
	}
	var p api.Preview
	if err := json.Unmarshal(raw, &p); err != nil {
		return fmt.Errorf("sandbox expose: decode the daemon's answer: %w", err)
	}
	if p.URL == "" {
		// No TCP listener: the path and the token, for when it has one.
		_, err := fmt.Fprintf(c.Out, "%s?%s=%s\n", p.Path, api.PreviewTokenParam, url.QueryEscape(p.Token))
		fmt.Fprintln(c.Err, "sandboxctl: the daemon has no TCP listener (serve --listen): the preview is served there only")
		return err
	}
	_, err = fmt.Fprintln(c.Out, p.URL)
	return err
}
