// Package hostapi is the contract between the session manager and its
// hosts (the sandbox, this machine, a remote node): the one start spec and
// the one Process every host returns. Standard library (and package vocab)
// only, so the host packages implement it without importing sessions.
package hostapi

import (
	"context"
	"errors"
	"io"
	"syscall"
	"time"

	"github.com/sandboxctl/sandboxctl/vocab"
)

// DefaultGatewayUID and DefaultGatewayGID are the identity gateway
// commands run as when the configuration names none (exec.envelope):
// outside the ranges useradd hands out (system accounts 100-999, people
// 1000-59999) and below the subordinate-id ranges (100000 on). Defined
// here, not in hostexec, so the configuration (and the light CLI that
// reads it) need not link the gateway's guard.
const (
	DefaultGatewayUID = 61000
	DefaultGatewayGID = 61000
)

// ErrEnded is wrapped by (or matches) the error a Process's output stream
// returns when the place the command ran in ended under it, e.g. its
// sandbox container was stopped or removed: the output ends there, as the
// exit status says. A normal end, not a fault of the daemon: logged at
// debug level.
var ErrEnded = errors.New("the command's environment ended")

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
	// Timeout, when > 0, is enforced by a host that can (a node kills the
	// tree when it expires); the Manager enforces its own timeouts anyway.
	Timeout time.Duration
	// Confine, when set, is the directory the gateway confines the command
	// to with Landlock (GuardVerdict.Confine): read and write there, read
	// and execute on the system directories, nothing else. Other hosts
	// ignore it.
	Confine string
	// Tag is the run tag of the command's process tree (SANDBOXCTL_RUN),
	// which a kill sweeps; "" = the host picks a fresh one.
	Tag string
	// StartWait, when > 0, is how long the caller waits for the host to
	// confirm the start once the command's place is ready (the yield window
	// or timeout): a host whose process starter does not answer by then
	// (a stopped supervisor) fails the start, and the command never runs.
	StartWait time.Duration
}

// Process is a started command, as every host returns it.
type Process interface {
	// PID is the pid as the machine the command runs on numbers it (inside
	// the container for a sandbox; see details.pid in package toolapi).
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

// Started is what a host's Start returns: the process and what the host
// knows about it.
type Started struct {
	Process
	// Warnings are shown in the exec result (a pending sandbox recreate, a
	// PTY or supervisor fallback).
	Warnings []string
	// InputWait, when set, tells from the kernel's view when the command
	// sits blocked reading a stdin nobody has written (supervised hosts);
	// nil when the host cannot tell.
	InputWait InputWaiter
	// Place says where the command runs, in words for the caller
	// (`Engine "e1"`, `node "n1"`); "" when the host has one place.
	Place string
	// Forget, when set, drops the finished session that the host keeps
	// across daemon restarts (a supervisor keeps output and exit status),
	// so a restarted daemon does not bring it back; nil when it keeps none.
	Forget func(ctx context.Context) error
	// Signal, when set, delivers one signal to the command's process tree
	// (process kill with a signal); nil when the host cannot. Kill stays
	// the way to end a tree (TERM, then KILL after a grace).
	Signal func(ctx context.Context, sig syscall.Signal) error
	// Doubt, when set, says why the command's state is unknown right now
	// (its host lost sight of it: its Engine or node stopped answering),
	// in words for the caller ("unknown: ...; the command may still be
	// running"), and "" while the host sees it; nil when the host never
	// loses sight of its commands. A session whose process is in doubt is
	// never reported failed for that: it stays running, with the doubt as
	// its reason, until the host sees its true end.
	Doubt func() string
}

// InputWaiter reports input waits of a started command.
type InputWaiter interface {
	// InputWait reports whether the command is blocked reading its stdin.
	InputWait() bool
	// InputWaitChanged is closed at the next change of InputWait.
	InputWaitChanged() <-chan struct{}
}
