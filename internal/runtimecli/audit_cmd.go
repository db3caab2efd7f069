package runtimecli

import (
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sandboxctl/sandboxctl/internal/audit"
	"github.com/sandboxctl/sandboxctl/internal/audit/auditkey"
	"github.com/sandboxctl/sandboxctl/internal/cli"
)

// auditDir is the audit log's directory in the state directory.
func auditDirOf(c *cli.CLI) (string, error) {
	state, err := c.StateDirNoConfig()
	if err != nil {
		return "", err
	}
	return filepath.Join(state, AuditDirName), nil
}

func newAuditCommand(c *cli.CLI) *cobra.Command {
	var agent, since, until string
	var kinds []string
	cmd := &cobra.Command{
		Use:   "audit",
		Short: cli.RuntimeShort("audit"),
		Long: `audit reads the state directory's audit log (docs/audit.md) directly: every record
that passes the filters, oldest first (--json: one JSON object per line, as stored).
--since and --until take an RFC 3339 time or a duration back from now (2h).`,
		Args: cli.ExactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			q := url.Values{"agent": {agent}, "since": {since}, "until": {until}, "kind": kinds}
			f, err := audit.ParseFilter(q, time.Now())
			if err != nil {
				return cli.UsageErrorf("audit: %v", err)
			}
			dir, err := auditDirOf(c)
			if err != nil {
				return err
			}
			return runAuditQuery(c, dir, f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&agent, "agent", "", "only this agent's records")
	fl.StringVar(&since, "since", "", "only records from this time on (RFC 3339, or a duration back from now: 2h)")
	fl.StringVar(&until, "until", "", "only records before this time (RFC 3339, or a duration back from now)")
	fl.StringSliceVar(&kinds, "kind", nil, "only records of these kinds (exec.request, session.exit, file.transfer, ...)")

	var pubPath string
	var requireSigned bool
	verify := &cobra.Command{
		Use:   "verify",
		Short: "Check the audit log's hash chain; names the first edited, removed, reordered or cut line",
		Args:  cli.ExactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			var pub ed25519.PublicKey
			if pubPath != "" {
				var err error
				if pub, err = auditkey.LoadPublicKey(pubPath); err != nil {
					return &cli.ExitError{Code: 2, Err: err}
				}
			} else if requireSigned {
				return cli.UsageErrorf("audit verify: --require-signed needs --public-key")
			}
			dir, err := auditDirOf(c)
			if err != nil {
				return err
			}
			return runAuditVerify(c, dir, pub, requireSigned)
		},
	}
	verify.Flags().StringVar(&pubPath, "public-key", "", "ed25519 public key (PEM) checking the segments' signatures (audit.signingKey)")
	verify.Flags().BoolVar(&requireSigned, "require-signed", false, "a closed segment without a signature is a failure")
	cmd.AddCommand(verify)
	return cmd
}

func runAuditQuery(c *cli.CLI, dir string, f audit.Filter) error {
	if c.JSON {
		enc := json.NewEncoder(c.Out)
		var werr error
		err := audit.Scan(dir, f, func(r audit.Record) bool {
			werr = enc.Encode(r)
			return werr == nil
		})
		if err == nil {
			err = werr
		}
		return err
	}
	tw := tabwriter.NewWriter(c.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SEQ\tTIME\tKIND\tACTOR\tAGENT\tWHAT")
	err := audit.Scan(dir, f, func(r audit.Record) bool {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", r.Seq, r.Time.Local().Format(time.DateTime), r.Kind, actorText(r.Actor), r.AgentID, summary(r))
		return true
	})
	if ferr := tw.Flush(); err == nil {
		err = ferr
	}
	return err
}

func actorText(a audit.Actor) string {
	s := a.Via
	if a.Token != "" {
		s += ":" + a.Token
	}
	if a.UID != nil {
		s += fmt.Sprintf(" uid %d", *a.UID)
	}
	if a.PID != 0 {
		s += fmt.Sprintf(" pid %d", a.PID)
	}
	return s
}

// summary is one line of what a record says.
func summary(r audit.Record) string {
	var parts []string
	add := func(format string, a ...any) { parts = append(parts, fmt.Sprintf(format, a...)) }
	if r.SessionID != "" {
		add("session %s", r.SessionID)
	}
	switch {
	case r.Exec != nil:
		add("%s: %q", r.Host, r.Exec.Command)
		if r.Exec.Error != "" {
			add("refused: %s", r.Exec.Error)
		}
	case r.Guard != nil:
		add("%s (%s)", r.Guard.Decision, r.Guard.Rule)
	case r.Approval != nil:
		add("approval %s%s %s %s", r.Approval.ID, r.Approval.Slug, r.Approval.Decision, r.Approval.Command)
	case r.Session != nil && r.Kind == audit.KindSessionStart:
		add("%s: %q pid %d", r.Host, r.Session.Command, r.Session.PID)
	case r.Session != nil:
		s := r.Session
		code := "-"
		if s.ExitCode != nil {
			code = fmt.Sprint(*s.ExitCode)
		}
		add("%s code %s %s %s %dms %dB", s.Status, code, s.Signal, s.Reason, s.DurationMs, s.OutputBytes)
	case r.Process != nil:
		add("%s %s %d bytes sha256 %.16s", r.Process.Action, r.Process.Signal, r.Process.Bytes, r.Process.SHA256)
	case r.File != nil:
		add("%s %s %d bytes sha256 %.16s", r.File.Direction, r.File.Path, r.File.Bytes, r.File.SHA256)
		if r.File.Error != "" {
			add("failed: %s", r.File.Error)
		}
	case r.Sandbox != nil:
		add("%s %s %s", r.Sandbox.Action, r.Sandbox.Name, r.Sandbox.Error)
	case r.Daemon != nil:
		add("pid %d %s %s", r.Daemon.PID, r.Daemon.Version, r.Daemon.Node)
	}
	return strings.Join(strings.Fields(strings.Join(parts, " ")), " ")
}

func runAuditVerify(c *cli.CLI, dir string, pub ed25519.PublicKey, requireSigned bool) error {
	rep, err := audit.Verify(dir, pub, requireSigned)
	if err != nil {
		return err
	}
	if c.JSON {
		out := map[string]any{"ok": rep.Problem == nil, "segments": rep.Segments, "records": rep.Records,
			"firstSeq": rep.FirstSeq, "lastSeq": rep.LastSeq, "lastHash": rep.LastHash, "anchor": rep.Anchor, "signed": rep.Signed}
		if p := rep.Problem; p != nil {
			out["segment"], out["line"], out["error"] = p.Segment, p.Line, p.Err.Error()
		}
		if err := json.NewEncoder(c.Out).Encode(out); err != nil {
			return err
		}
	}
	if rep.Problem != nil {
		return &cli.ExitError{Code: 1, Err: fmt.Errorf("audit verify: %s: %w", dir, rep.Problem)}
	}
	if !c.JSON {
		fmt.Fprintf(c.Out, "audit log intact: %d record(s) in %d segment(s), seq %d..%d, last hash %s\n",
			rep.Records, rep.Segments, rep.FirstSeq, rep.LastSeq, rep.LastHash)
		if rep.Anchor != "" {
			fmt.Fprintf(c.Out, "older segments were removed (audit.maxBytes): the chain starts after hash %s\n", rep.Anchor)
		}
		if pub != nil {
			fmt.Fprintf(c.Out, "%d segment signature(s) verified\n", rep.Signed)
		}
	}
	return nil
}
