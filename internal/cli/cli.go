// Package cli holds the sandboxctl commands (README, "Using it"). Each cobra command
// is a thin shell: it binds its flags into an options struct and calls an
// exported RunX(ctx, cli, opts) function that holds the logic, so the logic
// is testable without cobra and the commands stay declarative.
//
// exec and process talk to the daemon over the state directory's socket and
// start one in the background when none answers; sandbox talks to the Docker
// Engine directly through sandbox.Manager; serve is the daemon itself.
//
// Exit codes: 0 success; the command's own exit code for exec (see
// ExecExitCode); 1 for a failure of sandboxctl or the environment (daemon,
// Docker, a session that does not exist); 2 for bad usage or input rejected
// by the API (HTTP 400).
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/spf13/cobra"

	"github.com/sandboxctl/sandboxctl/api"
	"github.com/sandboxctl/sandboxctl/envknob"
	"github.com/sandboxctl/sandboxctl/internal/apiclient"
	"github.com/sandboxctl/sandboxctl/sessions/config"
)

// CLI carries the streams, the global flags and the process environment
// every command needs. Build one per invocation; it is not safe for
// concurrent use.
type CLI struct {
	In  io.Reader
	Out io.Writer
	Err io.Writer
	// Version is printed by `version` and reported by the daemon.
	Version string
	// Getenv reads the environment (default os.Getenv).
	Getenv func(string) string
	// Argv is the process's arguments (os.Args); forwarded commands hand
	// them to sandboxctld unchanged.
	Argv []string
	// DaemonBinary is the sandboxctld binary that auto-start and the
	// forwarded commands run; empty finds it (see FindDaemonBinary).
	DaemonBinary string

	// Global flags.
	StateFlag  string // --state
	ConfigPath string // --config
	JSON       bool   // --json

	// steps writes the progress of long steps (see stepProgress); made
	// on first use.
	steps *stepProgress
	// loaded is the configuration LoadConfig read.
	loaded *loadedConfig
	// signalsWatched, when set, is closed once Ctrl-C cancels the
	// command's context (watchSignals); Client waits for it.
	signalsWatched <-chan struct{}
}

// stepProgress returns the CLI's progress writer of long steps.
func (c *CLI) stepProgress() *stepProgress {
	if c.steps == nil {
		c.steps = newStepProgress(c.Err)
	}
	return c.steps
}

// Main runs a sandboxctl binary: the root command with extra's commands,
// over the process's streams and arguments, and returns its exit code.
// SIGINT, SIGTERM or SIGHUP cancels the command's context (a waiting exec
// then kills its remote command, as Ctrl-C does); a second one kills at
// once. daemonBinary is CLI.DaemonBinary ("" = find sandboxctld).
func Main(version, daemonBinary string, extra func(*CLI) []*cobra.Command) int {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := &CLI{In: os.Stdin, Out: os.Stdout, Err: os.Stderr, Version: version, Argv: os.Args, DaemonBinary: daemonBinary,
		signalsWatched: watchSignals(cancel)}
	return Report(NewRootCommand(c, extra(c)...).ExecuteContext(ctx), os.Stderr)
}

// watchSignals makes the first SIGINT, SIGTERM or SIGHUP call cancel and
// then gives the signals their default action back, so a second one
// kills. The Go runtime installs each handler by a round trip to a thread
// it makes for signals (a quarter of a millisecond on a small VM), so this
// runs beside the start-up: the channel it returns is closed once the
// handlers are in place, and the first request to the daemon waits for it
// (CLI.Client). A signal before that ends the process before it asked the
// daemon anything.
func watchSignals(cancel context.CancelFunc) <-chan struct{} {
	watched := make(chan struct{})
	go func() {
		sigs := make(chan os.Signal, 1)
		signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
		close(watched)
		<-sigs
		signal.Stop(sigs)
		cancel()
	}()
	return watched
}

