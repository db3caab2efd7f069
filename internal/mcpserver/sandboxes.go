package mcpserver

import (
	"context"
	"fmt"
	"github.com/sandboxctl/sandboxctl/api"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Sandboxes is what the sandbox tools act on: the sandbox of one scope
// (docs/sandboxes.md). Only a daemon whose config allows it
// (mcp.sandboxLifecycle) gives a server one.
type Sandboxes interface {
	CreateSandbox(ctx context.Context, req api.CreateSandboxRequest) (api.Sandbox, error)
	// ScopeSandbox returns the sandbox of a scope (not found: an error).
	ScopeSandbox(ctx context.Context, agentID, sessionKey string) (api.Sandbox, error)
	// DeleteScopeSandbox removes it, with workspace its workspace too.
	DeleteScopeSandbox(ctx context.Context, agentID, sessionKey string, workspace bool) (api.Sandbox, error)
}

// SandboxCreateParams is the input of sandbox_create.
type SandboxCreateParams struct {
	Template   string            `json:"template,omitempty"`
	Labels     map[string]string `json:"labels,omitempty"`
	TTLSeconds int64             `json:"ttlSeconds,omitempty"`
	AgentID    string            `json:"agentId,omitempty"`
	SessionKey string            `json:"sessionKey,omitempty"`
}

// SandboxInfoParams is the input of sandbox_info.
type SandboxInfoParams struct {
	AgentID    string `json:"agentId,omitempty"`
	SessionKey string `json:"sessionKey,omitempty"`
}

// SandboxDeleteParams is the input of sandbox_delete.
type SandboxDeleteParams struct {
	Workspace  bool   `json:"workspace,omitempty"`
	AgentID    string `json:"agentId,omitempty"`
	SessionKey string `json:"sessionKey,omitempty"`
}

var sandboxFields = map[string]string{
	"template":   "A template of the daemon's config (sandbox.templates); default: the default settings.",
	"labels":     "Labels to put on the sandbox, key to value.",
	"ttlSeconds": "Remove the sandbox this many seconds after its creation; 0 or absent: no TTL.",
	"workspace":  "Also remove the sandbox's workspace (its files under /workspace); default false.",
	"agentId":    "The agent whose sandbox to use.",
	"sessionKey": "The session key, for session-scoped sandboxes.",
}

func addSandboxTools(s *mcp.Server, sbx Sandboxes, id Identity) {
	scope := func(agent, session string) (string, string) {
		if id.pinned() {
			return id.AgentID, id.SessionKey
		}
		return agent, session
	}
	answer := func(verb string, sb api.Sandbox) *mcp.CallToolResult {
		text := fmt.Sprintf("%s sandbox %s (id %s, template %s, state %s", verb, sb.Name, shortID(sb.ID), sb.Template, sb.State)
		if !sb.ExpiresAt.IsZero() {
			text += ", expires " + sb.ExpiresAt.UTC().Format(time.RFC3339)
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text + ")."}}, StructuredContent: sb}
	}
	mcp.AddTool(s, &mcp.Tool{Name: "sandbox_create", Annotations: &mcp.ToolAnnotations{Title: "Create the sandbox", DestructiveHint: hint(false), OpenWorldHint: hint(false)},
		Description: "Create the agent's sandbox from a template, with labels and a TTL. An error if it has one.",
		InputSchema: schemaFor[SandboxCreateParams](sandboxFields, id, allChoices)},
		func(ctx context.Context, req *mcp.CallToolRequest, in SandboxCreateParams) (*mcp.CallToolResult, any, error) {
			if err := checkArgs(req, sandboxFields); err != nil {
				return toolError(err)
			}
			agent, session := scope(in.AgentID, in.SessionKey)
			sb, err := sbx.CreateSandbox(ctx, api.CreateSandboxRequest{Template: in.Template, AgentID: agent, SessionKey: session, Labels: in.Labels, TTLSeconds: in.TTLSeconds})
			if err != nil {
				return toolError(err)
			}
			return answer("Created", sb), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "sandbox_info", Annotations: &mcp.ToolAnnotations{Title: "Describe the sandbox", ReadOnlyHint: true, OpenWorldHint: hint(false)},
		Description: "Describe the agent's sandbox: id, template, labels, state, expiry.",
		InputSchema: schemaFor[SandboxInfoParams](sandboxFields, id, allChoices)},
		func(ctx context.Context, req *mcp.CallToolRequest, in SandboxInfoParams) (*mcp.CallToolResult, any, error) {
			if err := checkArgs(req, sandboxFields); err != nil {
				return toolError(err)
			}
			agent, session := scope(in.AgentID, in.SessionKey)
			sb, err := sbx.ScopeSandbox(ctx, agent, session)
			if err != nil {
				return toolError(err)
			}
			return answer("The", sb), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "sandbox_delete", Annotations: &mcp.ToolAnnotations{Title: "Remove the sandbox", DestructiveHint: hint(true), IdempotentHint: true, OpenWorldHint: hint(false)},
		Description: "Remove the agent's sandbox (its workspace too with workspace: true).",
		InputSchema: schemaFor[SandboxDeleteParams](sandboxFields, id, allChoices)},
		func(ctx context.Context, req *mcp.CallToolRequest, in SandboxDeleteParams) (*mcp.CallToolResult, any, error) {
			if err := checkArgs(req, sandboxFields); err != nil {
				return toolError(err)
			}
			agent, session := scope(in.AgentID, in.SessionKey)
			sb, err := sbx.DeleteScopeSandbox(ctx, agent, session, in.Workspace)
			if err != nil {
				return toolError(err)
			}
			return answer("Removed", sb), nil, nil
		})
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
