package mcpserver

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"unicode/utf8"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sandboxctl/sandboxctl/api"
	"github.com/sandboxctl/sandboxctl/internal/apiclient"
)

// MaxReadBytes bounds what read_file returns and write_file takes: larger
// files go through the HTTP files API or `sandboxctl cp`.
const MaxReadBytes = 1 << 20

// Files is what the file tools act on: the daemon's files API, reached
// through its client (ClientFiles) or in the daemon itself.
type Files interface {
	// ReadFile returns the content of a regular file, failing with
	// cerrdefs.ErrResourceExhausted beyond limit bytes.
	ReadFile(ctx context.Context, f api.FileRef, limit int64) ([]byte, error)
	WriteFile(ctx context.Context, f api.FileRef, data []byte) error
	ListFiles(ctx context.Context, f api.FileRef) (api.FileList, error)
}

// ReadFileParams is the input of read_file.
type ReadFileParams struct {
	Path       string `json:"path"`
	AgentID    string `json:"agentId,omitempty"`
	SessionKey string `json:"sessionKey,omitempty"`
}

// WriteFileParams is the input of write_file.
type WriteFileParams struct {
	Path       string `json:"path"`
	Content    string `json:"content"`
	Encoding   string `json:"encoding,omitempty"`
	AgentID    string `json:"agentId,omitempty"`
	SessionKey string `json:"sessionKey,omitempty"`
}

// ListFilesParams is the input of list_files.
type ListFilesParams = ReadFileParams

var fileFields = map[string]string{
	"path":       "Absolute path inside the agent's sandbox, e.g. /workspace/main.go.",
	"content":    "The file's new content.",
	"encoding":   "How content is encoded: utf-8 (default) or base64.",
	"agentId":    "The agent whose sandbox to use.",
	"sessionKey": "The session key, for session-scoped sandboxes.",
}

func addFileTools(s *mcp.Server, files Files, id Identity) {
	ref := func(p, agent, session string) api.FileRef {
		if id.pinned() {
			agent, session = id.AgentID, id.SessionKey
		}
		return api.FileRef{AgentID: agent, SessionKey: session, Path: p}
	}
	mcp.AddTool(s, &mcp.Tool{Name: "read_file", Annotations: &mcp.ToolAnnotations{Title: "Read a file", ReadOnlyHint: true, OpenWorldHint: hint(false)},
		Description: fmt.Sprintf("Read a file of the agent's sandbox (at most %d bytes). Text (UTF-8 without NUL bytes) comes as is; anything else as base64.", MaxReadBytes),
		InputSchema: schemaFor[ReadFileParams](fileFields, id, allChoices)},
		func(ctx context.Context, req *mcp.CallToolRequest, in ReadFileParams) (*mcp.CallToolResult, any, error) {
			if err := checkArgs(req, fileFields); err != nil {
				return toolError(err)
			}
			data, err := files.ReadFile(ctx, ref(in.Path, in.AgentID, in.SessionKey), MaxReadBytes)
			if err != nil {
				return toolError(err)
			}
			if utf8.Valid(data) && bytes.IndexByte(data, 0) < 0 {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(data)}},
					StructuredContent: map[string]any{"path": in.Path, "size": len(data), "encoding": "utf-8"}}, nil, nil
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: base64.StdEncoding.EncodeToString(data)}},
				StructuredContent: map[string]any{"path": in.Path, "size": len(data), "encoding": "base64"}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "write_file", Annotations: &mcp.ToolAnnotations{Title: "Write a file", DestructiveHint: hint(true), IdempotentHint: true, OpenWorldHint: hint(false)},
		Description: "Create or replace a file in the agent's sandbox (its directory must exist).",
		InputSchema: schemaFor[WriteFileParams](fileFields, id, allChoices)},
		func(ctx context.Context, req *mcp.CallToolRequest, in WriteFileParams) (*mcp.CallToolResult, any, error) {
			if err := checkArgs(req, fileFields); err != nil {
				return toolError(err)
			}
			data := []byte(in.Content)
			if in.Encoding == "base64" {
				var err error
				if data, err = base64.StdEncoding.DecodeString(in.Content); err != nil {
					return toolError(fmt.Errorf("%w: content is not valid base64: %v", cerrdefs.ErrInvalidArgument, err))
				}
			}
			if err := files.WriteFile(ctx, ref(in.Path, in.AgentID, in.SessionKey), data); err != nil {
				return toolError(err)
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("Wrote %d bytes to %s.", len(data), in.Path)}},
				StructuredContent: map[string]any{"path": in.Path, "size": len(data)}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "list_files", Annotations: &mcp.ToolAnnotations{Title: "List a directory", ReadOnlyHint: true, OpenWorldHint: hint(false)},
		Description: "List a directory of the agent's sandbox: one line per entry, type, size and name.",
		InputSchema: schemaFor[ListFilesParams](fileFields, id, allChoices)},
		func(ctx context.Context, req *mcp.CallToolRequest, in ListFilesParams) (*mcp.CallToolResult, any, error) {
			if err := checkArgs(req, fileFields); err != nil {
				return toolError(err)
			}
			l, err := files.ListFiles(ctx, ref(in.Path, in.AgentID, in.SessionKey))
			if err != nil {
				return toolError(err)
			}
			var b strings.Builder
			for _, e := range l.Entries {
				name := e.Name
				if e.Type == "symlink" {
					name += " -> " + e.LinkTarget
				}
				fmt.Fprintf(&b, "%-7s %10d %s\n", e.Type, e.Size, name)
			}
			if l.Truncated {
				b.WriteString("(truncated)\n")
			}
			if len(l.Entries) == 0 {
				b.WriteString("(empty directory)\n")
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: b.String()}}, StructuredContent: l}, nil, nil
		})
}

func toolError(err error) (*mcp.CallToolResult, any, error) {
	return toMCP(api.Result{}, err)
}

// ClientFiles reaches the files API through a daemon client.
type ClientFiles struct{ C *apiclient.Client }

// ReadFile downloads f.Path's content.
func (c ClientFiles) ReadFile(ctx context.Context, f api.FileRef, limit int64) ([]byte, error) {
	rc, err := c.C.Download(ctx, f)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return readLimited(rc, f.Path, limit)
}

// WriteFile uploads data to f.Path.
func (c ClientFiles) WriteFile(ctx context.Context, f api.FileRef, data []byte) error {
	return c.C.Upload(ctx, f, 0, bytes.NewReader(data), int64(len(data)))
}

// ListFiles lists f.Path.
func (c ClientFiles) ListFiles(ctx context.Context, f api.FileRef) (api.FileList, error) {
	return c.C.ListFiles(ctx, f)
}

// readLimited reads r whole, failing beyond limit bytes.
func readLimited(r io.Reader, name string, limit int64) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%w: %s is larger than %d bytes; use sandboxctl cp or GET /v1/files", cerrdefs.ErrResourceExhausted, name, limit)
	}
	return data, nil
}

// Handler serves the tools over the MCP streamable HTTP transport. identify
// tells the caller's identity from the request (the daemon's agent-token
// pin); each identity gets a server and session table of its own, so a
// session id never leads one caller to another's pinned server.
func Handler(tools Tools, identify func(*http.Request) Identity, opts Options) http.Handler {
	var mu sync.Mutex
	handlers := map[Identity]http.Handler{}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := identify(r)
		mu.Lock()
		h, ok := handlers[id]
		if !ok {
			srv := New(tools, id, opts)
			h = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
			handlers[id] = h
		}
		mu.Unlock()
		h.ServeHTTP(w, r)
	})
}