// ExitError ends the process with Code. A nil Err exits silently (the
// command already said what it had to, e.g. a command's own exit code).
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit status %d", e.Code)
	}
	return e.Err.Error()
}

func (e *ExitError) Unwrap() error { return e.Err }

// UsageErrorf is a bad-usage error: exit code 2.
func UsageErrorf(format string, args ...any) error {
	return &ExitError{Code: 2, Err: fmt.Errorf(format, args...)}
}

// Report prints err (if it has a message) as "sandboxctl: <msg>" to w and
// returns the process exit code for it.
func Report(err error, w io.Writer) int {
	if err == nil {
		return 0
	}
	code := 1
	var exitErr *ExitError
	if errors.As(err, &exitErr) {
		code = exitErr.Code
		if exitErr.Err == nil {
			return code
		}
	} else if cerrdefs.IsInvalidArgument(err) {
		// A 400 from the daemon: the input was refused.
		code = 2
	}
	fmt.Fprintf(w, "sandboxctl: %s\n", err)
	return code
}

// NewRootCommand builds the sandboxctl command tree bound to c: the client
// commands (exec, process, approvals, version) and the extra ones, which
// are the runtime's own commands in sandboxctld and stubs that hand over to
// sandboxctld in the light sandboxctl (see ForwardingCommands).
func NewRootCommand(c *CLI, extra ...*cobra.Command) *cobra.Command {
	if c.Getenv == nil {
		c.Getenv = os.Getenv
	}
	root := &cobra.Command{
		Use:   "sandboxctl",
		Short: "Sandboxed shells for AI agents: the exec and process tools, sandboxes, and their daemon",
		Long: `sandboxctl runs commands for AI agents in per-agent Docker sandboxes, on this
host behind a guard, or on remote nodes, and lets them come back for the output
of background runs. exec and process talk to the daemon (sandboxctl serve) on
the state directory's socket and start one when none is running.`,
		SilenceErrors: true,
		SilenceUsage:  true,
		Args:          cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return UsageErrorf("unknown command %q for sandboxctl; run 'sandboxctl --help'", args[0])
			}
			return cmd.Help()
		},
	}
	root.SetIn(c.In)
	root.SetOut(c.Out)
	root.SetErr(c.Err)
	root.Version = c.Version
	root.SetVersionTemplate("sandboxctl {{.Version}}\n")
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return UsageErrorf("%s%w", commandPrefix(cmd), err)
	})
	pf := root.PersistentFlags()
	pf.StringVar(&c.StateFlag, "state", "", "state directory (default $"+string(envknob.State)+", then the config's state, then ~/.sandboxctl)")
	pf.StringVar(&c.ConfigPath, "config", "", "configuration file (sandboxctl.yaml; default: built-in defaults)")
	pf.BoolVar(&c.JSON, "json", false, "print machine-readable JSON")
	root.CompletionOptions.DisableDefaultCmd = true

	root.AddCommand(
		newExecCommand(c),
		newProcessCommand(c),
		newApprovalsCommand(c),
		newCpCommand(c),
		newVersionCommand(c),
		newConfigCommand(c),
	)
	root.AddCommand(extra...)
	refuseUnknownSubcommands(root)
	return root
}

// commandPrefix is "exec: " for `sandboxctl exec` (the root's own name is
// the prefix Report prints), "" for the root.
func commandPrefix(cmd *cobra.Command) string {
	if !cmd.HasParent() {
		return ""
	}
	return strings.TrimPrefix(cmd.CommandPath(), cmd.Root().Name()+" ") + ": "
}

// refuseUnknownSubcommands makes every command group (a command with
// subcommands) answer an argument that names none of them with a usage
// error (exit 2), and a group with no action of its own show its help.
func refuseUnknownSubcommands(cmd *cobra.Command) {
	for _, sub := range cmd.Commands() {
		refuseUnknownSubcommands(sub)
	}
	if !cmd.HasParent() || !cmd.HasSubCommands() {
		return
	}
	cmd.Args = func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return nil
		}
		return UsageErrorf("%sunknown command %q; run 'sandboxctl %s --help'", commandPrefix(cmd), args[0],
			strings.TrimPrefix(cmd.CommandPath(), cmd.Root().Name()+" "))
	}
	if !cmd.Runnable() {
		cmd.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
	}
}

