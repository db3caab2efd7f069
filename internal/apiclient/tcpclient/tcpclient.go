// Package tcpclient reaches a daemon's TCP listener (`sandboxctl serve
// --listen`, bearer token, optional TLS) with an apiclient.Client, on
// net/http. It is a separate package so that the light sandboxctl, which
// only speaks to the unix socket, links no TLS stack.
package tcpclient

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net/http"
	"syscall"

	"github.com/sandboxctl/sandboxctl/internal/apiclient"
)

// New returns a client for a daemon's TCP listener at baseURL
// ("http://host:port" or "https://…") that sends token as a bearer token.
// tlsConfig may be nil. It keeps connections alive between calls.
func New(baseURL, token string, tlsConfig *tls.Config) *apiclient.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = tlsConfig
	return apiclient.New(&transport{hc: &http.Client{Transport: tr}}, baseURL, token)
}

// transport is an apiclient.Transport over an http.Client.
type transport struct {
	hc *http.Client
}

func (t *transport) RoundTrip(ctx context.Context, req apiclient.Request) (int, io.ReadCloser, error) {
	var body io.Reader
	if req.Body != nil {
		body = bytes.NewReader(req.Body)
	}
	if req.Stream != nil {
		body = io.LimitReader(req.Stream, req.StreamLen)
	}
	hreq, err := http.NewRequestWithContext(ctx, req.Method, req.URL, body)
	if err != nil {
		return 0, nil, err
	}
	if req.Stream != nil {
		hreq.ContentLength = req.StreamLen
	}
	for k, v := range req.Header {
		hreq.Header.Set(k, v)
	}
	resp, err := t.hc.Do(hreq)
	if err != nil {
		if errors.Is(err, syscall.ECONNREFUSED) {
			return 0, nil, errors.Join(apiclient.ErrNoDaemon, err)
		}
		return 0, nil, err
	}
	return resp.StatusCode, resp.Body, nil
}

// CloseIdleConnections closes idle keep-alive connections.
func (t *transport) CloseIdleConnections() { t.hc.CloseIdleConnections() }
