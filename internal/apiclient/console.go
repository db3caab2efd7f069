package apiclient

import (
	"context"
	"encoding/json"
	"fmt"
)

// ConsoleLoginPath mints a one-time login link to the web console (POST,
// on the unix socket only, for a peer that may decide approvals).
const ConsoleLoginPath = "/v1/ui/login"

// ConsoleLogin returns the path of a one-time login link to the console
// ("/ui/login?code=..."), valid once for a minute.
func (c *Client) ConsoleLogin(ctx context.Context) (string, error) {
	raw, err := c.do(ctx, "POST", ConsoleLoginPath, struct{}{})
	if err != nil {
		return "", err
	}
	var body struct {
		Path string `json:"path"`
	}
	if err := json.Unmarshal(raw, &body); err != nil || body.Path == "" {
		return "", fmt.Errorf("console login: unexpected answer %s", raw)
	}
	return body.Path, nil
}

// ConsoleClientPIDsHeader is set by `sandboxctl ui` on every request it
// forwards to the console: the pids of the processes holding the browser's
// end of the connection (comma-separated; empty when it could not tell).
// The daemon holds them to the same rule as the forwarder itself before a
// login or a decision (see daemon's console vet).
const ConsoleClientPIDsHeader = "X-Sandboxctl-Console-Client-Pids"