// ExactArgs is cobra.ExactArgs with a usage-error exit code and a message
// that names what is missing.
func ExactArgs(n int, names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) == n {
			return nil
		}
		if len(args) < n {
			return UsageErrorf("%smissing %s", commandPrefix(cmd), strings.Join(names[len(args):], " "))
		}
		return UsageErrorf("%sunexpected argument %q", commandPrefix(cmd), args[n])
	}
}

// LoadConfig loads the configuration of this invocation: the --config
// file; without one, the configuration of the daemon running for the
// state directory (--state, $SANDBOXCTL_STATE or ~/.sandboxctl), as that
// daemon read it (apiclient.DaemonConfig), so every command after
// `serve --config FILE` acts under FILE without repeating it; else the
// built-in defaults. The file is read and parsed once per invocation.
func (c *CLI) LoadConfig() (config.File, error) {
	l, err := c.readOnce()
	if err != nil {
		return config.File{}, err
	}
	if !l.parsed {
		if err := c.parse(l); err != nil {
			return config.File{}, &ExitError{Code: 2, Err: err}
		}
	}
	return l.file, nil
}

// loadedConfig is the configuration of an invocation as it was read.
type loadedConfig struct {
	path string // absolute; "" = the built-in defaults
	data []byte
	// file is data parsed, once parsed is set.
	file   config.File
	parsed bool
	// record is the running daemon's record when the configuration is
	// the one that daemon serves, as it holds it (no --config was given).
	record *api.DaemonConfig
}

// fromDaemon reports whether the configuration is the running daemon's.
func (l *loadedConfig) fromDaemon() bool { return l.record != nil }

// readOnce reads the configuration (readConfig) once per invocation.
func (c *CLI) readOnce() (*loadedConfig, error) {
	if c.loaded == nil {
		l, err := c.readConfig()
		if err != nil {
			return nil, &ExitError{Code: 2, Err: err}
		}
		c.loaded = &l
	}
	return c.loaded, nil
}

// parse parses l's file (the built-in defaults without one) into l.file.
func (c *CLI) parse(l *loadedConfig) error {
	var err error
	if l.path == "" {
		l.file, err = config.Load("")
	} else if l.file, err = config.Parse(l.path, l.data); err != nil && l.fromDaemon() {
		err = fmt.Errorf("the configuration of the daemon for %s: %w", c.StateFlag, err)
	}
	l.parsed = err == nil
	return err
}

// execSettings returns the configuration's exec settings that a command
// applies itself, and the configuration to make its client of. When the
// daemon running for the state directory serves this same file, they are
// the daemon's record of them (api.DaemonConfig.Exec) and the file is not
// parsed again (about a tenth of a millisecond of every `sandboxctl
// exec`); the
// configuration is then empty, as the state directory is decided without
// it (--state, $SANDBOXCTL_STATE, or the daemon's record itself).
func (c *CLI) execSettings() (api.ExecSettings, config.File, error) {
	l, err := c.readOnce()
	if err != nil {
		return api.ExecSettings{}, config.File{}, err
	}
	if !l.parsed {
		if rec := c.recordOfSameFile(l); rec != nil && rec.Exec != nil {
			return *rec.Exec, config.File{}, nil
		}
	}
	cfg, err := c.LoadConfig()
	if err != nil {
		return api.ExecSettings{}, config.File{}, err
	}
	return cfg.Exec.ClientSettings(), cfg, nil
}

