package sessions

import (
	"context"
	"io"
	"syscall"

	"github.com/sandboxctl/sandboxctl/vocab"
)

// StartSpec describes one command for a Host to start.
type StartSpec struct {
	// SessionID is the id the session will have; a host that keeps sessions
	// across daemon restarts records it so Recover returns the same id.
	SessionID string
	// Command is the shell command line; hosts run it as `sh -c Command`
	// (the gateway uses $SHELL when it is a POSIX shell).
	Command string
	// Env is the request's extra environment, already checked by envguard for
	// this host. Each host builds the full environment itself: its own base
	// (never the daemon's unfiltered os.Environ) with Env applied on top, plus
	// TERM=xterm-256color for a PTY.
	Env map[string]string
	// Dir is the working directory, in the host's own namespace (a container
	// path for the sandbox host).
	Dir string
	// PTY asks for a pseudo-terminal of Cols x Rows (default 120x30).
	PTY        bool
	Cols, Rows int
	// KeepStdin keeps stdin open so the caller can write to it. When false the
	// process sees EOF on stdin at once (non-PTY) so it can never hang on it.
	KeepStdin bool
	// AgentID and SessionKey identify the caller; the sandbox host uses them to
	// pick the container.
	AgentID, SessionKey string
	// Security and Ask are the effective modes of the request; a node host
	// forwards them so the node applies min/max with its own configuration.
	Security vocab.Security
	Ask      vocab.Ask
	// Node is the node id or name for the node host (ExecParams.Node); ""
	// means the node host's default (exec.node). Other hosts ignore it.
	Node string
}

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
	Start(ctx context.Context, spec StartSpec) (Process, error)
}

// Process is a started command. A Process may also implement
// `Warnings() []string` (e.g. a pending sandbox recreate, a PTY or supervisor
// fallback); the Manager shows them in the exec result. Only std types appear in its method set so that
// the host packages (which cannot import sessions) can satisfy it directly.
type Process interface {
	// PID is the process id as the host sees it (in-container pid for sandboxes).
	PID() int
	// Stdout is the output stream (stdout and stderr merged for a PTY). Reads
	// return io.EOF once the process and every writer closed it.
	Stdout() io.Reader
	// Stderr is the error stream, or nil for a PTY.
	Stderr() io.Reader
	// Write sends data to the process's stdin.
	Write(p []byte) (int, error)
	// CloseStdin closes stdin (EOF for a pipe; a PTY host sends ^D).
	CloseStdin() error
	// Resize changes the terminal size of a PTY process; an error otherwise.
	Resize(ctx context.Context, cols, rows int) error
	// Wait blocks until the process has exited and returns its exit code, or
	// the name of the signal that ended it (e.g. "SIGKILL") with code -1.
	Wait(ctx context.Context) (exitCode int, signal string, err error)
	// Kill ends the whole process tree: SIGTERM, then SIGKILL after grace.
	Kill(ctx context.Context) error
}

// Signaler is implemented by a Process that can deliver one signal to its
// process tree (process kill with a signal). Kill stays the way to end a
// tree (TERM, then KILL after a grace).
type Signaler interface {
	Signal(ctx context.Context, sig syscall.Signal) error
}
