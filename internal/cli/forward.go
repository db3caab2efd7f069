package cli

import (
	"fmt"
	"os"
	"syscall"

	"github.com/spf13/cobra"
)

// RuntimeCommand names a command that sandboxctld implements and the light
// sandboxctl hands over to it.
type RuntimeCommand struct {
	Name  string
	Short string
}

// RuntimeCommands are sandboxctld's own commands: they link the runtime
// (the daemon, the Docker client, the MCP server, the node agent), which
// would slow every exec of the light sandboxctl if it carried them. The
// Short texts are the commands' one source.
func RuntimeCommands() []RuntimeCommand {
	return []RuntimeCommand{
		{"serve", "Run the daemon: the exec and process tools over HTTP/JSON on the state directory's socket"},
		{"sandbox", "Manage the per-agent sandbox containers (talks to Docker directly)"},
		{"mcp", "Serve the exec and process tools as an MCP server over stdio"},
		{"node", "Run this machine as a node host, or list the gateway's nodes"},
		{"ui", "Open the web console (approvals, sessions, sandboxes, nodes) in a browser"},
		{"audit", "Show the audit log (who ran what, who allowed it, what it touched), or verify it"},
	}
}

// RuntimeShort is the Short text of runtime command name.
func RuntimeShort(name string) string {
	for _, rc := range RuntimeCommands() {
		if rc.Name == name {
			return rc.Short
		}
	}
	return ""
}

// ForwardingCommands are the light sandboxctl's stand-ins for the runtime
// commands: each replaces this process with sandboxctld and the same
// arguments (execve, so signals, the terminal and the exit code are the
// real command's), and `--help` is sandboxctld's own help.
func ForwardingCommands(c *CLI) []*cobra.Command {
	var cmds []*cobra.Command
	for _, rc := range RuntimeCommands() {
		cmd := &cobra.Command{
			Use:                rc.Name,
			Short:              rc.Short,
			DisableFlagParsing: true,
			RunE: func(cmd *cobra.Command, args []string) error {
				return c.forward(rc.Name, args)
			},
		}
		// `sandboxctl help serve` shows sandboxctld's help of serve.
		cmd.SetHelpFunc(func(*cobra.Command, []string) {
			if err := c.forward(rc.Name, []string{"--help"}); err != nil {
				fmt.Fprintln(c.Err, "sandboxctl:", err)
			}
		})
		cmds = append(cmds, cmd)
	}
	return cmds
}

// forward execs sandboxctld with this invocation's arguments (CLI.Argv, or
// the command name and its arguments when Argv is unset).
func (c *CLI) forward(name string, args []string) error {
	bin, err := c.daemonBinary()
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	argv := []string{bin}
	if len(c.Argv) > 1 {
		argv = append(argv, c.Argv[1:]...)
	} else {
		argv = append(append(argv, name), args...)
	}
	if err := syscall.Exec(bin, argv, os.Environ()); err != nil {
		return fmt.Errorf("%s: run %s: %w", name, bin, err)
	}
	return nil // not reached
}
