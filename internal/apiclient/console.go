package apiclient

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/sandboxctl/sandboxctl/api"
)

// ConsoleLogin returns the path of a one-time login link to the console
// ("/ui/login?code=..."), valid once for a minute.
func (c *Client) ConsoleLogin(ctx context.Context) (string, error) {
	raw, err := c.do(ctx, "POST", api.ConsoleLoginPath, struct{}{})
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
