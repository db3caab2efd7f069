package api

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// Details is a result's (and an event's) details object: one set of typed
// fields, of which each kind of result or event fills its own
// (docs/tools.md). A pointer field is one that is sent even when zero; nil
// leaves it out. The fields are declared in the order of their JSON names,
// so the object's keys are sorted, as clients have always seen them.
type Details struct {
	// Action of a sandbox event: created, removed, paused, resumed,
	// extended, expired, snapshotted, snapshot-removed, rolled-back or
	// forked (docs/snapshots.md).
	Action string `json:"action,omitempty"`
	// AgentID and SessionKey: an approval's requesting scope; each
	// session of GET /v1/sessions.
	AgentID *string `json:"agentId,omitempty"`
	// Aggregated is a finished exec's whole (sanitised, capped) output.
	Aggregated *string `json:"aggregated,omitempty"`
	// ApprovalID and ApprovalSlug name a pending approval (approval-pending
	// results, approval events).
	ApprovalID   string   `json:"approvalId,omitempty"`
	ApprovalSlug string   `json:"approvalSlug,omitempty"`
	Argv         []string `json:"argv,omitempty"`
	// Bytes is what a process write sent.
	Bytes *int `json:"bytes,omitempty"`
	// Cols and Rows: a resize's new terminal size.
	Cols    int    `json:"cols,omitempty"`
	Command string `json:"command,omitempty"`
	Cwd     string `json:"cwd,omitempty"`
	// Decision of an approval-decided or approval-expired event: "run" or
	// "deny".
	Decision     string `json:"decision,omitempty"`
	DroppedChars *int64 `json:"droppedChars,omitempty"`
	// DurationMs: a finished exec's run time; a step's.
	DurationMs *int64 `json:"durationMs,omitempty"`
	// Egress is an egress event's decision (docs/egress.md).
	Egress *EgressDetails `json:"egress,omitempty"`
	// Env is the environment a gateway approval request adds.
	Env ApprovalEnv `json:"env,omitzero"`
	// EOF: a process write closed stdin.
	EOF *bool `json:"eof,omitempty"`
	// Error is "not_found" (ErrorNotFound) for an unknown session, or what
	// failed (step and node-refused events).
	Error string `json:"error,omitempty"`
	// ExitCode is the command's exit code: a number when it exited, null
	// when it failed without one (a signal, a timeout, a lost sandbox).
	ExitCode ExitCode `json:"exitCode,omitzero"`
	// ExpiresAt is a sandbox event's expiry (RFC 3339), when it has a TTL.
	ExpiresAt   string  `json:"expiresAt,omitempty"`
	ExpiresAtMs int64   `json:"expiresAtMs,omitempty"`
	Explain     *string `json:"explain,omitempty"`
	Host        string  `json:"host,omitempty"`
	// ID is a sandbox event's sandbox id.
	ID string `json:"id,omitempty"`
	// Killed: a process remove killed a running session.
	Killed *bool `json:"killed,omitempty"`
	// Limit and Offset: the lines a process log shows.
	Limit *int `json:"limit,omitempty"`
	// Missed counts the events a gap event's reader missed.
	Missed *int64  `json:"missed,omitempty"`
	Name   *string `json:"name,omitempty"`
	// Node is the node an approval is pending on.
	Node   string  `json:"node,omitempty"`
	NodeID *string `json:"nodeId,omitempty"`
	// Notify is false for an exit event the agent is not to be told of.
	Notify *bool `json:"notify,omitempty"`
	Offset *int  `json:"offset,omitempty"`
	// Oldest and Since: a gap event's journal bounds.
	Oldest *int64 `json:"oldest,omitempty"`
	// Phase of a step event: "start" or "end".
	Phase string `json:"phase,omitempty"`
	PID   *int   `json:"pid,omitempty"`
	PTY   *bool  `json:"pty,omitempty"`
	// Reason says why a command failed, was denied or waits for approval,
	// why a session is gone, or why an approval was decided.
	Reason string `json:"reason,omitempty"`
	// Remote is the address of a refused node.
	Remote string `json:"remote,omitempty"`
	// Reset: the event journal restarted (a gap event).
	Reset     bool   `json:"reset,omitempty"`
	Rows      int    `json:"rows,omitempty"`
	RuntimeMs *int64 `json:"runtimeMs,omitempty"`
	SessionID string `json:"sessionId,omitempty"`
	// SessionKey: see AgentID.
	SessionKey *string `json:"sessionKey,omitempty"`
	// Sessions are the entries of a process list (an empty list is sent).
	Sessions []Details `json:"sessions,omitzero"`
	// Signal is the signal that ended a failed command ("" when none did).
	Signal    *string `json:"signal,omitempty"`
	Since     *int64  `json:"since,omitempty"`
	StartedAt int64   `json:"startedAt,omitempty"` // Unix milliseconds
	// Snapshot names the snapshot of a sandbox event (docs/snapshots.md).
	Snapshot string `json:"snapshot,omitempty"`
	// Status is one of the Status constants, or "waiting-for-input".
	Status string `json:"status,omitempty"`
	// Step of a step event: "sandbox-create" or "image-build".
	Step string `json:"step,omitempty"`
	// Tail is the last output of a running session.
	Tail *string `json:"tail,omitempty"`
	// Template is a sandbox event's template.
	Template   string `json:"template,omitempty"`
	TotalChars *int   `json:"totalChars,omitempty"`
	TotalLines *int   `json:"totalLines,omitempty"`
	Truncated  *bool  `json:"truncated,omitempty"`
	// WaitingForInput: the running command waits for input on its stdin.
	WaitingForInput bool     `json:"waitingForInput,omitempty"`
	Warnings        []string `json:"warnings,omitempty"`
	// WorkspaceRemoved: a sandbox removal removed its workspace too.
	WorkspaceRemoved *bool `json:"workspaceRemoved,omitempty"`
}

