package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"github.com/sandboxctl/sandboxctl/sessions/config"
)

func newConfigCommand(c *CLI) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Show the configuration a command uses, or check a configuration file",
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "show",
		Short: "Print the effective configuration as YAML, and where it came from",
		Long: `Print the configuration a command of this state directory uses, every key with its
value, and where it came from: the --config file, the running daemon's (a daemon
records it in <state>/daemon-config.json, so commands after 'serve --config FILE'
need no --config), or the built-in defaults.`,
		Args: ExactArgs(0),
		RunE: func(*cobra.Command, []string) error { return RunConfigShow(c) },
	})
	cmd.AddCommand(&cobra.Command{
		Use:   "validate [FILE]",
		Short: "Check a configuration file and report every problem in it (exit 1 if any)",
		Long: `Check FILE (default: the --config file, else the running daemon's) and report
every problem in it, each with its key and line: unknown or duplicate keys, values
of the wrong type, values out of range. Exit 0 when the file is valid, 1 when it
has problems.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 1 {
				return UsageErrorf("%sunexpected argument %q", commandPrefix(cmd), args[1])
			}
			return nil
		},
		RunE: func(_ *cobra.Command, args []string) error {
			file := ""
			if len(args) == 1 {
				file = args[0]
			}
			return RunConfigValidate(c, file)
		},
	})
	return cmd
}

// ConfigShow is what `sandboxctl config show --json` prints.
type ConfigShow struct {
	// Source is "file" (--config), "daemon" (the running daemon's) or
	// "defaults".
	Source string `json:"source"`
	File   string `json:"file,omitempty"`
	State  string `json:"state"`
	// Env is set when environment overrides of this shell changed a value.
	Env    bool        `json:"env,omitempty"`
	Config config.File `json:"config"`
}

// RunConfigShow prints the effective configuration and its source.
func RunConfigShow(c *CLI) error {
	cfg, err := c.LoadConfig()
	if err != nil {
		return err
	}
	state, err := c.StateDir(cfg)
	if err != nil {
		return err
	}
	show := ConfigShow{Source: "defaults", File: c.loaded.path, State: state, Config: cfg}
	switch {
	case c.loaded.fromDaemon():
		show.Source = "daemon"
	case c.loaded.path != "":
		show.Source = "file"
	}
	if err := show.Config.ApplyEnv(c.Getenv); err != nil {
		return &ExitError{Code: 2, Err: err}
	}
	show.Env = !reflect.DeepEqual(show.Config, cfg)
	if c.JSON {
		return WriteJSON(c.Out, show)
	}
	switch show.Source {
	case "daemon":
		fmt.Fprintf(c.Out, "# config: %s, as the daemon running for %s read it (%s)\n", show.File, state, filepath.Join(state, "daemon-config.json"))
	case "file":
		fmt.Fprintf(c.Out, "# config: %s (--config)\n", show.File)
	default:
		fmt.Fprintf(c.Out, "# config: the built-in defaults (no --config, and no daemon with a config file runs for %s)\n", state)
	}
	fmt.Fprintf(c.Out, "# state: %s\n", state)
	if show.Env {
		fmt.Fprintln(c.Out, "# with the environment overrides of this shell (SANDBOXCTL_YIELD_MS, ...; docs/configuration.md)")
	}
	out, err := yaml.Marshal(show.Config)
	if err != nil {
		return fmt.Errorf("config show: %w", err)
	}
	_, err = c.Out.Write(out)
	return err
}

// RunConfigValidate checks file (default: the configuration file
// LoadConfig would use) and prints every problem; any is exit 1.
func RunConfigValidate(c *CLI, file string) error {
	var (
		name string
		data []byte
	)
	if file != "" {
		p, err := config.ExpandHome(file)
		if err != nil {
			return err
		}
		if data, err = os.ReadFile(p); err != nil {
			return &ExitError{Code: 2, Err: fmt.Errorf("config validate: %w", err)}
		}
		name = file
	} else {
		l, err := c.readConfig()
		if err != nil {
			return &ExitError{Code: 2, Err: err}
		}
		if l.path == "" {
			fmt.Fprintln(c.Out, "no configuration file (no --config, and no daemon with one runs): the built-in defaults are valid")
			return nil
		}
		name, data = l.path, l.data
	}
	_, problems := config.Check(name, data)
	slices.SortStableFunc(problems, func(a, b *config.Error) int { return a.Line - b.Line })
	if c.JSON {
		type problem struct {
			Key  string `json:"key,omitempty"`
			Line int    `json:"line,omitempty"`
			Msg  string `json:"message"`
		}
		out := struct {
			File     string    `json:"file"`
			Valid    bool      `json:"valid"`
			Problems []problem `json:"problems"`
		}{File: name, Valid: len(problems) == 0, Problems: []problem{}}
		for _, p := range problems {
			out.Problems = append(out.Problems, problem{Key: p.Key, Line: p.Line, Msg: p.Msg})
		}
		if err := WriteJSON(c.Out, out); err != nil {
			return err
		}
	} else {
		for _, p := range problems {
			fmt.Fprintln(c.Out, p.Error())
		}
	}
	if len(problems) > 0 {
		return &ExitError{Code: 1, Err: fmt.Errorf("config %s: %d problem(s)", name, len(problems))}
	}
	if !c.JSON {
		fmt.Fprintf(c.Out, "config %s: valid\n", name)
	}
	return nil
}
