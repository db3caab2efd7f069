// Package audit keeps the daemon's audit trail: an append-only log of
// JSON lines under <state>/audit, one record per fact (a command asked
// for, the guard's verdict, an approval, a session's start and end, a
// file transfer, a sandbox's lifecycle, the daemon's start and stop), in
// one schema (Record) whatever the front door or the host.
//
// Each line carries the SHA-256 of its own content and of the line before
// it, so an edited, removed, reordered or cut line is found by Verify,
// which names the first bad line. Segments rotate by size; the first
// record of a new segment names the last hash of the one before, so the
// chain runs across them. docs/audit.md has the schema of every kind and
// its mapping to OCSF.
//
// The package imports the standard library, vocab and api only, so
// every layer (sessions, the daemon, the CLI) can write or read it.
package audit

import (
	"context"
	"time"
)

// Kind names what a record is about.
type Kind string

// Kinds of record (docs/audit.md).
const (
	KindExecRequest     Kind = "exec.request"      // a command was asked for (before anything ran)
	KindExecRefused     Kind = "exec.refused"      // refused before it ran (bad input, a quota, security deny)
	KindGuardDecision   Kind = "guard.decision"    // the command guard's verdict and the rule behind it
	KindApprovalRequest Kind = "approval.request"  // a command waits for a human
	KindApprovalDecide  Kind = "approval.decision" // a human (or the approval hook) decided
	KindApprovalOutcome Kind = "approval.outcome"  // what the waiting command did with it (run, deny, expired)
	KindSessionStart    Kind = "session.start"     // the command started on its host
	KindSessionExit     Kind = "session.exit"      // the command ended
	KindProcessAction   Kind = "process.action"    // input written to a session, a signal sent, a session removed
	KindFileTransfer    Kind = "file.transfer"     // a file moved in or out of a sandbox, or was removed
	KindSandbox         Kind = "sandbox"           // a sandbox was created, removed, paused, resumed...
	KindNodeRefused     Kind = "node.refused"      // a node was refused at its hello
	KindDaemonStart     Kind = "daemon.start"      // the daemon started (with its configuration's hash)
	KindDaemonStop      Kind = "daemon.stop"       // the daemon stopped
)

// Kinds lists every kind, for flag help and checks.
var Kinds = []Kind{KindExecRequest, KindExecRefused, KindGuardDecision, KindApprovalRequest, KindApprovalDecide,
	KindApprovalOutcome, KindSessionStart, KindSessionExit, KindProcessAction, KindFileTransfer, KindSandbox, KindNodeRefused,
	KindDaemonStart, KindDaemonStop}

// Record is one fact. Seq, Time, Prev and Hash are set by Log.Append; the
// rest by the caller. Exactly one of the kind-specific fields is set,
// matching Kind (none for daemon.stop).
type Record struct {
	Seq  int64     `json:"seq"`
	Time time.Time `json:"time"`
	Kind Kind      `json:"kind"`
	// Actor is who asked: the socket peer, the token, the daemon itself.
	Actor Actor `json:"actor"`
	// Scope is the agent and session key the fact belongs to.
	AgentID    string `json:"agentId,omitempty"`
	SessionKey string `json:"sessionKey,omitempty"`
	SessionID  string `json:"sessionId,omitempty"`
	// RequestID ties the records of one exec request together (request,
	// guard, approval, session start and exit).
	RequestID string `json:"requestId,omitempty"`
	// Host is where the command runs (sandbox | gateway | node), Node the
	// node it runs on; DaemonHost the machine that wrote the record.
	Host       string `json:"host,omitempty"`
	Node       string `json:"node,omitempty"`
	DaemonHost string `json:"daemonHost"`

	Exec     *Exec     `json:"exec,omitempty"`
	Guard    *Guard    `json:"guard,omitempty"`
	Approval *Approval `json:"approval,omitempty"`
	Session  *Session  `json:"session,omitempty"`
	Process  *Process  `json:"process,omitempty"`
	File     *File     `json:"file,omitempty"`
	Sandbox  *Sandbox  `json:"sandbox,omitempty"`
	Daemon   *Daemon   `json:"daemon,omitempty"`

	// Prev is the hash of the record before (across segments); "" for the
	// very first record of a log.
	Prev string `json:"prev"`
	// Hash is the SHA-256 (hex) of this line without its hash field; it is
	// written last on the line (see Log.Append).
	Hash string `json:"hash,omitempty"`
}

// Actor is who a record's fact was done for.
type Actor struct {
	// Via is the front door: "socket" (a local peer), "tcp" (the daemon's
	// token), "agent-token", "approver-token", "console", "hook", "daemon", "cli" (a
	// sandboxctl command that acted itself; UID is the owner of the event it
	// spooled).
	Via string `json:"via"`
	// Token names the token used: "tool", "approver", or the agent id an
	// agent token is pinned to. Never the token itself.
	Token string `json:"token,omitempty"`
	// UID and PID are the socket peer's, as the kernel reported them.
	UID *int `json:"uid,omitempty"`
	PID int  `json:"pid,omitempty"`
}

