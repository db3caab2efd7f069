// Package egress is the one way out of a sandbox whose network egress is an
// allowlist: a resolver that answers allowed names only and a proxy that
// decides on each connection's TLS SNI or HTTP Host and connects upstream
// itself (docs/egress.md).
package egress

import (
	"context"
	"net"
)

// Interceptor terminates the connections a secret is bound to (the credential
// broker). The proxy decides first whether a connection may go out at all; an
// Interceptor only ever sees connections the policy allowed.
type Interceptor interface {
	// Intercepts reports whether connections from the sandbox of scopeKey to
	// host:port are to be terminated and served by Serve.
	Intercepts(scopeKey, host string, port int) bool
	// Serve takes over client, a connection from the sandbox whose first
	// bytes (the TLS ClientHello) are still unread on it, and serves it until
	// either side ends. dial opens a raw TCP connection to the real upstream
	// the proxy already authorised.
	Serve(ctx context.Context, scopeKey string, client net.Conn, host string, port int, dial func(ctx context.Context) (net.Conn, error)) error
}