// recordOfSameFile is the record of the daemon running for the state
// directory when it serves l's file, byte for byte; nil when none does, or
// when the state directory is the file's to say (no --state, no
// $SANDBOXCTL_STATE).
func (c *CLI) recordOfSameFile(l *loadedConfig) *api.DaemonConfig {
	switch {
	case l.path == "":
		return nil // the built-in defaults: nothing to parse
	case l.fromDaemon():
		return l.record
	case c.StateFlag == "" && envknob.State.Get(c.Getenv) == "":
		return nil
	}
	state, err := c.StateDir(config.File{})
	if err != nil {
		return nil
	}
	dc, err := apiclient.ReadDaemonRecord(state)
	if err != nil || dc.ConfigFile != l.path || dc.Content != string(l.data) {
		return nil
	}
	return &dc
}

// readConfig reads, without parsing, the configuration file LoadConfig
// uses: the --config file, else the running daemon's (and then it pins
// the state directory, whatever the file's state: says), else none (path
// "": the built-in defaults).
func (c *CLI) readConfig() (loadedConfig, error) {
	if c.ConfigPath == "" {
		state, err := c.StateDir(config.Default())
		if err != nil {
			return loadedConfig{}, err
		}
		dc, ok, err := apiclient.ReadDaemonConfig(state)
		if err != nil || !ok || dc.ConfigFile == "" {
			return loadedConfig{}, err
		}
		c.StateFlag, c.ConfigPath = state, dc.ConfigFile
		return loadedConfig{path: dc.ConfigFile, data: []byte(dc.Content), record: &dc}, nil
	}
	p, err := config.ExpandHome(c.ConfigPath)
	if err != nil {
		return loadedConfig{}, err
	}
	if p, err = filepath.Abs(p); err != nil {
		return loadedConfig{}, fmt.Errorf("config path: %w", err)
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return loadedConfig{}, fmt.Errorf("config: %w", err)
	}
	return loadedConfig{path: p, data: data}, nil
}

// CheckDaemonConfig refuses (errdefs conflict) a --config whose content
// or Engine differs from what the daemon running for stateDir serves,
// naming both files: a command that works on that daemon's sandboxes
// itself (sandbox ...) must not do so under another configuration. No
// daemon, or the same content, is nil. Requests to the daemon need no
// such check: the daemon refuses them itself (409).
func (c *CLI) CheckDaemonConfig(stateDir string) error {
	if _, err := c.LoadConfig(); err != nil {
		return err
	}
	dc, ok, err := apiclient.ReadDaemonConfig(stateDir)
	if err != nil || !ok || c.loaded.fromDaemon() {
		return err
	}
	own, err := c.Identity()
	if err != nil {
		return err
	}
	if own.ConfigHash == dc.ConfigHash {
		return nil
	}
	return fmt.Errorf("%w: the daemon for %s (pid %d) serves config %s with %s, but this command was given config %s with %s: leave out --config to use the daemon's, stop it with 'sandboxctl serve stop', or use another --state",
		cerrdefs.ErrConflict, stateDir, dc.PID, describeConfigFile(dc.ConfigFile), describeEngine(dc.Engine), describeConfigFile(own.ConfigFile), describeEngine(own.Engine))
}

func describeConfigFile(f string) string {
	if f == "" {
		return "(built-in defaults)"
	}
	return f
}

func describeEngine(e string) string {
	if e == "" {
		return "DOCKER_HOST unset"
	}
	return "DOCKER_HOST=" + e
}

// StateDir resolves the state directory: --state, then $SANDBOXCTL_STATE,
// then the config's state, then ~/.sandboxctl. The result is absolute.
func (c *CLI) StateDir(cfg config.File) (string, error) {
	dir := c.StateFlag
	if dir == "" {
		dir = envknob.State.Get(c.Getenv)
	}
	if dir == "" {
		dir = cfg.State
	}
	if dir == "" {
		dir = "~/.sandboxctl"
	}
	dir, err := config.ExpandHome(dir)
	if err != nil {
		return "", err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("state directory: %w", err)
	}
	return abs, nil
}