// ExitCode is details.exitCode: left out (the zero value), a number
// (Code) or null (NoExitCode).
type ExitCode struct {
	set, null bool
	code      int
}

// Code is the exit code n.
func Code(n int) ExitCode { return ExitCode{set: true, code: n} }

// NoExitCode is the null exit code of a command that failed without one.
func NoExitCode() ExitCode { return ExitCode{set: true, null: true} }

// Int returns the exit code, and false when there is none.
func (c ExitCode) Int() (int, bool) { return c.code, c.set && !c.null }

// IsZero reports whether the exit code is left out.
func (c ExitCode) IsZero() bool { return !c.set }

// MarshalJSON encodes a number or null.
func (c ExitCode) MarshalJSON() ([]byte, error) {
	if c.null || !c.set {
		return []byte("null"), nil
	}
	return strconv.AppendInt(nil, int64(c.code), 10), nil
}

// UnmarshalJSON decodes a number or null.
func (c *ExitCode) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*c = NoExitCode()
		return nil
	}
	n, err := strconv.Atoi(string(b))
	if err != nil {
		f, ferr := strconv.ParseFloat(string(b), 64)
		if ferr != nil || f != float64(int(f)) {
			return fmt.Errorf("exitCode %s: not an integer", b)
		}
		n = int(f)
	}
	*c = Code(n)
	return nil
}

// ApprovalEnv is details.env of a gateway approval: left out (the zero
// value), or the names and values the request adds, null when none.
type ApprovalEnv struct {
	set  bool
	vars map[string]string
}

// EnvOf is the env vars (nil: null).
func EnvOf(vars map[string]string) ApprovalEnv { return ApprovalEnv{set: true, vars: vars} }

// Vars returns the names and values.
func (e ApprovalEnv) Vars() map[string]string { return e.vars }

// IsZero reports whether env is left out.
func (e ApprovalEnv) IsZero() bool { return !e.set }

