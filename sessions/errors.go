package sessions

import (
	"errors"
	"fmt"

	"github.com/sandboxctl/sandboxctl/sessions/toolapi"
)

// ErrInvalidInput classifies bad tool input (SPEC §11). Every such error
// returned by Exec and Process satisfies errors.Is(err, ErrInvalidInput); the
// HTTP layer maps it to 400. Nothing has been started or changed when it is
// returned.
var ErrInvalidInput = errors.New("invalid input")

// ErrNoSession classifies an unknown (or another scope's) session id. The
// process tool reports it as a normal Result whose text is
// "No session found for ID" (so an agent sees it like any other answer) with
// details.error = "not_found"; Result.Err turns such a result into an error
// wrapping ErrNoSession for Go callers that prefer one.
var ErrNoSession = toolapi.ErrNoSession

// ErrHostUnavailable is returned when the selected host has no
// implementation configured (Options.Hosts lacks it).
var ErrHostUnavailable = errors.New("exec host not available")

// ErrClosed is returned by Exec and Process after Close.
var ErrClosed = errors.New("sessions manager is closed")

// InputError is a bad-input error naming the offending field.
type InputError struct {
	Field string // JSON field name, e.g. "command", "env", "sessionId"
	Msg   string // the specific message shown to the caller
	// Err is the underlying cause, if any (e.g. an *envguard.RefusedError);
	// errors.As reaches it through Unwrap.
	Err error
}

func (e *InputError) Error() string { return e.Msg }

// Is makes every InputError match ErrInvalidInput.
func (e *InputError) Is(target error) bool { return target == ErrInvalidInput }

// Unwrap returns the cause.
func (e *InputError) Unwrap() error { return e.Err }

func inputErr(field, format string, args ...any) *InputError {
	return &InputError{Field: field, Msg: fmt.Sprintf(format, args...)}
}
