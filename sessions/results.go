package sessions

import (
	"fmt"
	"strings"
	"time"

	"github.com/sandboxctl/sandboxctl/vocab"
)

func textResult(text string, details map[string]any) Result {
	return Result{Content: []Content{{Type: "text", Text: text}}, Details: details}
}

// withWarnings prefixes the text with the warnings and records them in
// details.warnings.
func withWarnings(r Result, warnings []string) Result {
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
	r.Details["warnings"] = append([]string(nil), warnings...)
	return r
}

// finalResultLocked is the exec result of a session that finished inside
// its yield window: completed or failed (docs/tools.md).
func finalResultLocked(s *session, now time.Time, warnings []string) Result {
	agg := s.agg.WithNote()
	dur := s.endedAt.Sub(s.startedAt).Milliseconds()
	text := agg
	if strings.TrimSpace(text) == "" {
		text = "(no output)"
	}
	var d map[string]any
	if s.status == StatusCompleted {
		d = map[string]any{
			"status": StatusCompleted, "exitCode": s.exitCode, "durationMs": dur,
			"aggregated": agg, "cwd": s.cwd, "host": string(s.host),
		}
		if s.exitCode != 0 {
			text = strings.TrimRight(text, "\n") + fmt.Sprintf("\n\n(Command exited with code %d)", s.exitCode)
		}
	} else {
		d = map[string]any{
			"status": StatusFailed, "exitCode": nil, "signal": s.signal, "durationMs": dur,
			"aggregated": agg, "cwd": s.cwd, "reason": s.reason, "host": string(s.host),
		}
		text = strings.TrimRight(text, "\n") + fmt.Sprintf("\n\n(Command failed: %s)", s.reason)
	}
	return withWarnings(textResult(text, d), warnings)
}

// runningResultLocked is the exec result of a backgrounded session.
func runningResultLocked(s *session, warnings []string) Result {
	text := fmt.Sprintf("Command still running (session %s, pid %d). Use process (list/poll/log/write/kill/clear/remove) for follow-up.", s.id, s.pid)
	d := map[string]any{
		"status": StatusRunning, "sessionId": s.id, "pid": s.pid,
		"startedAt": s.startedAt.UnixMilli(), "cwd": s.cwd, "host": string(s.host),
		"tail": s.agg.Last(tailChars),
	}
	if s.waitingForInputLocked() {
		d["waitingForInput"] = true
		text = fmt.Sprintf("Command is waiting for input (session %s, pid %d). Send it with process write (eof:true closes stdin), or kill it.", s.id, s.pid)
	}
	return withWarnings(textResult(text, d), warnings)
}

func deniedResult(reason string, warnings []string) Result {
	return withWarnings(textResult("Command denied: "+reason,
		map[string]any{"status": StatusDenied, "reason": reason}), warnings)
}

// approvalResult is the approval-pending result built from the guard's
// approval details, completed with what the Manager knows.
func approvalResult(approval map[string]any, plan execPlan, command, cwd string, warnings []string) Result {
	d := map[string]any{}
	for k, v := range approval {
		d[k] = v
	}
	d["status"] = StatusApprovalPending
	setDefault(d, "host", string(plan.host))
	setDefault(d, "command", command)
	setDefault(d, "cwd", cwd)
	if plan.host == vocab.HostNode {
		setDefault(d, "nodeId", plan.p.Node)
	}
	id := fmt.Sprint(d["approvalId"])
	label := id
	if slug, ok := d["approvalSlug"].(string); ok && slug != "" {
		label = slug
	}
	text := fmt.Sprintf("Approval required (id %s).\nHost: %v\nCWD: %v\nCommand:\n%v\n\nA human approves or denies it with:\nsandboxctl approvals resolve %s allow-once|allow-always|deny",
		label, d["host"], d["cwd"], d["command"], id)
	if ms, ok := toInt64(d["expiresAtMs"]); ok {
		text += fmt.Sprintf("\n(expires at %s)", time.UnixMilli(ms).UTC().Format(time.RFC3339))
	}
	return withWarnings(textResult(text, d), warnings)
}

func setDefault(d map[string]any, k string, v any) {
	if _, ok := d[k]; !ok {
		d[k] = v
	}
}

func toInt64(v any) (int64, bool) {
	switch x := v.(type) {
	case int64:
		return x, true
	case int:
		return int64(x), true
	case float64:
		return int64(x), true
	}
	return 0, false
}

// notFoundResult is the process tool's answer for an unknown or foreign id.
func notFoundResult(id string) Result {
	return textResult("No session found for "+id, map[string]any{
		"status": StatusFailed, "error": "not_found", "sessionId": id,
	})
}