// Exec is the command of exec.request and exec.refused.
type Exec struct {
	Command string `json:"command"`
	// Argv is what really runs when it is known (the guard's rewritten
	// command, the shell's argv).
	Argv []string `json:"argv,omitempty"`
	// EnvNames are the names of the variables the request set; values are
	// never recorded.
	EnvNames   []string `json:"envNames,omitempty"`
	Cwd        string   `json:"cwd,omitempty"`
	Security   string   `json:"security,omitempty"`
	Ask        string   `json:"ask,omitempty"`
	PTY        bool     `json:"pty,omitempty"`
	Background bool     `json:"background,omitempty"`
	Elevated   bool     `json:"elevated,omitempty"`
	// Error is why an exec.refused was refused.
	Error string `json:"error,omitempty"`
}

// Guard is the command guard's verdict (guard.decision).
type Guard struct {
	Decision string `json:"decision"` // run | deny | approval-pending
	// Rule is what made the decision, as the guard states it ("allowlist
	// satisfied", "security is full", "/usr/bin/curl is not allowlisted
	// (...)", "path outside the workspace: ...").
	Rule     string `json:"rule,omitempty"`
	Security string `json:"security,omitempty"` // the effective modes it judged under
	Ask      string `json:"ask,omitempty"`
	Command  string `json:"command,omitempty"` // the command as it will run, when the guard rewrote it
	Confine  bool   `json:"confine,omitempty"`
}

// Approval is an approval request, decision or outcome: an event about
// one api.ApprovalRequest, named by its ID (and Slug, and Command for the
// request), not a copy of it. Every member may be left out (a decision
// names the id it was given only), so the lines, and the hashes chained
// over them, stay what they were.
type Approval struct {
	ID       string `json:"id,omitempty"`
	Slug     string `json:"slug,omitempty"`
	Command  string `json:"command,omitempty"`
	Decision string `json:"decision,omitempty"` // allow-once | allow-always | deny (decision); run | deny (outcome)
	Reason   string `json:"reason,omitempty"`
	Expired  bool   `json:"expired,omitempty"`
}

// Session is a session's start or exit.
type Session struct {
	Command string `json:"command,omitempty"`
	Cwd     string `json:"cwd,omitempty"`
	PID     int    `json:"pid,omitempty"`
	// Exit only:
	Status      string `json:"status,omitempty"` // completed | failed
	ExitCode    *int   `json:"exitCode,omitempty"`
	Signal      string `json:"signal,omitempty"`
	Reason      string `json:"reason,omitempty"`
	DurationMs  int64  `json:"durationMs,omitempty"`
	OutputBytes int64  `json:"outputBytes,omitempty"`
}

// Process is a process tool action on a session (process.action).
type Process struct {
	Action string `json:"action"` // write | send-keys | paste | submit | kill | remove
	Signal string `json:"signal,omitempty"`
	// Bytes and SHA256 describe the input written; its content is never
	// recorded.
	Bytes  int64  `json:"bytes,omitempty"`
	SHA256 string `json:"sha256,omitempty"`
}

// Direction of a file transfer.
const (
	DirectionIn     = "in"     // into the sandbox (upload)
	DirectionOut    = "out"    // out of the sandbox (download)
	DirectionRemove = "remove" // removed inside the sandbox
)

// File is a file transfer (file.transfer).
type File struct {
	Path      string `json:"path"`
	Direction string `json:"direction"`
	Format    string `json:"format,omitempty"` // raw | tar
	Bytes     int64  `json:"bytes"`
	// SHA256 is the digest of the bytes that crossed the API (the file's
	// content, or the tar stream), computed while streaming.
	SHA256 string `json:"sha256,omitempty"`
	// Error is set when the transfer failed part way.
	Error string `json:"error,omitempty"`
}

// Sandbox is a sandbox lifecycle action (sandbox).
type Sandbox struct {
	Action string `json:"action"` // create | remove | pause | resume | extend | expire | ...
	ID     string `json:"id,omitempty"`
	Name   string `json:"name,omitempty"`
	Error  string `json:"error,omitempty"`
}

// Daemon is the daemon's start or stop.
type Daemon struct {
	Version string `json:"version,omitempty"`
	PID     int    `json:"pid"`
	// ConfigSHA256 is the hash of the effective configuration (its JSON).
	ConfigSHA256 string `json:"configSha256,omitempty"`
	Node         string `json:"node,omitempty"` // node refused: its id, name and remote address
	Remote       string `json:"remote,omitempty"`
	Error        string `json:"error,omitempty"`
}

// Recorder appends records: Log, or Nop. Record fills Seq, Time, Prev and
// Hash. An error means the record is not in the log (and, with onFailure
// refuse, the caller must not go on with what it records).
type Recorder interface {
	Record(ctx context.Context, r Record) error
}

// Nop records nothing (audit.enabled false).
type Nop struct{}

// Record implements Recorder.
func (Nop) Record(context.Context, Record) error { return nil }

type actorKey struct{}

// WithActor returns ctx carrying a, for the records made on its behalf.
func WithActor(ctx context.Context, a Actor) context.Context {
	return context.WithValue(ctx, actorKey{}, a)
}

// ActorFrom returns the actor of ctx; without one, the daemon itself.
func ActorFrom(ctx context.Context) Actor {
	if a, ok := ctx.Value(actorKey{}).(Actor); ok {
		return a
	}
	return Actor{Via: "daemon"}
}