// MarshalJSON encodes the names and values, or null.
func (e ApprovalEnv) MarshalJSON() ([]byte, error) { return json.Marshal(e.vars) }

// UnmarshalJSON decodes the names and values, or null.
func (e *ApprovalEnv) UnmarshalJSON(b []byte) error {
	e.set = true
	return json.Unmarshal(b, &e.vars)
}

// ExitReason says how a command ended, or why it did not run.
type ExitReason string

// The exit reasons.
const (
	// ExitExited: the command exited with Exit.Code.
	ExitExited ExitReason = "exited"
	// ExitSignaled: a signal (Exit.Signal) ended the command.
	ExitSignaled ExitReason = "signaled"
	// ExitTimeout: the exec timeout killed the command.
	ExitTimeout ExitReason = "timeout"
	// ExitKilled: a process kill or remove, or the daemon closing, killed it.
	ExitKilled ExitReason = "killed"
	// ExitLost: the command's end is unknown (its sandbox or host went
	// away, or waiting for it failed).
	ExitLost ExitReason = "lost"
	// ExitDenied: the command was refused and never ran.
	ExitDenied ExitReason = "denied"
	// ExitApprovalPending: the command waits for a human's approval.
	ExitApprovalPending ExitReason = "approval-pending"
)

// Exit is how a command ended (Reason), with its exit code or signal.
type Exit struct {
	Reason ExitReason
	Code   int    // for ExitExited
	Signal string // the signal that ended it, if any ("SIGKILL")
}

// Texts of details.reason for a failed command. Exit reads them back, so
// the text a session writes and the reason a client reads are defined
// here once.
const (
	reasonTimeoutPrefix = "timeout after "
	reasonSignalPrefix  = "terminated by signal "
	// KillReasonKilled, KillReasonRemoved and KillReasonClosed are the
	// reasons of a session killed by process kill, process remove and the
	// daemon closing.
	KillReasonKilled  = "killed"
	KillReasonRemoved = "removed"
	KillReasonClosed  = "manager closed"
)

// TimeoutReason is the reason of a command the exec timeout killed after
// d (formatted as "5s").
func TimeoutReason(d string) string { return reasonTimeoutPrefix + d }

// SignalReason is the reason of a command signal sig ended.
func SignalReason(sig string) string { return reasonSignalPrefix + sig }

// Exit returns how the command of a result or event ended; false while it
// runs, or for details of no command (a process list, an event of
// another kind).
func (d Details) Exit() (Exit, bool) {
	if d.Status == StatusFailed && d.Error != "" {
		return Exit{}, false
	}
	sig := ""
	if d.Signal != nil {
		sig = *d.Signal
	}
	code, hasCode := d.ExitCode.Int()
	return exitOf(d.Status, code, hasCode, sig, d.Reason)
}

// exitOf is how a command ended, from the fields a result's details and
// an exit frame share: its status, exit code (hasCode: it has one), the
// signal that ended it and the reason it failed.
func exitOf(status string, code int, hasCode bool, sig, reason string) (Exit, bool) {
	switch status {
	case StatusCompleted:
		if !hasCode {
			return Exit{}, false
		}
		return Exit{Reason: ExitExited, Code: code}, true
	case StatusDenied:
		return Exit{Reason: ExitDenied}, true
	case StatusApprovalPending:
		return Exit{Reason: ExitApprovalPending}, true
	case StatusFailed:
		switch {
		case strings.HasPrefix(reason, reasonTimeoutPrefix):
			return Exit{Reason: ExitTimeout, Signal: sig}, true
		case reason == KillReasonKilled || reason == KillReasonRemoved || reason == KillReasonClosed:
			return Exit{Reason: ExitKilled, Signal: sig}, true
		case sig != "":
			return Exit{Reason: ExitSignaled, Signal: sig}, true
		default:
			return Exit{Reason: ExitLost}, true
		}
	}
	return Exit{}, false
}
