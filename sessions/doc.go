// Package sessions is the hub of sandboxctl: it implements the two tools
// agents call, exec and process (docs/tools.md), over one Host interface that the
// sandbox, gateway and node hosts implement. It owns the session registry
// (readable ids, scoping by sessionKey/agentId, capped output buffers, the TTL
// sweeper, exit events) and the yield/background/timeout logic.
//
// Decisions where the specification leaves room (each is covered by a test):
//
//   - Errors versus results. Bad input (docs/tools.md, "Bad input") is a Go error matching
//     ErrInvalidInput (an *InputError naming the field). Refusals — security
//     mode, allowlist, missing approver, elevated not allowed — are a Result
//     with details.status "denied" and a reason. An unknown or foreign session
//     id is a Result with the text "No session found for ID" and
//     details.error "not_found" (Result.Err maps it to ErrNoSession).
//   - Scope. scopeKey = the pair (agentId, sessionKey): two agents using the
//     same sessionKey never share sessions; a sessionKey and an agentId with
//     the same value are different scopes.
//     Only backgrounded sessions are visible to the process tool, and a
//     streamed exec's session by its id while the stream follows it
//     (write, resize, kill; it is not listed).
//   - Elevated. Needs elevated.enabled and the agentId listed in
//     elevated.allowFrom; an empty allowFrom allows nobody, "*" allows every
//     agent.
//   - Guard. Without a Guard the Manager fails closed: deny refuses
//     everywhere, ask=always is refused ("no approver is configured"), and the
//     gateway and node hosts run only security full (allowlist is refused:
//     "allowlist not available: the command guard is not configured").
//   - Stdin. A foreground non-PTY run sees EOF on stdin at once; background,
//     explicit-yieldMs and PTY runs keep it open for process write.
//   - Lifetime. Sessions run on the Manager's lifetime: a caller whose ctx
//     ends during the yield window gets a "running" result and the command
//     continues in the background. Close kills every running session.
//   - Timeouts. timeout 0 or absent means the configured timeoutSec; a run
//     that becomes a background session with no explicit timeout has none
//     (unless exec.backgroundTimeoutSec is set).
//   - Output. Invalid UTF-8 bytes become U+FFFD, UTF-8-encoded surrogates and
//     Unicode format characters are dropped; the aggregated output keeps the
//     most recent maxOutputChars with a "[... N chars dropped ...]" note.
//   - The process tool's signal field is accepted but not used: kill always
//     ends the whole tree with SIGTERM, then SIGKILL after the host's grace.
package sessions
