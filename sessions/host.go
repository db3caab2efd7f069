package sessions

import (
	"context"
	"syscall"

	"github.com/sandboxctl/sandboxctl/sessions/hostapi"
)

// StartSpec describes one command for a Host to start.
type StartSpec = hostapi.StartSpec

// Host starts processes somewhere: a sandbox container, this machine, or a
// remote node. Implementations live in the host packages; adapters in this
// package turn their concrete results into a Process.
type Host interface {
	// ResolveWorkdir maps the requested working directory ("" = default) to
	// a directory in the host's namespace. A requested directory that cannot
	// be used falls back to the default with a warning; err is only for
	// failures that make the host unusable (e.g. Docker unreachable).
	ResolveWorkdir(ctx context.Context, agentID, sessionKey, requested string) (dir, warning string, err error)
	// Start starts the command. The returned Process must be waited on.
	Start(ctx context.Context, spec StartSpec) (Started, error)
}

// Process is a started command.
type Process = hostapi.Process

// Started is a started command with what its host knows about it.
type Started = hostapi.Started

// InputWaiter reports input waits of a started command.
type InputWaiter = hostapi.InputWaiter

// Signaler is implemented by a Process that can deliver one signal to its
// process tree (process kill with a signal). Kill stays the way to end a
// tree (TERM, then KILL after a grace).
type Signaler interface {
	Signal(ctx context.Context, sig syscall.Signal) error
}
