package runtimecli

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sandboxctl/sandboxctl/envknob"
	"github.com/sandboxctl/sandboxctl/internal/cli"
	"github.com/sandboxctl/sandboxctl/nodeexec"
)

// NodeRunOptions are the flags of `sandboxctl node run`.
type NodeRunOptions struct {
	GatewayURL     string
	Token          string
	Name           string
	TLSFingerprint string
	Workdir        string
}

func newNodeCommand(c *cli.CLI) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "node",
		Short: cli.RuntimeShort("node"),
		Args:  cli.ExactArgs(0),
		RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	var opts NodeRunOptions
	run := &cobra.Command{
		Use:   "run --gateway URL --token T [--name N] [--tls-fingerprint SHA256]",
		Short: "Connect to a gateway and run its commands here, under this node's own guard",
		Long: `Dial out to a gateway daemon (wss://HOST:PORT; ws:// only to loopback), present
the node token, and run the commands the gateway routes here. Every command is
judged again by this node's own guard: its exec.security, exec.ask,
exec.askFallback and exec.safeBins from --config, and <state>/node/approvals.json.
Nothing the gateway says about approval counts. Runs until interrupted; lost
links are re-dialled with backoff.`,
		Args: cli.ExactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error { return RunNode(cmd.Context(), c, opts) },
	}
	f := run.Flags()
	f.StringVar(&opts.GatewayURL, "gateway", "", "gateway address, e.g. wss://gw.example:7766")
	f.StringVar(&opts.Token, "token", "", "node token (the gateway's <state>/node-token; default $"+string(envknob.NodeToken)+")")
	f.StringVar(&opts.Name, "name", "", "node name (default: host name)")
	f.StringVar(&opts.TLSFingerprint, "tls-fingerprint", "", "pin the gateway certificate: SHA-256 of its DER, hex")
	f.StringVar(&opts.Workdir, "workdir", "", "default working directory of runs (default: current directory)")
	ls := &cobra.Command{
		Use:   "ls",
		Short: "List the nodes connected to the state directory's daemon",
		Args:  cli.ExactArgs(0),
		RunE:  func(cmd *cobra.Command, _ []string) error { return RunNodeList(cmd.Context(), c) },
	}
	cmd.AddCommand(run, ls)
	return cmd
}

// RunNode runs the node agent until ctx ends or the gateway refuses it.
func RunNode(ctx context.Context, c *cli.CLI, opts NodeRunOptions) error {
	if opts.GatewayURL == "" {
		return cli.UsageErrorf("node run: --gateway is required")
	}
	if opts.Token == "" {
		opts.Token = envknob.NodeToken.Get(c.Getenv)
	}
	if opts.Token == "" {
		return cli.UsageErrorf("node run: --token (or $%s) is required", envknob.NodeToken)
	}
	cfg, err := c.LoadConfig()
	if err != nil {
		return err
	}
	state, err := c.StateDir(cfg)
	if err != nil {
		return err
	}
	logger := log.New(c.Err, "sandboxctl node: ", log.LstdFlags)
	// Like the daemon: the node token leaves the environment the node's
	// commands inherit, and no command leaves the agent's process tree.
	hardenDaemonProcess(ctx, logger.Printf)
	nodeState := filepath.Join(state, "node")
	// Commands run in the node's host supervisor: they outlive a crash of
	// this agent, and the next agent on the state directory re-adopts them.
	sup, err := hostSupervisorIn(nodeexec.SupervisorDir(nodeState), logger.Printf)
	if err != nil {
		logger.Printf("warning: %v; commands run unsupervised and end with this agent", err)
		sup = nil
	}
	// The node keeps its own audit chain of what it ran and decided.
	auditLog, err := openAudit(cfg, nodeState, c.Version, logger.Printf)
	if err != nil {
		return fmt.Errorf("node run: %w", err)
	}
	defer auditLog.close()
	auditLog.started(ctx, cfg)
	err = nodeexec.RunAgent(ctx, nodeexec.AgentOptions{
		Audit:      auditLog.rec,
		GatewayURL: opts.GatewayURL, Token: opts.Token, Name: opts.Name, Supervisor: sup,
		TLSFingerprint: opts.TLSFingerprint, StateDir: nodeState, Workdir: opts.Workdir,
		Config: nodeexec.GuardConfig{
			Security: cfg.Exec.Security, Ask: cfg.Exec.Ask, AskFallback: cfg.Exec.AskFallback, SafeBins: cfg.Exec.SafeBins,
		},
		Version: c.Version,
		Logf:    logger.Printf,
		OnConnect: func(id, name string) {
			logger.Printf("connected to %s as %s (%s)", opts.GatewayURL, name, id)
		},
	})
	if err != nil {
		return fmt.Errorf("node run: %w", err)
	}
	return nil
}

// RunNodeList prints the daemon's connected nodes.
func RunNodeList(ctx context.Context, c *cli.CLI) error {
	raw, done, err := c.CallDaemon(ctx, http.MethodGet, "/v1/nodes", nil)
	if err != nil || done {
		return err
	}
	var nodes []nodeexec.NodeInfo
	if err := json.Unmarshal(raw, &nodes); err != nil {
		return fmt.Errorf("node ls: %w", err)
	}
	if len(nodes) == 0 {
		_, err := fmt.Fprintln(c.Out, "no nodes connected")
		return err
	}
	tw := tabwriter.NewWriter(c.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tID\tPLATFORM\tSTATE\tSINCE\tRUNS\tPENDING APPROVALS")
	for _, n := range nodes {
		state := "connected"
		if !n.Connected {
			state = "offline"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%d\n", n.Name, n.ID, n.Platform, state,
			n.ConnectedAt.Format(time.RFC3339), n.ActiveRuns, n.Approvals.Pending)
	}
	return tw.Flush()
}
