// Package sessions is the hub of sandboxctl: it implements the two tools
// agents call, exec and process (SPEC §2, §3), over one Host interface that the
// sandbox, gateway and node hosts implement. It owns the session registry
// (readable ids, scoping by sessionKey/agentId, capped output buffers, the TTL
// sweeper, exit events) and the yield/background/timeout logic.
package sessions
