// Package mcpserver serves sandboxctl's tools as an MCP server (the
// official Go SDK): exec and process, and read_file, write_file and
// list_files on the agent's sandbox, so agent runtimes that speak MCP get
// the same tools as the HTTP API. `sandboxctl mcp` runs it over stdio in
// front of the daemon; the daemon serves it over the streamable HTTP
// transport at /mcp (Handler).
package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sandboxctl/sandboxctl/api"
	"github.com/sandboxctl/sandboxctl/sessions/toolapi"
	"github.com/sandboxctl/sandboxctl/vocab"
)

// Tools is the tool contract (toolapi.Tools).
type Tools = toolapi.Tools

// Identity pins the caller's scope. When set, it replaces whatever agentId
// and sessionKey the MCP client sends, so one MCP server process serves one
// agent and cannot reach another agent's sandbox or sessions; the pinned
// fields are then not advertised in the tools' schemas.
type Identity struct {
	AgentID    string
	SessionKey string
}

func (id Identity) pinned() bool { return id.AgentID != "" || id.SessionKey != "" }

const execDescription = "Run a shell command in the agent's sandbox (or another configured host). " +
	"Returns the output when it finishes within yieldMs (default 10 s); otherwise returns a " +
	"running session id to follow up with the process tool."

const processDescription = "Manage background sessions started by exec: list them, poll or read their " +
	"output, write to their input, kill, clear or remove them, resize their terminal."

// execFields describes ExecParams' fields for the model.
var execFields = map[string]string{
	"command":    "The shell command line to run (sh -c).",
	"workdir":    "Working directory (default: the sandbox's /workspace, or the configured directory on other hosts).",
	"env":        "Extra environment variables, name to value.",
	"yieldMs":    "Milliseconds to wait for the command to finish before returning a running session (default 10000).",
	"background": "Return at once with a running session instead of waiting.",
	"timeout":    "Seconds after which the command's whole process tree is killed (default: the configured timeout).",
	"pty":        "Run in a pseudo-terminal of 120 columns by 30 rows (for interactive programs).",
	"elevated":   "Ask to run on the gateway host with elevated rights (needs the config to allow it).",
	"host":       "Where to run: sandbox (the agent's container), gateway (the daemon's machine) or node (a remote node).",
	"security":   "Security mode for this call; it can only tighten the configured one: deny, allowlist or full.",
	"ask":        "When to ask a human for approval; it can only tighten the configured one: off, on-miss or always.",
	"node":       "Node id or name, with host node.",
	"agentId":    "The agent whose sandbox and sessions to use.",
	"sessionKey": "The session key, for session-scoped sandboxes.",
}

var processFields = map[string]string{
	"action":     "What to do: list, poll, log, write, send-keys, paste, submit, kill, clear, remove or resize.",
	"sessionId":  "The session to act on (every action but list).",
	"data":       "Text to write to the session's input (write).",
	"eof":        "Close the session's input after writing (write).",
	"keys":       "Key names to send, such as enter, ctrl-c, up (send-keys).",
	"hex":        "Raw bytes to send, as hex strings (send-keys).",
	"literal":    "Literal text to send (send-keys).",
	"text":       "Text to paste or submit (paste, submit).",
	"bracketed":  "Use bracketed paste (paste; default true).",
	"offset":     "Line number of the output to start from, counting from 0 (log).",
	"limit":      "Number of lines to return (log); without offset, the last lines.",
	"signal":     "Signal to send, e.g. SIGTERM (kill; default SIGKILL after a grace).",
	"timeoutMs":  "Milliseconds to wait for new output or the end (poll).",
	"cols":       "Terminal width in columns, i.e. characters (resize).",
	"rows":       "Terminal height in rows, i.e. lines (resize).",
	"agentId":    "The agent whose sessions to use.",
	"sessionKey": "The session key, for session-scoped sandboxes.",
}

// integerFields are numbers that take whole values only.
var integerFields = map[string]bool{"yieldMs": true, "offset": true, "limit": true, "timeoutMs": true, "cols": true, "rows": true, "ttlSeconds": true}

// enums are the closed vocabularies of the inputs.
var enums = map[string][]string{
	"host":     vocab.HostNames(),
	"security": vocab.SecurityNames(),
	"ask":      vocab.AskNames(),
	"action":   api.ProcessActions,
	"encoding": {"utf-8", "base64"},
}

// schemaFor builds T's input schema with descriptions, enums and integer
// types; a pinned server leaves out agentId and sessionKey, and the exec
// fields its policy does not let the caller use (choices).
func schemaFor[T any](fields map[string]string, id Identity, choices execChoices) *jsonschema.Schema {
	s, err := jsonschema.For[T](nil)
	if err != nil {
		panic(fmt.Sprintf("mcpserver: schema: %v", err)) // a programming error: the types are fixed
	}
	if id.pinned() {
		// Not advertised, still accepted (and replaced): clients that
		// always send them keep working. Other unknown fields are
		// refused by checkArgs instead of the schema.
		delete(s.Properties, "agentId")
		delete(s.Properties, "sessionKey")
		s.AdditionalProperties = nil
		if !choices.elevated {
			delete(s.Properties, "elevated")
		}
		if !choices.node {
			delete(s.Properties, "node")
		}
	}
	for name, p := range s.Properties {
		p.Description = fields[name]
		if integerFields[name] {
			p.Type, p.Types = "integer", nil
			p.Minimum = new(float64)
		}
		vals, ok := enums[name]
		if name == "host" {
			vals, ok = choices.hosts, true
		}
		if ok {
			p.Enum = nil
			for _, v := range vals {
				p.Enum = append(p.Enum, v)
			}
		}
	}
	return s
}

