package api

import (
	"errors"
	"fmt"
	"time"
)

// ErrNoSession classifies an unknown (or another scope's) session id; see
// Result.Err.
var ErrNoSession = errors.New("no session found")

// ExecParams is the input of the exec tool (docs/tools.md). Field names in JSON are
// exactly OpenClaw's so existing agents work unchanged. Pointer fields
// distinguish "not given" from a zero value.
type ExecParams struct {
	Command    string            `json:"command"`
	Workdir    string            `json:"workdir,omitempty"`
	Env        map[string]string `json:"env,omitempty"`
	YieldMs    *float64          `json:"yieldMs,omitempty"`
	Background bool              `json:"background,omitempty"`
	Timeout    *float64          `json:"timeout,omitempty"` // seconds
	PTY        bool              `json:"pty,omitempty"`
	Elevated   bool              `json:"elevated,omitempty"`
	Host       string            `json:"host,omitempty"`     // sandbox | gateway | node
	Security   string            `json:"security,omitempty"` // deny | allowlist | full
	Ask        string            `json:"ask,omitempty"`      // off | on-miss | always
	Node       string            `json:"node,omitempty"`
	AgentID    string            `json:"agentId,omitempty"`
	SessionKey string            `json:"sessionKey,omitempty"`
	// StrictWorkdir makes also the default workdir an error when it cannot
	// be used (a requested Workdir that cannot be used is an error always:
	// nothing runs, never a fallback). It is not part of the tool's JSON:
	// the HTTP API takes it as "strictWorkdir" beside the tool's fields
	// (ExecRequest), for the CLI.
	StrictWorkdir bool `json:"-"`
	// Cols and Rows, when > 0, size a PTY run's terminal at its start
	// instead of the tool's 120x30 (the HTTP API's "cols" and "rows", for
	// the CLI's -t: a command that reads its size at once sees the user's).
	Cols, Rows int `json:"-"`
	// Raw keeps the session's output also as the exact bytes the command
	// wrote, for a caller that follows the whole output (the HTTP API's
	// "raw", for the CLI and the clients): followed raw, a reader slower
	// than the command makes the command block in its writes, as under
	// docker exec, instead of output being dropped. The tool results keep
	// their sanitised text.
	Raw bool `json:"-"`
}

// ExecRequest is the body of POST /v1/tools/exec: the exec tool's input
// and the HTTP API's own fields.
type ExecRequest struct {
	ExecParams
	// Stream asks for frames as things happen (StreamFrame) instead of
	// one result.
	Stream bool `json:"stream,omitempty"`
	// StrictWorkdir, Cols, Rows and Raw: see ExecParams. With Raw the
	// stream's frames are binary (ContentTypeFrames) and carry the
	// command's exact bytes.
	StrictWorkdir bool `json:"strictWorkdir,omitempty"`
	Cols          int  `json:"cols,omitempty"`
	Rows          int  `json:"rows,omitempty"`
	Raw           bool `json:"raw,omitempty"`
}

// NewExecRequest is the body that sends p, streamed or not.
func NewExecRequest(p ExecParams, stream bool) ExecRequest {
	return ExecRequest{ExecParams: p, StrictWorkdir: p.StrictWorkdir, Cols: p.Cols, Rows: p.Rows, Stream: stream, Raw: p.Raw}
}

// Params is the exec tool's input the request carries, the HTTP API's
// fields included.
func (r ExecRequest) Params() ExecParams {
	p := r.ExecParams
	p.StrictWorkdir, p.Cols, p.Rows, p.Raw = r.StrictWorkdir, r.Cols, r.Rows, r.Raw
	return p
}

// ProcessParams is the input of the process tool (docs/tools.md).
type ProcessParams struct {
	Action    string   `json:"action"`
	SessionID string   `json:"sessionId,omitempty"`
	Data      string   `json:"data,omitempty"`
	EOF       bool     `json:"eof,omitempty"`
	Keys      []string `json:"keys,omitempty"`
	Hex       []string `json:"hex,omitempty"`
	Literal   string   `json:"literal,omitempty"`
	Text      string   `json:"text,omitempty"`
	Bracketed *bool    `json:"bracketed,omitempty"`
	Offset    *int     `json:"offset,omitempty"`
	Limit     *int     `json:"limit,omitempty"`
	Signal    string   `json:"signal,omitempty"`
	TimeoutMs *float64 `json:"timeoutMs,omitempty"`
	// Cols and Rows are the new terminal size for action "resize".
	Cols       *int   `json:"cols,omitempty"`
	Rows       *int   `json:"rows,omitempty"`
	AgentID    string `json:"agentId,omitempty"`
	SessionKey string `json:"sessionKey,omitempty"`
}

// ProcessActions are the values of ProcessParams.Action, defined once: the
// process tool validates against them, the MCP server advertises them as an
// enum and the metrics use them as the only label values.
var ProcessActions = []string{"list", "poll", "log", "write", "send-keys", "paste", "submit", "kill", "clear", "remove", "resize"}

// Content is one entry of a tool result's content list.
type Content struct {
	Type string `json:"type"` // always "text"
	Text string `json:"text"`
}

// Result is what both tools return: {content:[{type:"text",text}], details}.
// Details' fields depend on details.status (docs/tools.md) or on the
// process action (docs/tools.md).
//
// details.pid, wherever it appears, is the command's pid as the machine it
// runs on numbers it: inside the sandbox container for host "sandbox" (the
// $$ of the command there, on the supervised and the plain exec path
// alike), on the daemon's machine for "gateway", on the node's machine for
// "node". 0 means it could not be learnt.
type Result struct {
	Content []Content `json:"content"`
	Details Details   `json:"details"`
}

// Text is the result's text (its first content entry).
func (r Result) Text() string {
	if len(r.Content) == 0 {
		return ""
	}
	return r.Content[0].Text
}

// Status values of details.status.
const (
	StatusCompleted       = "completed"
	StatusFailed          = "failed"
	StatusRunning         = "running"
	StatusApprovalPending = "approval-pending"
	StatusDenied          = "denied"
)

// ErrorNotFound is details.error of a "No session found for ID" result.
const ErrorNotFound = "not_found"

// Err returns nil for an ordinary result and an error wrapping ErrNoSession
// for a "No session found for ID" result.
func (r Result) Err() error {
	if r.Details.Error != ErrorNotFound {
		return nil
	}
	//lint:ignore ST1005 the tool's exact text
	return fmt.Errorf("No session found for %s: %w", r.Details.SessionID, ErrNoSession)
}

// The bounds of the exec tool's yieldMs (docs/tools.md): the tool clamps a
// default window into them and refuses a larger yieldMs; the CLI refuses
// what the tool would clamp, so a typo is not silently changed.
const (
	MinYieldMs = 10
	MaxYieldMs = 120000
)

// KillGrace is how long every host gives a killed command's tree between
// SIGTERM and SIGKILL (a kill, a timeout, a removed session).
const KillGrace = 3 * time.Second
