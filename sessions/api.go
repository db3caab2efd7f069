package sessions

import "github.com/sandboxctl/sandboxctl/sessions/toolapi"

// The tools' wire types live in package toolapi (standard library only, for
// light clients); these are their names here.
type (
	// ExecParams is the input of the exec tool (docs/tools.md).
	ExecParams = toolapi.ExecParams
	// ProcessParams is the input of the process tool (docs/tools.md).
	ProcessParams = toolapi.ProcessParams
	// Content is one entry of a tool result's content list.
	Content = toolapi.Content
	// Result is what both tools return.
	Result = toolapi.Result
	// Event is a notice on the event stream (e.g. a background run ended).
	Event = toolapi.Event
)

// Status values of details.status.
const (
	StatusCompleted       = toolapi.StatusCompleted
	StatusFailed          = toolapi.StatusFailed
	StatusRunning         = toolapi.StatusRunning
	StatusApprovalPending = toolapi.StatusApprovalPending
	StatusDenied          = toolapi.StatusDenied
)

// IsInvalidInput reports whether err is bad input (maps to HTTP 400).
func IsInvalidInput(err error) bool { return toolapi.IsInvalidInput(err) }