// allChoices lets every exec field through (the tools without exec fields).
var allChoices = Policy{}.choicesFor(Identity{})

// hint is a tool annotation's optional boolean.
func hint(b bool) *bool { return &b }

// The tools' annotations: what a client may assume about a call before
// making it. exec runs arbitrary commands (and may reach the network
// where the configuration gives one); process can kill and remove.
var (
	execAnnotations    = &mcp.ToolAnnotations{Title: "Run a shell command", DestructiveHint: hint(true), OpenWorldHint: hint(true)}
	processAnnotations = &mcp.ToolAnnotations{Title: "Manage background sessions", DestructiveHint: hint(true), OpenWorldHint: hint(false)}
)

// Options are what a server is built with besides its tools and identity.
type Options struct {
	Version string // the implementation version the server reports
	// Files, when not nil, adds read_file, write_file and list_files.
	Files Files
	// Policy limits what a pinned server advertises (PolicyOf).
	Policy Policy
	// Sandboxes, when not nil, adds sandbox_create, sandbox_info and
	// sandbox_delete.
	Sandboxes Sandboxes
	// Logf receives each recovered panic of a handler, with its stack;
	// nil drops them (the caller still gets an error).
	Logf func(format string, args ...any)
}

// New returns an MCP server exposing exec and process over tools and, when
// opts.Files is not nil, read_file, write_file and list_files. A panic in
// any of its method handlers (they run on the SDK's goroutines, where
// nothing else would recover it) is recovered and logged, and the call
// answers an error: no request can end the process serving it.
func New(tools Tools, id Identity, opts Options) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "sandboxctl", Version: opts.Version}, nil)
	s.AddReceivingMiddleware(recoverPanics(opts.Logf))
	mcp.AddTool(s, &mcp.Tool{Name: "exec", Description: execDescription, Annotations: execAnnotations,
		InputSchema: schemaFor[api.ExecParams](execFields, id, opts.Policy.choicesFor(id))},
		func(ctx context.Context, req *mcp.CallToolRequest, in api.ExecParams) (*mcp.CallToolResult, any, error) {
			if err := checkArgs(req, execFields); err != nil {
				return toMCP(api.Result{}, err)
			}
			if id.pinned() {
				in.AgentID, in.SessionKey = id.AgentID, id.SessionKey
			}
			res, err := tools.Exec(ctx, in)
			return toMCP(res, err)
		})
	mcp.AddTool(s, &mcp.Tool{Name: "process", Description: processDescription, Annotations: processAnnotations,
		InputSchema: schemaFor[api.ProcessParams](processFields, id, allChoices)},
		func(ctx context.Context, req *mcp.CallToolRequest, in api.ProcessParams) (*mcp.CallToolResult, any, error) {
			if err := checkArgs(req, processFields); err != nil {
				return toMCP(api.Result{}, err)
			}
			if id.pinned() {
				in.AgentID, in.SessionKey = id.AgentID, id.SessionKey
			}
			res, err := tools.Process(ctx, in)
			return toMCP(res, err)
		})
	if opts.Files != nil {
		addFileTools(s, opts.Files, id)
	}
	if opts.Sandboxes != nil {
		addSandboxTools(s, opts.Sandboxes, id)
		if ss, ok := opts.Sandboxes.(SandboxSnapshots); ok {
			addSnapshotTools(s, ss, id)
		}
	}
	return s
}

// recoverPanics turns a panic in a method handler into an error answer to
// that call, logged with its stack.
func recoverPanics(logf func(string, ...any)) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (res mcp.Result, err error) {
			defer func() {
				if v := recover(); v != nil {
					if logf != nil {
						logf("mcp: panic in %s (recovered): %v\n%s", method, v, debug.Stack())
					}
					res, err = nil, fmt.Errorf("internal error in %s; the server logged it", method)
				}
			}()
			return next(ctx, method, req)
		}
	}
}

// checkArgs refuses arguments that are not valid UTF-8 (decoding them
// would silently turn the bytes into U+FFFD and run another command) and
// fields the tool does not know (fields lists those it does).
func checkArgs(req *mcp.CallToolRequest, fields map[string]string) error {
	if req == nil || req.Params == nil {
		return nil
	}
	if err := toolapi.CheckText(req.Params.Arguments); err != nil {
		return &toolapi.InputError{Field: "arguments", Msg: err.Error()}
	}
	var args map[string]json.RawMessage
	if json.Unmarshal(req.Params.Arguments, &args) == nil {
		for name := range args {
			if _, ok := fields[name]; !ok {
				return &toolapi.InputError{Field: name, Msg: fmt.Sprintf("unknown field %q", name)}
			}
		}
	}
	return nil
}

// toMCP maps a tool result to MCP: the text content, and details as the
// structured content. Bad input is a tool error the model can read and
// correct, not a protocol error.
func toMCP(res api.Result, err error) (*mcp.CallToolResult, any, error) {
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
	if res.Details.Status == api.StatusDenied {
		out.IsError = true
	}
	return out, nil, nil
}

// Serve runs the server on t until the peer goes away or ctx ends.
func Serve(ctx context.Context, tools Tools, id Identity, t mcp.Transport, opts Options) error {
	return New(tools, id, opts).Run(ctx, t)
}