// StateDirNoConfig resolves the state directory and loads the config only
// when neither --state nor $SANDBOXCTL_STATE decides it, so that e.g. a
// daemon can be stopped even after its config file was broken.
func (c *CLI) StateDirNoConfig() (string, error) {
	if c.StateFlag != "" || envknob.State.Get(c.Getenv) != "" {
		return c.StateDir(config.File{})
	}
	cfg, err := c.LoadConfig()
	if err != nil {
		return "", err
	}
	return c.StateDir(cfg)
}

// DaemonCommand is the argv of a foreground daemon for stateDir, with the
// same config file as this invocation.
func (c *CLI) DaemonCommand(stateDir string) ([]string, error) {
	exe, err := c.daemonBinary()
	if err != nil {
		return nil, err
	}
	argv := []string{exe, "--state", stateDir}
	if c.ConfigPath != "" {
		p, err := config.ExpandHome(c.ConfigPath)
		if err != nil {
			return nil, err
		}
		if p, err = filepath.Abs(p); err != nil {
			return nil, fmt.Errorf("config path: %w", err)
		}
		argv = append(argv, "--config", p)
	}
	return append(argv, "serve"), nil
}

// DaemonBinaryName is the runtime binary: the daemon (serve) and the
// commands that talk to Docker or serve a protocol (sandbox, mcp, node).
const DaemonBinaryName = "sandboxctld"

// daemonBinary resolves CLI.DaemonBinary, else FindDaemonBinary.
func (c *CLI) daemonBinary() (string, error) {
	if c.DaemonBinary != "" {
		return c.DaemonBinary, nil
	}
	return FindDaemonBinary(c.Getenv)
}

// FindDaemonBinary locates sandboxctld: $SANDBOXCTLD, else next to the
// running executable (how bin/ and packages install them), else on PATH.
func FindDaemonBinary(getenv func(string) string) (string, error) {
	if p := envknob.DaemonBinary.Get(getenv); p != "" {
		return p, nil
	}
	if exe, err := os.Executable(); err == nil {
		cand := filepath.Join(filepath.Dir(exe), DaemonBinaryName)
		if fi, err := os.Stat(cand); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return cand, nil
		}
	}
	if p, err := exec.LookPath(DaemonBinaryName); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("%s not found next to this executable, on PATH or in $%s: install it beside sandboxctl (make build puts both in bin/)", DaemonBinaryName, envknob.DaemonBinary)
}

// DaemonClient loads the config and returns Client(cfg).
func (c *CLI) DaemonClient() (*apiclient.Client, error) {
	cfg, err := c.LoadConfig()
	if err != nil {
		return nil, err
	}
	return c.Client(cfg)
}

// Client returns a client for the daemon of cfg's state directory; its
// first request starts a daemon in the background when none answers. It
// does no I/O itself.
func (c *CLI) Client(cfg config.File) (*apiclient.Client, error) {
	state, err := c.StateDir(cfg)
	if err != nil {
		return nil, err
	}
	// A missing sandboxctld matters only when no daemon runs yet: it is
	// looked for only then.
	opts := apiclient.StartOptions{StateDir: state, Progress: c.stepProgress().step,
		FindCommand: func() ([]string, error) { return c.DaemonCommand(state) }}
	if envknob.RunTag.Get(c.Getenv) != "" {
		// A daemon started from a command would run under that command's
		// supervisor, which serves no descendant of its own.
		opts.FindCommand = nil
		opts.CommandErr = fmt.Errorf("this process runs under sandboxctl (%s is set), which does not start a daemon from one of its own commands; start one with 'sandboxctl serve'", envknob.RunTag)
	}
	// A daemon of another configuration refuses the requests (409),
	// naming both.
	id, err := c.Identity()
	if err != nil {
		return nil, err
	}
	if c.signalsWatched != nil {
		<-c.signalsWatched // a Ctrl-C from now on reaches the command
	}
	client := apiclient.Connect(opts)
	client.SetIdentity(id)
	return client, nil
}
