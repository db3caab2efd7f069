package sandboxctl

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
)

// Endpoint is where a daemon of container mode listens, and the
// credentials of the run: a bearer token and the certificate the daemon's
// TLS listener presents (made for the run; trust it, not the system roots).
type Endpoint struct {
	// URL is the daemon's base URL, e.g. https://127.0.0.1:41234; the
	// HTTP API is under /v1, the MCP server at /mcp.
	URL string
	// Token is the bearer token of the run (full access: the tool token).
	Token string
	// CertPEM is the daemon's certificate (PEM).
	CertPEM []byte
}

// MCPURL is the daemon's MCP endpoint (streamable HTTP); send the token as
// "Authorization: Bearer TOKEN".
func (e Endpoint) MCPURL() string { return e.URL + "/mcp" }

// TLSConfig trusts the daemon's certificate only.
func (e Endpoint) TLSConfig() *tls.Config {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(e.CertPEM)
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
}

// HTTPClient is an HTTP client that trusts the daemon's certificate and
// sends the token with every request.
func (e Endpoint) HTTPClient() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = e.TLSConfig()
	return &http.Client{Transport: withToken{token: e.Token, next: tr}}
}

// withToken adds the bearer token to each request.
type withToken struct {
	token string
	next  http.RoundTripper
}

func (w withToken) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+w.token)
	return w.next.RoundTrip(r)
}
