package apiclient

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/sandboxctl/sandboxctl/api"
	"net/url"
	"strconv"
	"time"
)

// SandboxFilter selects sandboxes of ListSandboxes; zero fields select all.
type SandboxFilter struct {
	Labels   map[string]string // KEY=VALUE each ("" value: has the label)
	AgentID  string
	Template string
	State    string
	ScopeKey string // the sandbox serving this scope key (e.g. agent:a1)
}

func (f SandboxFilter) query() string {
	q := url.Values{}
	for k, v := range f.Labels {
		if v == "" {
			q.Add("label", k)
		} else {
			q.Add("label", k+"="+v)
		}
	}
	for k, v := range map[string]string{"agent": f.AgentID, "template": f.Template, "state": f.State, "scopeKey": f.ScopeKey} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if len(q) == 0 {
		return ""
	}
	return "?" + q.Encode()
}

func sandboxPath(id string, tail string) string {
	return "/v1/sandboxes/" + url.PathEscape(id) + tail
}

func (c *Client) sandbox(ctx context.Context, method, path string, body any) (api.Sandbox, error) {
	var s api.Sandbox
	raw, err := c.do(ctx, method, path, body)
	if err != nil {
		return s, err
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		return s, fmt.Errorf("daemon: %s %s: decode answer: %w", method, path, err)
	}
	return s, nil
}

// CreateSandbox creates the sandbox of a scope (409 as an *APIError when
// the scope has one).
func (c *Client) CreateSandbox(ctx context.Context, req api.CreateSandboxRequest) (api.Sandbox, error) {
	return c.sandbox(ctx, "POST", "/v1/sandboxes", req)
}

// ListSandboxes lists the sandboxes passing f.
func (c *Client) ListSandboxes(ctx context.Context, f SandboxFilter) ([]api.Sandbox, error) {
	raw, err := c.do(ctx, "GET", "/v1/sandboxes"+f.query(), nil)
	if err != nil {
		return nil, err
	}
	var list []api.Sandbox
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, fmt.Errorf("daemon: GET /v1/sandboxes: decode answer: %w", err)
	}
	return list, nil
}

// GetSandbox returns the sandbox id (an id, unique id prefix or name).
func (c *Client) GetSandbox(ctx context.Context, id string) (api.Sandbox, error) {
	return c.sandbox(ctx, "GET", sandboxPath(id, ""), nil)
}

// DeleteSandbox removes the sandbox id and, with workspace, its workspace.
func (c *Client) DeleteSandbox(ctx context.Context, id string, workspace bool) error {
	_, err := c.do(ctx, "DELETE", sandboxPath(id, "?workspace="+strconv.FormatBool(workspace)), nil)
	return err
}

// PauseSandbox freezes the sandbox id.
func (c *Client) PauseSandbox(ctx context.Context, id string) (api.Sandbox, error) {
	return c.sandbox(ctx, "POST", sandboxPath(id, "/pause"), struct{}{})
}

// ResumeSandbox unfreezes the sandbox id.
func (c *Client) ResumeSandbox(ctx context.Context, id string) (api.Sandbox, error) {
	return c.sandbox(ctx, "POST", sandboxPath(id, "/resume"), struct{}{})
}

// ExtendSandbox sets the sandbox id to expire ttl (whole seconds) from now.
func (c *Client) ExtendSandbox(ctx context.Context, id string, ttl time.Duration) (api.Sandbox, error) {
	return c.sandbox(ctx, "POST", sandboxPath(id, "/timeout"), api.ExtendSandboxRequest{TTLSeconds: int64(ttl / time.Second)})
}
