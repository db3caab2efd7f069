package mcpserver

import (
	"context"
	"fmt"
	"github.com/sandboxctl/sandboxctl/api"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// SandboxSnapshots are the snapshot tools' way to the daemon
// (docs/snapshots.md): a Sandboxes that implements it also gets the tools
// snapshot, rollback and fork, for the caller's own scope.
type SandboxSnapshots interface {
	SnapshotScope(ctx context.Context, agentID, sessionKey, name string) (api.Snapshot, error)
	RollbackScope(ctx context.Context, agentID, sessionKey, snapshot string) (api.Sandbox, error)
	// ForkScope makes a sandbox for req's scope from the scope's sandbox.
	ForkScope(ctx context.Context, agentID, sessionKey string, req api.ForkRequest) (api.Sandbox, error)
}

// SnapshotParams is the input of snapshot.
type SnapshotParams struct {
	Name       string `json:"name,omitempty"`
	AgentID    string `json:"agentId,omitempty"`
	SessionKey string `json:"sessionKey,omitempty"`
}

// RollbackParams is the input of rollback.
type RollbackParams struct {
	Snapshot   string `json:"snapshot"`
	AgentID    string `json:"agentId,omitempty"`
	SessionKey string `json:"sessionKey,omitempty"`
}

// ForkParams is the input of fork.
type ForkParams struct {
	Snapshot      string `json:"snapshot,omitempty"`
	NewAgentID    string `json:"newAgentId,omitempty"`
	NewSessionKey string `json:"newSessionKey,omitempty"`
	AgentID       string `json:"agentId,omitempty"`
	SessionKey    string `json:"sessionKey,omitempty"`
}

var snapshotFields = map[string]string{
	"name":          "The snapshot's name (letters, digits, '.', '_', '-'); default snap-<time>.",
	"snapshot":      "The name of one of the sandbox's snapshots.",
	"newAgentId":    "The agent of the new sandbox; an agent's own session may only name itself.",
	"newSessionKey": "The session key of the new sandbox (session-scoped sandboxes).",
	"agentId":       "The agent whose sandbox to use.",
	"sessionKey":    "The session key, for session-scoped sandboxes.",
}

func addSnapshotTools(s *mcp.Server, ss SandboxSnapshots, id Identity) {
	scope := func(agent, session string) (string, string) {
		if id.pinned() {
			return id.AgentID, id.SessionKey
		}
		return agent, session
	}
	sandboxAnswer := func(verb string, sb api.Sandbox) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("%s sandbox %s (id %s, template %s, state %s).", verb, sb.Name, shortID(sb.ID), sb.Template, sb.State)}}, StructuredContent: sb}
	}
	mcp.AddTool(s, &mcp.Tool{Name: "snapshot", Annotations: &mcp.ToolAnnotations{Title: "Snapshot the sandbox", DestructiveHint: hint(false), OpenWorldHint: hint(false)},
		Description: "Keep the files of the agent's sandbox (workspace and /tmp) in a named snapshot, to roll back to or fork from. Running commands are frozen for the copy, not ended.",
		InputSchema: schemaFor[SnapshotParams](snapshotFields, id, allChoices)},
		func(ctx context.Context, req *mcp.CallToolRequest, in SnapshotParams) (*mcp.CallToolResult, any, error) {
			if err := checkArgs(req, snapshotFields); err != nil {
				return toolError(err)
			}
			agent, session := scope(in.AgentID, in.SessionKey)
			snap, err := ss.SnapshotScope(ctx, agent, session, in.Name)
			if err != nil {
				return toolError(err)
			}
			text := fmt.Sprintf("Snapshot %s of sandbox %s: %d files, %d bytes (%s).", snap.Name, snap.Origin, snap.Files, snap.Bytes, snap.Method)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}, StructuredContent: snap}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "rollback", Annotations: &mcp.ToolAnnotations{Title: "Roll the sandbox back", DestructiveHint: hint(true), OpenWorldHint: hint(false)},
		Description: "Put the agent's sandbox back to one of its snapshots: its files become the snapshot's and running commands end.",
		InputSchema: schemaFor[RollbackParams](snapshotFields, id, allChoices)},
		func(ctx context.Context, req *mcp.CallToolRequest, in RollbackParams) (*mcp.CallToolResult, any, error) {
			if err := checkArgs(req, snapshotFields); err != nil {
				return toolError(err)
			}
			agent, session := scope(in.AgentID, in.SessionKey)
			sb, err := ss.RollbackScope(ctx, agent, session, in.Snapshot)
			if err != nil {
				return toolError(err)
			}
			return sandboxAnswer("Rolled back", sb), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "fork", Annotations: &mcp.ToolAnnotations{Title: "Fork the sandbox", DestructiveHint: hint(false), OpenWorldHint: hint(false)},
		Description: "Start a sandbox for another scope (newAgentId, newSessionKey) from one of the agent's snapshots, or from its sandbox as it is now. The two share no files afterwards.",
		InputSchema: schemaFor[ForkParams](snapshotFields, id, allChoices)},
		func(ctx context.Context, req *mcp.CallToolRequest, in ForkParams) (*mcp.CallToolResult, any, error) {
			if err := checkArgs(req, snapshotFields); err != nil {
				return toolError(err)
			}
			agent, session := scope(in.AgentID, in.SessionKey)
			if id.pinned() {
				if in.NewAgentID != "" && in.NewAgentID != id.AgentID {
					return toolError(fmt.Errorf("fork: this session forks only into its own agent (%s), not %q", id.AgentID, in.NewAgentID))
				}
				in.NewAgentID = id.AgentID
			}
			sb, err := ss.ForkScope(ctx, agent, session, api.ForkRequest{AgentID: in.NewAgentID, SessionKey: in.NewSessionKey, Snapshot: in.Snapshot})
			if err != nil {
				return toolError(err)
			}
			return sandboxAnswer("Forked into", sb), nil, nil
		})
}
