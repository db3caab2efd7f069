// Package supervisor is sandboxctl's in-container supervisor and the host
// side's client for it.
//
// Every supervised sandbox runs cmd/sandboxctl-supervisor (a static binary,
// std + golang.org/x/sys only) as its main process, pid 1 (no docker-init:
// see "Who can reach the stream" below). It is
// delivered in a derived image (the configured image plus the binary at
// /.sandboxctl/supervisor, built through the Engine's build API), so it
// needs no registry, no bind mount and nothing from the image but a Linux
// kernel. sandboxctl reaches it through the Engine's attach stream of that
// main process (stdin + stdout + stderr, no TTY): no container network is
// involved, so sandboxes keep `network: none` and a remote DOCKER_HOST
// works. The Engine multiplexes the container's stdout and stderr with its
// 8-byte stdcopy headers (Demux splits them); stdout carries the server's
// frames, stderr its diagnostics, stdin the client's frames.
//
// # Local socket
//
// The server also accepts clients on a unix socket in its state directory
// (/run/sandboxctl/supervisor.sock, mode 0600), speaking the same frames.
// A daemon on the Engine's host reaches it through /proc/<container init
// pid>/root/… (resolved with openat2 RESOLVE_IN_ROOT, so symlinks stay
// inside the sandbox) and so skips the Engine's attach copy, which bounds
// throughput at ~100 MB/s; a remote or unprivileged daemon uses the attach
// stream. Both ends check the other with SO_PEERCRED. The server takes only
// peers its pid namespace cannot show (pid 0): processes outside the
// sandbox's pid namespace, which keeps out every process of the sandbox.
// The client trusts the socket only if its holder is in the container's
// cgroup and is the container's init (the supervisor, pid 1) or, for
// containers made before the supervisor became pid 1, the first-started
// child of docker-init; a sandbox process that replaces the file fails
// that, and the client uses the attach stream.
//
// # Who can reach the stream
//
// The attach stream is unauthenticated: whoever can write the supervisor's
// stdin speaks for the daemon, and whoever can write its stdout speaks for
// the supervisor. So only the supervisor holds it. It is pid 1 of the
// container (docker-init, dumpable, held the stream as its fd 0 and let
// any process of the sandbox open /proc/1/fd/0), and it makes itself not
// dumpable at start, before any command runs.
//
// Not dumpable is not enough everywhere: gVisor's /proc ignores the flag,
// and a command of the supervisor's uid wrote forged Output and Exit
// frames into /proc/1/fd/1. So under a sandbox identity (IdentityArg,
// Identity; package sandbox hands them out) the supervisor and the
// commands have different uids: the container starts the supervisor as
// root with only SupervisorCaps, it empties its bounding set, becomes the
// supervisor uid keeping SETUID, SETGID, KILL, SYS_PTRACE and
// DAC_OVERRIDE, which reads a command's 0400 /proc files (BecomeSupervisor) and forks every command as the command uid
// (ServerOptions.Credential), which holds no capability. Both runc and
// gVisor then refuse a command /proc/1/fd/*, /proc/1/mem and signals to
// pid 1 by owner. gVisor still shows a command /proc/1/environ: it holds
// the container's environment, which every command gets as well, and no
// key. Without an identity (a configured sandbox user) commands share the
// supervisor's uid, the container has no capabilities (CapDrop ALL,
// enforced by the config check) and only the non-dumpable flag keeps them
// from /proc/1/fd on runc.
//
// Commands get fresh pipes or a pseudo-terminal as fds 0-2 and every other
// descriptor of the supervisor is close-on-exec, so none inherits the
// stream. Recovery takes a session's owner from the labels the daemon put
// on the container, not from the session's metadata (package sandbox,
// sessionOwner).
//
// The newest Hello wins across both transports; a superseded socket client
// gets the HelloAck of its successor and is closed, and a socket client
// that hangs up leaves its commands running, detached, for the next client
// to re-attach. A bad frame closes a socket connection (the attach stream
// resynchronises instead, see below). Bulk output goes raw on the socket
// (compressing costs more than it saves).
//
// # Framing
//
// Both directions carry frames:
//
//	magic  u8   0xA5
//	type   u8   see below
//	stream u32  big endian: command stream id or request id (0 = connection)
//	len    u32  big endian payload length, at most 4 MiB
//	payload
//
// Client → server:
//
//	Hello       {version, client nonce, deflate}            stream 0
//	Open        OpenSpec (argv, env, dir, tty, cols, rows,   new stream id
//	            stdin, id/tag, meta, window)
//	Attach      {id, stdout offset, stderr offset, window}  follow an existing session on this stream
//	Stdin       raw bytes                                   stream
//	StdinClose  EOF (^D on a terminal)                      stream
//	Resize      {cols, rows}                                stream
//	Window      u32 more output credit in bytes             stream
//	Detach      stop following; the command runs on         stream
//	Signal      {id, signal | tree + graceMs}               request id → Result | Error
//	List / Read / Forget / Ping                              request id → Result | Error
//
// Server → client:
//
//	HelloAck    {version, client nonce, pid, dir, socket,   stream 0, to the new client and the one it supersedes
//	            stdinAcks, relay}
//	Started     {id, pid, startedAtMs}                      answers Open and Attach
//	Output      [1 stdout | 2 stderr] + data                stream
//	OutputZ     [stream] + u32 raw length + DEFLATE data     stream (bulk output, only after Hello.deflate)
//	Status      {inputWait}                                 stream, on every change
//	StdinAck    u32 stdin bytes the command took            stream (when HelloAck.stdinAcks)
//	Exit        {code, signal, endedAtMs}                   stream; nothing follows
//	Error       UTF-8 message                               stream or request id
//	Result      request-specific payload                    request id
//
// The client allocates stream and request ids from one counter. Many
// commands share the connection. Open and Attach bind a session to a
// stream id of the current connection, and are refused (nothing starts)
// when their connection has been superseded; a session's frames go to the
// connection it is bound to, and the answer to a request goes to the
// connection that sent it, so nothing meant for one client reaches the
// next under the same id.
//
// # Wire names are fixed
//
// The JSON member names of the payloads are a protocol between two
// binaries released separately: a daemon talks to supervisors already
// running in containers it did not start, so a name once sent is never
// renamed. The Go names follow the start spec used everywhere else
// (sessions/hostapi.StartSpec): OpenSpec.PTY and OpenSpec.KeepStdin (and
// SessionInfo's) are sent as "tty" and "stdin", their names of the first
// protocol version; testdata/start-spec.golden holds the bytes.
//
// # Flow control
//
// Each command has an output credit (4 MiB by default, raw bytes) that the
// server spends as it sends output and the client returns in Window frames
// as the reader consumes (in quarter windows). A command whose reader does
// not keep up stops being read, so it blocks on a full pipe: neither side
// buffers more than the window, whatever the output size. Bulk chunks
// (≥ 16 KiB) are sent DEFLATE-compressed when that shrinks them below 90%
// (the Engine's attach copy, not the supervisor, bounds throughput; after
// a chunk that does not shrink, 16 chunks go raw).
//
// Stdin flows the other way under the same rule. Stdin queued for a
// command is capped at 8 MiB; beyond that the server drops a Stdin frame
// with an Error. A server that says stdinAcks in its HelloAck returns
// each Stdin frame's bytes in a StdinAck once the command took them (or
// once they were dropped because it closed its stdin), and the client
// keeps at most 4 MiB (StdinWindow, half the queue) unacked per stream: a
// Write waits for credit, up to 30 s, so a command that reads late holds
// its writer back instead of losing input. A Write that fits the window
// waits for all of its credit before it sends anything, so that one that
// times out sent nothing and may be retried whole (ErrStdinNotTaken). On
// reconnect the credit starts anew (the old connection's acks may never
// come; the queue's other half absorbs them).
//
// # Connections, takeover and reconnect
//
// The Engine copies every attached client's stdin into the one stdin of the
// main process and the server's stdout to every attached client. The newest
// Hello wins: it unbinds every stream of the previous connection (their
// commands run on, detached), and its HelloAck, seen by all, tells an older
// client that it has been superseded (it stops; ErrSuperseded). A frame
// with a bad magic makes the server skip to the next Hello.
//
// A client whose connection breaks reconnects with backoff and re-attaches
// every command it follows with the byte counts it received per stream; the
// server replays the rest from the session's log, so nothing is lost or
// repeated (beyond the log cap), and then streams live again. A command
// ending while nobody is attached keeps its exit status for the next client.
//
// # Sessions and durability
//
// The server keeps each session under /run/sandboxctl/<id>/ (a tmpfs in the
// default sandbox config; falling back to /tmp/.sandboxctl, then
// /dev/shm/.sandboxctl, then memory): meta.json (argv, dir, tty, meta
// such as agentId and sessionKey, pid, start time, byte counts), output.0
// and output.1 (the output log: records [stream u8][len u32][data], two
// segments used in turn, keeping all output up to the cap, 512 KiB by
// default, then the last 512 KiB–1 MiB; List says how much is gone:
// SessionInfo.Dropped and DroppedNote; their space is reserved before the
// start is reported, and the next session's ahead of it: the server keeps
// a spare session directory, .spare-log, with both files reserved, made
// after a start or recycled from a forgotten session (what it wrote
// zeroed), which the next session renames to its id), and exit ({code,
// signal, endedAtMs}) once it ended. List returns every session, running or
// finished (the newest 256 finished ones are kept until Forget, which
// answers once the session's files are gone: an Open of its id before
// then is refused); Read
// returns a session's kept output (after two big-endian int64: the stdout
// and stderr byte counts it covers, the offsets to Attach from). A
// restarted daemon lists, reads and re-attaches, so its sessions survive.
// meta.json and exit are replaced atomically, and written before the
// client hears of the start or the end they record; on a disk they are
// also fsynced, on a tmpfs not (a crash of the machine empties it anyway).
//
// # Processes
//
// Commands are forked (pipes, or a pseudo-terminal the server allocates;
// setsid + controlling tty; as the command uid under a sandbox identity,
// which also changes into the working directory and, for a PATH
// directory the supervisor may not search, looks the command up in the
// launcher), each in its own process group, with
// SANDBOXCTL_RUN=<session id> in the environment. In the container they
// start through the supervisor binary itself (ServerOptions.Launcher,
// `supervisor --launch PATH ARGV...`), which sets its oom_score_adj to
// ChildOOMScoreAdj and execs the command: when the sandbox runs out of
// memory the kernel kills commands before the supervisor (raising a score
// needs no privilege, lowering the supervisor's would). Once a command
// has started, the server keeps one spare launcher ready (SpareLaunchArg:
// forked, its runtime up, its score raised, non-dumpable while it waits)
// and hands it each next command's descriptors and argv over a socket, so
// a command does not wait for a Go runtime to start: the spare forks it as
// the server's child (CLONE_PARENT) and waits for the next. Where it
// cannot fork (the pids limit, gVisor), it runs the command in its own
// pid and a new spare follows. A spare that is gone (killed, or never
// started at the pids limit) costs nothing: the command forks through the
// launcher. One that took a command and then stops answering is killed,
// and the open fails instead of starting the command a second time. The
// sweep of orphans spares it; Shutdown ends it. The server is pid
// 1 and a child subreaper, so orphans (setsid escapees, daemons) reparent
// to it and are reaped. A tree kill signals the process group, every
// descendant of the leader by parent links and every process whose
// /proc/PID/environ carries the tag: SIGTERM, then SIGKILL after the grace,
// repeated until nothing is left. When a command's leader exits, what it
// left behind gets that tree kill (LeftoverGrace), and every orphan of pid
// 1 that no running session claims (by leadership or tag) is killed: a
// finished session keeps nothing running. On SIGTERM (docker stop) the
// server ends every tree and exits.
//
// # Files
//
// The files API (package sandbox: StatFile, ListFiles, ReadFiles,
// WriteFiles, WriteFile, RemoveFile) adds no frame type: it runs the
// supervisor binary's file tool as an ordinary command of the sandbox
// (Open with argv [/.sandboxctl/supervisor --files OP ARGS... PATH], meta
// "sandboxctl.files" = OP), so every path is resolved by the kernel inside
// the container's root and mount namespace (workspace bind, tmpfs mounts;
// a symlink to / is the sandbox's /), with the sandbox user's permissions,
// limits and pid namespace, and never on the daemon's host. Its data
// travels as the command's output (under the output window) and stdin.
// Ops (stdout, then exit code):
//
//	stat PATH              JSON api.FileInfo (lstat: a symlink as itself)
//	list MAX PATH          JSON api.FileList, at most MAX entries (Truncated)
//	get MAX PATH           tar of PATH named from its base name (docker cp);
//	                       fails before writing when files exceed MAX bytes
//	put MAX DIR            extract a tar from stdin into the existing DIR:
//	                       files, dirs, symlinks; no entry with "..", an
//	                       absolute name, or a parent that is a symlink;
//	                       files are staged in .sandboxctl-upload-* temps
//	                       and committed only once the whole archive (end
//	                       marker, within MAX) arrived: else nothing changes
//	write MAX MODE PATH    stdin → PATH (temporary file + rename: a symlink
//	                       at PATH is replaced, never followed)
//	rm PATH                remove PATH recursively (never /)
//
// Exit codes: 0 ok, 2 not found, 3 over MAX, 4 invalid, 5 permission
// denied, 1 other; stderr has the message. put and write acknowledge on
// stdout every FilesAckEvery bytes consumed (the running total, decimal,
// one line); the client keeps at most 4 MiB unacknowledged, under the
// stdin queue cap, so uploads of any size flow. The client forgets the
// session when done; a restarted daemon kills and forgets file tool
// sessions instead of adopting them.
//
// # Relay
//
// Previews (package sandbox, Manager.DialPort) reach a port that a
// program of the sandbox listens on, on the sandbox's own loopback, which
// exists without a network; no port is published on the Engine's host.
// Like the file tool they add no frame type: the relay is the supervisor
// binary run as an ordinary command (Open with argv
// [/.sandboxctl/supervisor --relay PORT], stdin, meta "sandboxctl.relay"
// = PORT). It connects to 127.0.0.1:PORT (then [::1]:PORT), writes the
// line "connected" on stderr, then copies stdin to the connection and the
// connection to stdout, under the usual output window and stdin credit;
// StdinClose half-closes the connection, and the relay exits 0 once the
// port's side ended. Exit codes: 2 nothing listens (connection refused),
// 4 invalid port, 1 other; stderr has the message. One relay serves one
// connection; the client kills and forgets it when the connection ends,
// and a restarted daemon kills and forgets relay sessions instead of
// adopting them. A server says in HelloAck.Relay that its binary has the
// relay; a client never runs it on a server that does not (an older
// binary would take the argument for a server of its own).
//
// # Waiting for input
//
// Every 100 ms, for running sessions with an open stdin, the server looks
// for processes whose fd 0 is that stdin (readlink /proc/PID/fd/0) and
// asks the kernel what they are blocked in: /proc/PID/syscall showing read
// of fd 0, or poll/select whose set (read from /proc/PID/mem) holds fd 0
// for reading (busy-box `read` polls first); /proc/PID/wchan is the
// fallback. With nothing queued or pending in the pipe, two scans in a row
// make the session "waiting for input" (Status frame, SessionInfo.InputWait,
// Proc.InputWait); any write clears it.
package supervisor
