package toolapi

import (
	"context"
	"errors"
)

// Tools is the pair of tools, as *sessions.Manager implements them: the one
// interface the daemon, the metrics wrapper, the MCP server and the
// conformance suite take.
type Tools interface {
	Exec(ctx context.Context, p ExecParams) (Result, error)
	Process(ctx context.Context, p ProcessParams) (Result, error)
}

// ErrInvalidInput classifies bad tool input (SPEC §11). Every such error
// the tools return satisfies errors.Is(err, ErrInvalidInput); the HTTP layer
// maps it to 400. Nothing has been started or changed when it is returned.
var ErrInvalidInput = errors.New("invalid input")

// IsInvalidInput reports whether err is bad tool input.
func IsInvalidInput(err error) bool { return errors.Is(err, ErrInvalidInput) }

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

// InvalidParameter classes the error as containerd's errdefs does
// (cerrdefs.IsInvalidArgument), without importing it.
func (e *InputError) InvalidParameter() {}
