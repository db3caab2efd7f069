package runtimecli

import (
	"context"
	"fmt"
	"github.com/sandboxctl/sandboxctl/api"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/sandboxctl/sandboxctl/internal/apiclient"
	"github.com/sandboxctl/sandboxctl/internal/cli"
	"github.com/sandboxctl/sandboxctl/internal/daemon"
	"github.com/sandboxctl/sandboxctl/internal/mcpserver"
	"github.com/sandboxctl/sandboxctl/sandbox"
)

// MCPOptions are the flags of `sandboxctl mcp`.
type MCPOptions struct {
	AgentID, SessionKey string
}

func newMCPCommand(c *cli.CLI) *cobra.Command {
	var opts MCPOptions
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: cli.RuntimeShort("mcp"),
		Long: `Serve the exec and process tools to an MCP client over standard input and
output. Calls go to the state directory's daemon, which is started when none
is running. With --agent/--session the server pins the caller's identity:
whatever agentId and sessionKey the client sends are replaced, so the MCP
client can reach only that agent's sandbox and sessions.`,
		Args: cli.ExactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return RunMCP(cmd.Context(), c, opts, &mcp.StdioTransport{})
		},
	}
	cmd.Flags().StringVar(&opts.AgentID, "agent", "", "pin every call to this agent id")
	cmd.Flags().StringVar(&opts.SessionKey, "session", "", "pin every call to this session key")
	return cmd
}

// RunMCP serves the tools on transport until the client disconnects.
func RunMCP(ctx context.Context, c *cli.CLI, opts MCPOptions, transport mcp.Transport) error {
	client, err := c.DaemonClient()
	if err != nil {
		return err
	}
	cfg, err := c.LoadConfig()
	if err != nil {
		return err
	}
	var sandboxes mcpserver.Sandboxes
	if cfg.MCP.SandboxLifecycle {
		sandboxes = clientSandboxes{c: client, scope: cfg.Sandbox.Scope}
	}
	logf := func(format string, args ...any) { fmt.Fprintf(c.Err, "sandboxctl mcp: "+format+"\n", args...) }
	return mcpserver.Serve(ctx, client, mcpserver.Identity{AgentID: opts.AgentID, SessionKey: opts.SessionKey}, transport,
		mcpserver.Options{Version: c.Version, Files: mcpserver.ClientFiles{C: client}, Sandboxes: sandboxes, Policy: mcpserver.PolicyOf(cfg), Logf: logf})
}

// clientSandboxes are the MCP sandbox tools of `sandboxctl mcp` (stdio),
// through the daemon's lifecycle API; scope is sandbox.scope.
type clientSandboxes struct {
	c     *apiclient.Client
	scope string
}

func (s clientSandboxes) CreateSandbox(ctx context.Context, req api.CreateSandboxRequest) (api.Sandbox, error) {
	return s.c.CreateSandbox(ctx, req)
}

func (s clientSandboxes) ScopeSandbox(ctx context.Context, agentID, sessionKey string) (api.Sandbox, error) {
	key := sandbox.ScopeKey(s.scope, sandbox.Scope{AgentID: agentID, SessionKey: sessionKey})
	list, err := s.c.ListSandboxes(ctx, apiclient.SandboxFilter{ScopeKey: key})
	if err != nil {
		return api.Sandbox{}, err
	}
	if len(list) != 1 {
		return api.Sandbox{}, fmt.Errorf("%w for scope %s", sandbox.ErrNoSandbox, key)
	}
	return list[0], nil
}

func (s clientSandboxes) DeleteScopeSandbox(ctx context.Context, agentID, sessionKey string, workspace bool) (api.Sandbox, error) {
	sb, err := s.ScopeSandbox(ctx, agentID, sessionKey)
	if err != nil {
		return sb, err
	}
	return sb, s.c.DeleteSandbox(ctx, sb.ID, workspace)
}

// mcpHandler is the daemon's /mcp endpoint (streamable HTTP): a client
// with an agent token is pinned to its agent, as on the other routes.
func mcpHandler(tools mcpserver.Tools, sbx *sandbox.Manager, sandboxes mcpserver.Sandboxes, policy mcpserver.Policy, maxBytes int64, fileAudit daemon.FileAudit, version string, logf func(string, ...any)) http.Handler {
	var files mcpserver.Files
	if sbx != nil {
		files = storeFiles{store: sandboxFiles{sbx}, limit: maxBytes, audit: fileAudit}
	}
	return mcpserver.Handler(tools, func(r *http.Request) mcpserver.Identity {
		if pin, ok := daemon.PinFrom(r.Context()); ok {
			return mcpserver.Identity{AgentID: pin.AgentID}
		}
		return mcpserver.Identity{}
	}, mcpserver.Options{Version: version, Files: files, Sandboxes: sandboxes, Policy: policy, Logf: logf})
}
