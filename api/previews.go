package api

import "time"

// PreviewPathPrefix is where the daemon's TCP listener serves previews:
// PreviewPathPrefix + ID + "/" + the path on the sandbox's port.
const PreviewPathPrefix = "/preview/"

// PreviewTokenParam is the query parameter that carries a preview's token
// on the first request (the daemon then sets PreviewCookie and redirects
// to the same URL without it); PreviewTokenHeader carries it for clients
// that send headers.
const (
	PreviewTokenParam  = "sandboxctl_token"
	PreviewTokenHeader = "X-Sandboxctl-Preview-Token"
	PreviewCookie      = "sandboxctl_preview"
)

// OpenPreviewRequest exposes port of an agent's sandbox (POST /v1/previews).
type OpenPreviewRequest struct {
	AgentID    string `json:"agentId"`
	SessionKey string `json:"sessionKey,omitempty"`
	// Port is a TCP port on the sandbox's own loopback (1-65535).
	Port int `json:"port"`
}

// Preview is a port of a sandbox exposed through the daemon's TCP
// listener, behind a token of its own (docs/previews.md).
type Preview struct {
	ID         string `json:"id"`
	AgentID    string `json:"agentId"`
	SessionKey string `json:"sessionKey,omitempty"`
	Port       int    `json:"port"`
	// Path is where the daemon's TCP listener serves it
	// (PreviewPathPrefix + ID + "/").
	Path string `json:"path"`
	// Token is the preview's token: only in the answer that opened it.
	Token string `json:"token,omitempty"`
	// URL opens it in a browser (the TCP listener's address, Path and the
	// token as PreviewTokenParam): only in the answer that opened it, and
	// only when the daemon has a TCP listener.
	URL       string    `json:"url,omitempty"`
	CreatedAt time.Time `json:"createdAt"`
}
