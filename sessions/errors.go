package sessions

import (
	"errors"
	"fmt"

	"github.com/sandboxctl/sandboxctl/api"

	"github.com/sandboxctl/sandboxctl/sessions/toolapi"
)

// ErrInvalidInput classifies bad tool input (toolapi.ErrInvalidInput).
var ErrInvalidInput = toolapi.ErrInvalidInput

// ErrNoSession classifies an unknown (or another scope's) session id. The
// process tool reports it as a normal Result whose text is
// "No session found for ID" (so an agent sees it like any other answer) with
// details.error = "not_found"; Result.Err turns such a result into an error
// wrapping ErrNoSession for Go callers that prefer one.
var ErrNoSession = api.ErrNoSession

// ErrHostUnavailable is returned when the selected host has no
// implementation configured (Options.Hosts lacks it).
var ErrHostUnavailable = errors.New("exec host not available")

// ErrClosed is returned by Exec and Process after Close.
var ErrClosed = errors.New("sessions manager is closed")

// InputError is a bad-input error naming the offending field
// (toolapi.InputError).
type InputError = toolapi.InputError

func inputErr(field, format string, args ...any) *InputError {
	return &InputError{Field: field, Msg: fmt.Sprintf(format, args...)}
}
