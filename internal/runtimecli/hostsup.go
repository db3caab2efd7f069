package runtimecli

import (
	"fmt"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/sandboxctl/sandboxctl/envguard"
	"github.com/sandboxctl/sandboxctl/hostexec/hostsup"
	"github.com/sandboxctl/sandboxctl/internal/cli"
)

// hostSupervisorDir is the host supervisor's state directory under the
// daemon's.
const hostSupervisorDir = "gateway-supervisor"

// hostSupervisor is the link to the state directory's host supervisor; the
// first gateway command starts one (this executable, `serve
// host-supervisor`) when none runs.
func hostSupervisor(state string, logf func(string, ...any)) (*hostsup.Supervisor, error) {
	return hostSupervisorIn(filepath.Join(state, hostSupervisorDir), logf)
}

// hostSupervisorIn is the link to the host supervisor serving dir (the
// gateway's, or a node agent's).
func hostSupervisorIn(dir string, logf func(string, ...any)) (*hostsup.Supervisor, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("host supervisor: %w", err)
	}
	return hostsup.New(hostsup.Options{
		Dir:     dir,
		Command: []string{exe, "serve", "host-supervisor", "--dir", dir},
		// Its own environment only: each command gets the one the
		// daemon built for it.
		Env:  envguard.SanitizeInherited(os.Environ()),
		Logf: logf,
	})
}

// newHostSupervisorCommand is the host supervisor's entry point, started by
// the daemon (hidden: not for people).
func newHostSupervisorCommand(c *cli.CLI) *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:    "host-supervisor --dir DIR",
		Short:  "Run the gateway's host supervisor (started by the daemon)",
		Hidden: true,
		Args:   cli.ExactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			// Caught, not ignored: an ignored signal stays ignored in the
			// commands it starts.
			// SIGHUP, and the job-control stops a terminal's parent may
			// have set to ignored.
			caught := make(chan os.Signal, 1)
			signal.Notify(caught, syscall.SIGHUP, syscall.SIGTSTP, syscall.SIGTTIN, syscall.SIGTTOU)
			defer signal.Stop(caught)
			logger := log.New(c.Err, "sandboxctl host supervisor: ", log.LstdFlags)
			return hostsup.Serve(ctx, dir, logger.Printf)
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "state directory (socket and sessions)")
	_ = cmd.MarkFlagRequired("dir")
	return cmd
}
