// Package toolapi holds the wire types of the exec and process tools (SPEC
// §2, §3) and of the daemon's event stream: what agents send and get back,
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

// ExecParams is the input of the exec tool (SPEC §2). Field names in JSON are
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
}

// ProcessParams is the input of the process tool (SPEC §3).
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
// Details is a JSON object whose fields depend on details.status (SPEC §2) or
// on the process action (SPEC §3).
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
// sessions (SPEC §3); approval events will join them.
type Event struct {
	Type       vocab.EventType `json:"type"`
	Text       string          `json:"text"`
	SessionID  string          `json:"sessionId,omitempty"`
	AgentID    string          `json:"agentId,omitempty"`
	SessionKey string          `json:"sessionKey,omitempty"`
	Time       time.Time       `json:"time"`
	Details    map[string]any  `json:"details,omitempty"`
}

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
