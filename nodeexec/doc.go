// Package nodeexec owns remote node hosts: the node agent that dials out to a
// gateway (`sandboxctl node run`) and the gateway-side registry and client
// that route exec requests to it. A node re-evaluates every request with its
// own guard and approvals; nothing the gateway claims about approval counts.
//
// # Pieces
//
// Gateway side: a Registry (NewRegistry) serves the daemon's WebSocket
// endpoint (Registry.Handler at ConnectPath, /v1/nodes/connect), lists the
// nodes (Registry.List, for GET /v1/nodes and `sandboxctl node ls`), starts
// commands on them (Registry.Start → *RemoteProcess, whose method set is
// exactly sessions.Process), and lists and resolves the approvals pending on
// them (Registry.Approvals, Registry.ResolveApproval).
//
// Node side: RunAgent dials the gateway, says hello, and runs what it is
// asked to — after its own checks — with a hostexec.Runner, until its
// context ends; it reconnects with exponential backoff (jittered) when the
// link drops.
//
// # Security
//
//   - The node authenticates with `Authorization: Bearer TOKEN` on the
//     WebSocket handshake; the gateway compares it in constant time
//     (TokenEqual: SHA-256 of both, then subtle.ConstantTimeCompare) and
//     answers 401 before any WebSocket exists. A peer that has not
//     authenticated never gets a link, so it can neither register nor run
//     anything. A plain-HTTP handshake from a non-loopback peer gets 403.
//   - The node requires wss:// unless the gateway is on a loopback address
//     (ErrInsecureURL). With AgentOptions.TLSFingerprint the gateway's leaf
//     certificate must hash (SHA-256 of the DER) to the pinned value,
//     checked in tls.Config.VerifyConnection (ErrFingerprintMismatch);
//     without it the certificate is verified against the system roots (or
//     AgentOptions.RootCAs). A refused token or certificate stops the agent
//     (no reconnect loop).
//   - The node only acts on frames that arrive after the gateway's welcome,
//     on a link it dialed and verified itself.
//   - Both ends set the WebSocket read limit to MaxFrameBytes (1 MiB) and
//     validate every frame: ids, argv count and size, rawCommand, env size,
//     terminal size, modes (RunParams.validate, Hello.validate). Output goes
//     in chunks of at most MaxOutputChunk, stdin of at most MaxStdinChunk.
//
// # What a node checks, in order
//
//  1. approved / approvalDecision in the request are dropped (logged):
//     only the node's own approvals.json counts (OpenClaw #8682).
//  2. The request's shape and sizes.
//  3. envguard.CheckRequest(vocab.HostNode, env): blocked keys and any
//     PATH override are refused.
//  4. rawCommand must describe argv exactly (CheckRawCommand, CVE-2026-26325):
//     empty, or FormatArgv(argv), or — for [sh -c SCRIPT] — SCRIPT byte for
//     byte. What runs is always argv itself (FormatArgv(argv) under the
//     node's shell; a redundant outer `sh -c` is peeled when argv[0] is the
//     same file as that shell). FormatArgv quotes with syntax.Quote in its
//     POSIX variant (internal/shellword), since that shell may be dash; an
//     argv word with no POSIX form (NUL, controls other than newline and
//     tab) is refused (shellword.ErrUnquotable).
//  5. The working directory: one that does not exist on the node falls back
//     to the node's default, with a warning in the start answer.
//  6. The node's Guard (PolicyGuard over hostexec/guard and the node's
//     approvals.json): security min(node, gateway), ask max(node, gateway),
//     analysis on the node's PATH, the node's allowlist, approvals bound to
//     the exact line, argv, cwd, agent and env hash. A pending approval is
//     stored on the node; once a human resolves it (from the gateway's
//     approvals surface, which reaches the node over the link), repeating
//     the same request runs it (allow-once is used up by that run).
//
// Every refusal comes back as a denied frame with the node's reason
// (Registry.Start: *DeniedError, errors.Is ErrDenied); a pending approval as
// an approval-pending frame (*ApprovalPendingError, ErrApprovalPending).
// Nothing runs in either case.
//
// # Protocol
//
// One JSON object per WebSocket text message (frame), field "type":
//
//	node → gateway  hello {protocol, nodeId, name, platform, version, capabilities
//	                       [system.run, system.which, system.execApprovals],
//	                       approvals {security, ask, askFallback, pending, allowlist},
//	                       workdir, running [{runId, pid, running, command, owner,
//	                       sessionId, agentId, sessionKey, cwd, pty, stdin, startedAtMs}]}
//	gateway → node  welcome {reason?, resume [{runId, stdout, stderr, adopt}]}
//	                       (a reason means refused; runs not in resume are ended)
//	gateway → node  run {runId, run: system.run {argv, rawCommand, cwd, env, timeoutMs,
//	                       agentId, sessionKey, runId, idempotencyKey, security, ask,
//	                       tty, cols, rows, keepStdin, owner, sessionId}}
//	node → gateway  started {runId, started {pid, pty, cwd, warnings, reattached}}
//	                | denied {runId, reason} | approval-pending {runId, reason, approval}
//	                | error {runId, reason}
//	node → gateway  output {runId, stream stdout|stderr, offset, data (base64)}
//	node → gateway  kept {runId, data, kept {stdout, stderr, dropped}}   (adopt only)
//	node → gateway  exit {runId, exit {code, signal, error}}
//	gateway → node  stdin {runId, data} | stdinClose {runId} | resize {runId, cols, rows}
//	                | kill {runId}
//	gateway → node  approvals.list {reqId} | approvals.resolve {reqId, approvalId, decision}
//	                | system.which {reqId, names}
//	node → gateway  reply {reqId, approvals | paths | error, reason}
//
// The member names above are the wire's and never change: nodes and
// gateways are released separately. Go names may differ where they follow
// the start spec (sessions/hostapi.StartSpec): RunParams.PTY is sent as
// "tty", RunParams.Dir and RunState.Dir as "cwd", RunState.KeepStdin as
// "stdin" (testdata/run-frames.golden holds the bytes). An approval
// (approval-pending, the reply to approvals.list) is api.ApprovalRequest
// with nodeId, node, security and ask.
//
// Liveness: both ends send WebSocket pings every PingInterval (default 15 s)
// and drop the link when one goes unanswered for as long.
//
// # Idempotency, lost links, reconnects
//
// The gateway gives every system.run a runId and an idempotencyKey. The node
// remembers key → run for IdempotencyTTL (10 min): a repeated request never
// starts a second process; it gets the first answer again (re-attaching to
// the running process, or its exit). Registry.Start resends under the same
// key when the link drops before the node answered and comes back within
// the link grace.
//
// When a link drops, the node keeps its runs. With a host supervisor
// (AgentOptions.Supervisor, what `sandboxctl node run` uses) their output and
// exit wait on disk; without one the agent buffers them (up to 1 MiB per run;
// beyond that output is dropped with a marker). The gateway keeps the
// RemoteProcesses. If the node is back within the grace (LinkGrace, default
// 10 s on both ends), its hello lists what it holds, the welcome's resume
// list says which runs the gateway keeps and how many bytes of each stream
// it has, the node ends the others and sends the rest. Every output frame
// carries its stream offset, and the gateway drops bytes it already has: no
// byte is shown twice; a supervised run sends again, from the gateway's
// offsets, what the dying link swallowed (up to 256 KiB per stream).
// Otherwise the node kills every process it started (the whole tree,
// through hostexec's process group and run tag) and the gateway fails each
// run (Wait returns an error wrapping ErrLinkLost: "the link to node X was
// lost (...) and not restored within 10s; the node kills what it
// started") — unless the node's runs outlive its agent (CapDurableRuns: a
// host supervisor keeps them): an agent that died kills nothing, so such a
// run is not failed but stays unfinished with its state unknown
// (RemoteProcess.Doubt) until the node reconnects. A node that comes back
// without a run the gateway still tracks fails that run at once.
//
// # Durable runs: agent and gateway restarts
//
// A node agent with a host supervisor (package hostsup, serving
// SupervisorDir(StateDir)) runs each command as a supervisor session named
// by its run tag, with what the gateway sent (run id, idempotency key,
// owner mark, session id, agent, session key, command, cwd, deadline) in the
// session's meta. A SIGKILLed agent leaves its commands running there; the
// next agent on the state directory (agent.lock: one at a time) lists them
// as held runs, reports them in its hello, and attaches each in the
// supervisor from the offsets the welcome gives, so the gateway's run goes
// on with nothing lost or repeated. A run that ended meanwhile reports its
// exit; one whose supervisor died too was ended by hostsup's sweep and
// reports why it was lost. Held runs that no gateway keeps within the link
// grace are ended.
//
// A restarted gateway (a new Registry with the same RegistryOptions.Key)
// adopts the runs of its earlier incarnation: every run carries an owner
// mark, the Registry's epoch and an HMAC-SHA256 under Key of (epoch, node
// id, run id, session id, agent id, session key). A reported run whose mark
// verifies for exactly those fields, of another epoch, is adopted: the
// welcome says adopt, the node sends the output its supervisor kept (a kept
// frame, at most 512 KiB; older bytes count as dropped) and then what
// follows, and Registry.Adoptions hands the run to the sessions (the node
// host's sessions.HostCaps.Later), under its session id and scope. Anything
// else a node reports is ended: a node holding the node token cannot plant
// a session in another agent's scope.
package nodeexec
