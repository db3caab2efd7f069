package runtimecli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/sandboxctl/sandboxctl/api"
	"github.com/sandboxctl/sandboxctl/internal/apiclient"
	"github.com/sandboxctl/sandboxctl/internal/cli"
)

func newServeStatusCommand(c *cli.CLI) *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "Show the state directory's daemon: pid, socket, config file and hash, engine, uptime",
		Long: `Show the daemon of the state directory: its pid, socket, configuration file
and hash, the Engine it talks to (DOCKER_HOST), its version and uptime. Exit
code 1 when no daemon runs. With --json, the daemon's /healthz answer.`,
		Args: cli.ExactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return RunServeStatus(cmd.Context(), c)
		},
	}
}

// RunServeStatus prints the daemon's status, or fails when none runs.
func RunServeStatus(ctx context.Context, c *cli.CLI) error {
	state, err := c.StateDirNoConfig()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	h, err := apiclient.NewUnixClient(api.SocketPath(state)).Health(ctx)
	if errors.Is(err, apiclient.ErrNoDaemon) {
		return &cli.ExitError{Code: 1, Err: fmt.Errorf("serve status: no daemon runs for %s", state)}
	}
	if err != nil {
		return fmt.Errorf("serve status: %w", err)
	}
	if c.JSON {
		return json.NewEncoder(c.Out).Encode(h)
	}
	config := h.ConfigFile
	if config == "" {
		config = "(built-in defaults)"
	}
	engine := h.Engine
	if engine == "" {
		engine = "DOCKER_HOST unset (the Docker default)"
	}
	uptime := "unknown"
	if !h.StartedAt.IsZero() {
		uptime = time.Since(h.StartedAt).Round(time.Second).String()
	}
	_, err = fmt.Fprintf(c.Out, "pid:         %d\nsocket:      %s\nconfig:      %s\nconfig hash: %s\nengine:      %s\nversion:     %s\nuptime:      %s\n",
		h.PID, h.Socket, config, h.ConfigHash, engine, h.Version, uptime)
	return err
}
