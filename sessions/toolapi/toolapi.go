// Package toolapi holds the wire types of the exec and process tools
// (docs/tools.md) and of the daemon's event stream: what agents send and get back,
// with OpenClaw's exact JSON field names. It imports nothing beyond the
// standard library and package vocab (itself standard library only), so
// clients (the sandboxctl CLI, embedders) can speak the API without linking
// the runtime; package sessions re-exports it.
package toolapi

import (
	"errors"
	"fmt"
	"time"

	"github.com/sandboxctl/sandboxctl/vocab"
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
	// the HTTP API takes it as "strictWorkdir" beside the tool's fields,
	// for the CLI.
	StrictWorkdir bool `json:"-"`
	// Cols and Rows, when > 0, size a PTY run's terminal at its start
	// instead of the tool's 120x30 (the HTTP API's "cols" and "rows", for
	// the CLI's -t: a command that reads its size at once sees the user's).
	Cols, Rows int `json:"-"`
	// Raw keeps the session's output also as the exact bytes the command
	// wrote, for a caller that follows the whole output (the HTTP API's
	// "raw", for the CLI and the clients): followed raw (Streamer.
	// FollowRaw), a reader slower than the command makes the command block
	// in its writes, as under docker exec, instead of output being
	// dropped. The tool results keep their sanitised text.
	Raw bool `json:"-"`
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

// Content is one entry of a tool result's content list.
type Content struct {
	Type string `json:"type"` // always "text"
	Text string `json:"text"`
}

// Result is what both tools return: {content:[{type:"text",text}], details}.
// Details is a JSON object whose fields depend on details.status (docs/tools.md) or
// on the process action (docs/tools.md).
//
// details.pid, wherever it appears, is the command's pid as the machine it
// runs on numbers it: inside the sandbox container for host "sandbox" (the
// $$ of the command there, on the supervised and the plain exec path
// alike), on the daemon's machine for "gateway", on the node's machine for
// "node". 0 means it could not be learnt.
type Result struct {
	Content []Content      `json:"content"`
	Details map[string]any `json:"details"`
}

// Status values of details.status.
const (
	StatusCompleted       = "completed"
	StatusFailed          = "failed"
	StatusRunning         = "running"
	StatusApprovalPending = "approval-pending"
	StatusDenied          = "denied"
)

// Event is an asynchronous notification: today "exit" events for background
// sessions (docs/tools.md); approval events will join them.
type Event struct {
	// Cursor numbers the event in the daemon's event journal: reconnect
	// with GET /v1/events?since=CURSOR to get the events after it.
	Cursor     int64           `json:"cursor,omitempty"`
	Type       vocab.EventType `json:"type"`
	Text       string          `json:"text"`
	SessionID  string          `json:"sessionId,omitempty"`
	AgentID    string          `json:"agentId,omitempty"`
	SessionKey string          `json:"sessionKey,omitempty"`
	Time       time.Time       `json:"time"`
	Details    map[string]any  `json:"details,omitempty"`
}

// EventGap is the type of the event that tells a client reconnecting with
// ?since=CURSOR that events after its cursor are no longer in the journal;
// details.missed counts them.
const EventGap vocab.EventType = "gap"

// Err returns nil for an ordinary result and an error wrapping ErrNoSession
// for a "No session found for ID" result.
func (r Result) Err() error {
	if r.Details == nil || r.Details["error"] != "not_found" {
		return nil
	}
	id, _ := r.Details["sessionId"].(string)
	//lint:ignore ST1005 the tool's exact text
	return fmt.Errorf("No session found for %s: %w", id, ErrNoSession)
}

// Frame types of a streamed exec (POST /v1/tools/exec with "stream": true)
// and of a session stream (GET /v1/sessions/{id}/stream): one JSON object a
// line (NDJSON), in the order things happened.
const (
	// FrameStart opens a stream: the session's id and pid.
	FrameStart = "start"
	// FrameStdout and FrameStderr carry output (Data) from Offset, an
	// absolute byte offset in the session's output; a PTY session's output
	// is all stdout.
	FrameStdout = "stdout"
	FrameStderr = "stderr"
	// FrameDropped says Lost bytes from Offset were dropped from the
	// session's kept output (its cap) before this reader reached them.
	FrameDropped = "dropped"
	// FrameStatus reports a change of the running session: Status
	// "waiting-for-input" or "running".
	FrameStatus = "status"
	// FrameExit closes a session stream: the session's final Status
	// ("completed" or "failed") with ExitCode, or Signal and Reason.
	FrameExit = "exit"
	// FrameResult closes a streamed exec: Result is exactly what the call
	// without "stream" would have answered.
	FrameResult = "result"
	// FrameError closes a stream that failed after it began.
	FrameError = "error"
)

// The bounds of the exec tool's yieldMs (docs/tools.md): the tool clamps a
// default window into them and refuses a larger yieldMs; the CLI refuses
// what the tool would clamp, so a typo is not silently changed.
const (
	MinYieldMs = 10
	MaxYieldMs = 120000
)

// StreamFrame is one line of an output stream (see the Frame constants).
type StreamFrame struct {
	Type      string `json:"type"`
	SessionID string `json:"sessionId,omitempty"`
	PID       int    `json:"pid,omitempty"`
	Offset    *int64 `json:"offset,omitempty"`
	Data      string `json:"data,omitempty"`
	// Bytes is the output of a raw stream's stdout and stderr frames: the
	// command's exact bytes (base64 in JSON), Data's place.
	Bytes    []byte  `json:"bytes,omitempty"`
	Lost     int64   `json:"lost,omitempty"`
	Status   string  `json:"status,omitempty"`
	ExitCode *int    `json:"exitCode,omitempty"`
	Signal   string  `json:"signal,omitempty"`
	Reason   string  `json:"reason,omitempty"`
	Result   *Result `json:"result,omitempty"`
	Error    string  `json:"error,omitempty"`
}
