package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/sandboxctl/sandboxctl/api"
	"github.com/spf13/cobra"
)

// ProcessOptions are the flags of `sandboxctl process ACTION [ID]`.
type ProcessOptions struct {
	Action      string
	SessionID   string
	Data        string
	EOF         bool
	Keys        []string
	Hex         []string
	Literal     string
	Text        string
	NoBracketed bool
	Offset      *int
	Limit       *int
	Signal      string
	TimeoutMs   *float64
	Cols, Rows  *int
	AgentID     string
	SessionKey  string
}

// Params builds the process tool's input.
func (o ProcessOptions) Params() api.ProcessParams {
	p := api.ProcessParams{
		Action: o.Action, SessionID: o.SessionID,
		Data: o.Data, EOF: o.EOF, Keys: o.Keys, Hex: o.Hex, Literal: o.Literal, Text: o.Text,
		Offset: o.Offset, Limit: o.Limit, Signal: o.Signal, TimeoutMs: o.TimeoutMs,
		Cols: o.Cols, Rows: o.Rows,
		AgentID: o.AgentID, SessionKey: o.SessionKey,
	}
	if o.NoBracketed {
		f := false
		p.Bracketed = &f
	}
	return p
}

// processAction describes one `process` subcommand.
type processAction struct {
	name, short string
	flags       func(cmd *cobra.Command, o *ProcessOptions, ints *processInts)
}

// processInts holds flag values that become pointers only when given.
type processInts struct {
	offset, limit, cols, rows int
	timeoutMs                 float64
}

// MaxPollTimeoutMs is the longest a poll may wait for new output (docs/tools.md).
const MaxPollTimeoutMs = 30000

func newProcessCommand(c *CLI) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "process ACTION [ID]",
		Short: "Follow up on background sessions: list, poll, log, write, send-keys, paste, submit, kill, clear, remove, resize",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return UsageErrorf("process: missing ACTION (list|poll|log|write|send-keys|paste|submit|kill|clear|remove|resize)")
		},
	}
	actions := []processAction{
		{name: "poll", short: "Print new output since the last poll and the session's state", flags: func(cmd *cobra.Command, _ *ProcessOptions, n *processInts) {
			cmd.Flags().Float64Var(&n.timeoutMs, "timeout-ms", 0, "wait up to this many ms for new output (0..30000)")
		}},
		{name: "log", short: "Print the aggregated output by lines", flags: func(cmd *cobra.Command, _ *ProcessOptions, n *processInts) {
			cmd.Flags().IntVar(&n.offset, "offset", 0, "first line (0-based)")
			cmd.Flags().IntVar(&n.limit, "limit", 0, "number of lines (only --limit: the last N lines)")
		}},
		{name: "write", short: "Send data to the session's stdin", flags: func(cmd *cobra.Command, o *ProcessOptions, _ *processInts) {
			cmd.Flags().StringVar(&o.Data, "data", "", "data to write")
			cmd.Flags().BoolVar(&o.EOF, "eof", false, "close stdin after writing")
		}},
		{name: "send-keys", short: "Send key names, hex bytes or literal text to a PTY session", flags: func(cmd *cobra.Command, o *ProcessOptions, _ *processInts) {
			cmd.Flags().StringArrayVar(&o.Keys, "keys", nil, "key name, e.g. enter, C-c, up, f5 (repeatable)")
			cmd.Flags().StringArrayVar(&o.Hex, "hex", nil, "bytes in hex, e.g. 1b5b41 (repeatable)")
			cmd.Flags().StringVar(&o.Literal, "literal", "", "literal text")
		}},
		{name: "paste", short: "Paste text, bracketed by default", flags: func(cmd *cobra.Command, o *ProcessOptions, _ *processInts) {
			cmd.Flags().StringVar(&o.Text, "text", "", "text to paste")
			cmd.Flags().BoolVar(&o.NoBracketed, "no-bracketed", false, "do not wrap the text in ESC[200~ … ESC[201~")
		}},
		{name: "submit", short: "Send a carriage return"},
		{name: "kill", short: "Kill the session's whole process tree", flags: func(cmd *cobra.Command, o *ProcessOptions, _ *processInts) {
			cmd.Flags().StringVar(&o.Signal, "signal", "", "send only this signal (SIGINT, SIGTERM, SIGKILL, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2) to the tree; without it: SIGTERM, then SIGKILL after 3 s")
		}},
		{name: "clear", short: "Forget a finished session"},
		{name: "remove", short: "Kill the session if running, then forget it"},
		{name: "resize", short: "Resize a PTY session's terminal", flags: func(cmd *cobra.Command, _ *ProcessOptions, n *processInts) {
			cmd.Flags().IntVar(&n.cols, "cols", 0, "columns")
			cmd.Flags().IntVar(&n.rows, "rows", 0, "rows")
		}},
	}
	cmd.AddCommand(newProcessSubcommand(c, processAction{name: "list", short: "List the caller's sessions, newest first"}, false))
	for _, a := range actions {
		cmd.AddCommand(newProcessSubcommand(c, a, true))
	}
	return cmd
}

