// Package toolapi is the service side of the tools' contract: the
// interfaces the sessions hub implements and the daemon, the MCP server
// and the conformance suite take, and the tools' bad-input errors. The wire
// types themselves are in package api.
package toolapi

import (
	"context"
	"errors"

	"github.com/sandboxctl/sandboxctl/api"
)

// Tools is the pair of tools, as *sessions.Manager implements them: the one
// interface the daemon, the metrics wrapper, the MCP server and the
// conformance suite take.
type Tools interface {
	Exec(ctx context.Context, p api.ExecParams) (api.Result, error)
	Process(ctx context.Context, p api.ProcessParams) (api.Result, error)
}

// ErrInvalidInput classifies bad tool input (docs/tools.md, "Bad input"). Every such error
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

// Follower reads one session's output by absolute byte offset for a
// streaming client (*sessions.Follower implements it).
type Follower interface {
	SessionID() string
	// Start is the stream's first frame: the session id and pid.
	Start() api.StreamFrame
	// Next waits for the next frame at or after offset from and returns it
	// with the offset to ask for next; done is true after the exit frame.
	Next(ctx context.Context, from int64, maxBytes int) (frame api.StreamFrame, next int64, done bool, err error)
	// Close ends this reader; a raw follower stops holding the session's
	// command back (once no other raw follower is attached).
	Close()
}

// Streamer is what serves streamed output, as *sessions.Manager does.
type Streamer interface {
	// ExecStream is Tools.Exec calling started once the session exists.
	ExecStream(ctx context.Context, p api.ExecParams, started func(Follower)) (api.Result, error)
	// Follow returns a Follower of a backgrounded session of the scope
	// (agentID, sessionKey), or an error wrapping ErrNoSession.
	Follow(agentID, sessionKey, id string) (Follower, error)
	// FollowRaw is Follow for the exact bytes of a session started with
	// api.ExecParams.Raw (frames carry Bytes); an error for another session.
	FollowRaw(agentID, sessionKey, id string) (Follower, error)
}
