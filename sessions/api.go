package sessions

import (
	"github.com/sandboxctl/sandboxctl/api"
	"github.com/sandboxctl/sandboxctl/sessions/toolapi"
)

// The tools' wire types live in package toolapi (standard library only, for
// light clients); these are their names here.
type (
	// ExecParams is the input of the exec tool (docs/tools.md).
	ExecParams = api.ExecParams
	// ProcessParams is the input of the process tool (docs/tools.md).
	ProcessParams = api.ProcessParams
	// Content is one entry of a tool result's content list.
	Content = api.Content
	// Result is what both tools return.
	Result = api.Result
	// Event is a notice on the event stream (e.g. a background run ended).
	Event = api.Event
)

// Status values of details.status.
const (
	StatusCompleted       = api.StatusCompleted
	StatusFailed          = api.StatusFailed
	StatusRunning         = api.StatusRunning
	StatusApprovalPending = api.StatusApprovalPending
	StatusDenied          = api.StatusDenied
)

// IsInvalidInput reports whether err is bad input (maps to HTTP 400).
func IsInvalidInput(err error) bool { return toolapi.IsInvalidInput(err) }