func newProcessSubcommand(c *CLI, a processAction, needsID bool) *cobra.Command {
	var (
		opts ProcessOptions
		ints processInts
	)
	use := a.name
	args := ExactArgs(0)
	if needsID {
		use += " ID"
		args = ExactArgs(1, "ID")
	}
	cmd := &cobra.Command{
		Use:   use,
		Short: a.short,
		Args:  args,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Action = a.name
			if len(args) == 1 {
				opts.SessionID = args[0]
			}
			fl := cmd.Flags()
			if fl.Changed("offset") {
				opts.Offset = &ints.offset
			}
			if fl.Changed("limit") {
				opts.Limit = &ints.limit
			}
			if fl.Changed("timeout-ms") {
				if ints.timeoutMs < 0 || ints.timeoutMs > MaxPollTimeoutMs {
					return UsageErrorf("process %s: --timeout-ms %v is out of range: allowed 0..%d", a.name, ints.timeoutMs, MaxPollTimeoutMs)
				}
				opts.TimeoutMs = &ints.timeoutMs
			}
			if fl.Changed("cols") {
				opts.Cols = &ints.cols
			}
			if fl.Changed("rows") {
				opts.Rows = &ints.rows
			}
			if a.name == "resize" && (opts.Cols == nil || opts.Rows == nil) {
				return UsageErrorf("process resize: --cols and --rows are required")
			}
			return RunProcess(cmd.Context(), c, opts)
		},
	}
	if a.flags != nil {
		a.flags(cmd, &opts, &ints)
	}
	cmd.Flags().StringVar(&opts.AgentID, "agent", "", "agent id (sessions are scoped by it)")
	cmd.Flags().StringVar(&opts.SessionKey, "session", "", "session key (sessions are scoped by it)")
	return cmd
}

// RunProcess calls the daemon's process tool and prints the result. A
// "No session found for ID" answer is printed and exits 1.
func RunProcess(ctx context.Context, c *CLI, opts ProcessOptions) error {
	client, err := c.DaemonClient()
	if err != nil {
		return err
	}
	raw, err := client.ProcessRaw(ctx, opts.Params())
	if err != nil {
		if ctx.Err() != nil && errors.Is(err, context.Canceled) {
			return &ExitError{Code: 130, Err: errors.New("interrupted")}
		}
		return err
	}
	var res api.Result
	if err := json.Unmarshal(raw, &res); err != nil {
		return fmt.Errorf("process: decode the daemon's answer: %w", err)
	}
	notFound := errors.Is(res.Err(), api.ErrNoSession)
	switch {
	case c.JSON:
		err = writeRaw(c.Out, raw)
	case notFound:
		err = printText(c.Err, res)
	default:
		err = printText(c.Out, res)
	}
	if err != nil {
		return err
	}
	if notFound {
		return &ExitError{Code: 1}
	}
	return nil
}
