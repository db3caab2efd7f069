// Package mcpserver serves sandboxctl's two tools, exec and process, as an
// MCP server (the official Go SDK), so agent runtimes that speak MCP get the
// same tools as the HTTP API. `sandboxctl mcp` runs it over stdio in front
// of the daemon.
package mcpserver

import (
	"context"
	"errors"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sandboxctl/sandboxctl/sessions/toolapi"
)

// Tools is the tool contract (toolapi.Tools).
type Tools = toolapi.Tools

// Identity pins the caller's scope. When set, it replaces whatever agentId
// and sessionKey the MCP client sends, so one MCP server process serves one
// agent and cannot reach another agent's sandbox or sessions.
type Identity struct {
	AgentID    string
	SessionKey string
}

const execDescription = "Run a shell command in the agent's sandbox (or another configured host). " +
	"Returns the output when it finishes within yieldMs (default 10 s); otherwise returns a " +
	"running session id to follow up with the process tool. Fields: command (required), workdir, " +
	"env, yieldMs, background, timeout (seconds), pty, elevated, host, security, ask, node."

const processDescription = "Manage background sessions started by exec: action list, poll, log, " +
	"write, send-keys, paste, submit, kill, clear, remove, resize; sessionId for all but list."

// New returns an MCP server exposing exec and process over tools.
func New(tools Tools, id Identity, version string) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "sandboxctl", Version: version}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "exec", Description: execDescription},
		func(ctx context.Context, req *mcp.CallToolRequest, in toolapi.ExecParams) (*mcp.CallToolResult, any, error) {
			if err := checkArgs(req); err != nil {
				return toMCP(toolapi.Result{}, err)
			}
			if id.AgentID != "" || id.SessionKey != "" {
				in.AgentID, in.SessionKey = id.AgentID, id.SessionKey
			}
			res, err := tools.Exec(ctx, in)
			return toMCP(res, err)
		})
	mcp.AddTool(s, &mcp.Tool{Name: "process", Description: processDescription},
		func(ctx context.Context, req *mcp.CallToolRequest, in toolapi.ProcessParams) (*mcp.CallToolResult, any, error) {
			if err := checkArgs(req); err != nil {
				return toMCP(toolapi.Result{}, err)
			}
			if id.AgentID != "" || id.SessionKey != "" {
				in.AgentID, in.SessionKey = id.AgentID, id.SessionKey
			}
			res, err := tools.Process(ctx, in)
			return toMCP(res, err)
		})
	return s
}

// toMCP maps a tool result to MCP: the text content, and details as the
// structured content. Bad input is a tool error the model can read and
// correct, not a protocol error.
// checkArgs refuses arguments that are not valid UTF-8: decoding them
// would silently turn the bytes into U+FFFD and run another command.
func checkArgs(req *mcp.CallToolRequest) error {
	if req == nil || req.Params == nil {
		return nil
	}
	if err := toolapi.CheckText(req.Params.Arguments); err != nil {
		return &toolapi.InputError{Field: "arguments", Msg: err.Error()}
	}
	return nil
}

func toMCP(res toolapi.Result, err error) (*mcp.CallToolResult, any, error) {
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return nil, nil, err
		}
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}}, nil, nil
	}
	out := &mcp.CallToolResult{StructuredContent: res.Details}
	for _, c := range res.Content {
		out.Content = append(out.Content, &mcp.TextContent{Text: c.Text})
	}
	if status, _ := res.Details["status"].(string); status == toolapi.StatusDenied {
		out.IsError = true
	}
	return out, nil, nil
}

// Serve runs the server on t until the peer goes away or ctx ends.
func Serve(ctx context.Context, tools Tools, id Identity, version string, t mcp.Transport) error {
	return New(tools, id, version).Run(ctx, t)
}
