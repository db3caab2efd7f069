package sessions

import (
	"fmt"
	"strings"
	"time"

	"github.com/sandboxctl/sandboxctl/api"

	"github.com/sandboxctl/sandboxctl/vocab"
)

func textResult(text string, details api.Details) api.Result {
	return api.Result{Content: []api.Content{{Type: "text", Text: text}}, Details: details}
}

// withWarnings prefixes the text with the warnings and records them in
// details.warnings.
func withWarnings(r api.Result, warnings []string) api.Result {
	if len(warnings) == 0 {
		return r
	}
	var b strings.Builder
	for _, w := range warnings {
		b.WriteString("Warning: ")
		b.WriteString(w)
		b.WriteByte('\n')
	}
	b.WriteByte('\n')
	r.Content[0].Text = b.String() + r.Content[0].Text
	r.Details.Warnings = append([]string(nil), warnings...)
	return r
}

// finalResultLocked is the exec result of a session that finished inside
// its yield window: completed or failed (docs/tools.md).
func finalResultLocked(s *session, now time.Time, warnings []string) api.Result {
	agg := s.agg.WithNote()
	dur := s.endedAt.Sub(s.startedAt).Milliseconds()
	text := agg
	if strings.TrimSpace(text) == "" {
		text = "(no output)"
	}
	d := api.Details{Status: s.status, DurationMs: new(dur), Aggregated: new(agg), Cwd: s.cwd, Host: string(s.host)}
	if s.status == api.StatusCompleted {
		d.ExitCode = api.Code(s.exitCode)
		if s.exitCode != 0 {
			text = strings.TrimRight(text, "\n") + fmt.Sprintf("\n\n(Command exited with code %d)", s.exitCode)
		}
	} else {
		d.Status, d.ExitCode, d.Signal, d.Reason = api.StatusFailed, api.NoExitCode(), new(s.signal), s.reason
		text = strings.TrimRight(text, "\n") + fmt.Sprintf("\n\n(Command failed: %s)", s.reason)
	}
	return withWarnings(textResult(text, d), warnings)
}

// runningResultLocked is the exec result of a backgrounded session.
func runningResultLocked(s *session, warnings []string) api.Result {
	text := fmt.Sprintf("Command still running (session %s, pid %d). Use process (list/poll/log/write/kill/clear/remove) for follow-up.", s.id, s.pid)
	d := api.Details{
		Status: api.StatusRunning, SessionID: s.id, PID: new(s.pid),
		StartedAt: s.startedAt.UnixMilli(), Cwd: s.cwd, Host: string(s.host),
		Tail: new(s.agg.Last(tailChars)),
	}
	if s.waitingForInputLocked() {
		d.WaitingForInput = true
		text = fmt.Sprintf("Command is waiting for input (session %s, pid %d). Send it with process write (eof:true closes stdin), or kill it.", s.id, s.pid)
	}
	return withWarnings(textResult(text, d), warnings)
}

func deniedResult(reason string, warnings []string) api.Result {
	return withWarnings(textResult("Command denied: "+reason,
		api.Details{Status: api.StatusDenied, Reason: reason}), warnings)
}

// approvalResult is the approval-pending result built from the guard's
// approval details, completed with what the Manager knows.
func approvalResult(approval api.Details, plan execPlan, command, cwd string, warnings []string) api.Result {
	d := approval
	d.Status = api.StatusApprovalPending
	if d.Host == "" {
		d.Host = string(plan.host)
	}
	if d.Command == "" {
		d.Command = command
	}
	if d.Cwd == "" {
		d.Cwd = cwd
	}
	if plan.host == vocab.HostNode && d.NodeID == nil {
		d.NodeID = new(plan.p.Node)
	}
	id := d.ApprovalID
	label := id
	if d.ApprovalSlug != "" {
		label = d.ApprovalSlug
	}
	text := fmt.Sprintf("Approval required (id %s).\nHost: %v\nCWD: %v\nCommand:\n%v\n\nA human approves or denies it with:\nsandboxctl approvals resolve %s allow-once|allow-always|deny",
		label, d.Host, d.Cwd, d.Command, id)
	if d.ExpiresAtMs != 0 {
		text += fmt.Sprintf("\n(expires at %s)", time.UnixMilli(d.ExpiresAtMs).UTC().Format(time.RFC3339))
	}
	return withWarnings(textResult(text, d), warnings)
}

// notFoundResult is the process tool's answer for an unknown or foreign id.
func notFoundResult(id string) api.Result {
	return textResult("No session found for "+id, api.Details{Status: api.StatusFailed, Error: api.ErrorNotFound, SessionID: id})
}
