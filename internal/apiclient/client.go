// Package apiclient talks to a sandboxctl daemon: the client of its HTTP API
// (over the state directory's unix socket, or TCP with a bearer token), the
// names of the daemon's files in the state directory, and starting a daemon
// in the background when none answers. It links neither the runtime nor a
// Docker client, so the sandboxctl CLI that uses it starts in a few
// milliseconds; package daemon is the server side.
package apiclient

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/sandboxctl/sandboxctl/api"
)

// SetIdentity makes every request carry id, so that a daemon serving
// another configuration or Engine refuses it (409) instead of serving it.
func (c *Client) SetIdentity(id api.Identity) {
	c.headers = map[string]string{
		api.HeaderConfigHash: id.ConfigHash,
		api.HeaderConfigFile: url.QueryEscape(id.ConfigFile),
		api.HeaderEngine:     url.QueryEscape(id.Engine),
	}
}

// Client talks to a daemon. It has no overall timeout: bound each call
// with ctx. The transport decides how requests travel: NewUnixClient and
// Connect use one unix socket connection per request (Unix below);
// package tcpclient builds one for the TCP listener on net/http.
type Client struct {
	rt    Transport
	base  string
	token string
	// autoStart, when set, starts a daemon when a request finds none
	// listening (see Connect).
	autoStart *StartOptions
	// headers go with every request (SetIdentity).
	headers map[string]string
}

// Transport carries one request to the daemon and returns the status code
// and the body of its answer (closed by the caller). An error wrapping
// ErrNoDaemon means nothing listens; the request was not delivered.
type Transport interface {
	RoundTrip(ctx context.Context, req Request) (status int, body io.ReadCloser, err error)
}

// Request is one API call as a Transport sees it.
type Request struct {
	Method string
	// URL is the base URL plus the path, e.g. http://sandboxctl/healthz.
	URL string
	// Path is the request path, e.g. /v1/tools/exec.
	Path   string
	Header map[string]string
	Body   []byte // nil for none
	// Stream, when set instead of Body, is sent as the body: exactly
	// StreamLen bytes (a file upload).
	Stream    io.Reader
	StreamLen int64
}

// New returns a client that sends requests to base (e.g. https://host:8443)
// through rt, with token as a bearer token when not empty.
func New(rt Transport, base, token string) *Client {
	return &Client{rt: rt, base: strings.TrimRight(base, "/"), token: token}
}

// NewUnixClient returns a client for the daemon listening on socketPath.
func NewUnixClient(socketPath string) *Client {
	return New(Unix{Path: socketPath}, "http://sandboxctl", "")
}

// CloseIdleConnections closes the transport's idle keep-alive connections,
// if it keeps any.
func (c *Client) CloseIdleConnections() {
	if ic, ok := c.rt.(interface{ CloseIdleConnections() }); ok {
		ic.CloseIdleConnections()
	}
}

// APIError is a non-2xx answer of the daemon. errors.Is matches it against the
// containerd errdefs class of its status (400 → ErrInvalidArgument, …).
type APIError struct {
	StatusCode int
	Message    string
	Field      string        // see api.ErrorBody.Field
	Code       api.ErrorCode // see api.ErrorBody.Code
}

func (e *APIError) Error() string { return e.Message }

// Is matches the error its code names: api.ErrCommandNotFound for
// api.ErrorCodeCommandNotFound.
func (e *APIError) Is(target error) bool {
	return e.Code == api.ErrorCodeCommandNotFound && target == api.ErrCommandNotFound
}

// Unwrap returns the errdefs class of the status code, so that callers
// branch with cerrdefs.IsNotFound(err) and the like.
func (e *APIError) Unwrap() error { return statusClass(e.StatusCode) }

// statusClass is the errdefs class the daemon answers with status (the
// inverse of the server's errhttp.ToHTTP; errhttp.ToNative itself is not
// used because it links net/http, which the socket path does without). A
// body too large (413) is the caller's invalid argument.
func statusClass(status int) error {
	switch status {
	case 304:
		return cerrdefs.ErrNotModified
	case 400, 413:
		return cerrdefs.ErrInvalidArgument
	case 401:
		return cerrdefs.ErrUnauthenticated
	case 403:
		return cerrdefs.ErrPermissionDenied
	case 404:
		return cerrdefs.ErrNotFound
	case 409:
		return cerrdefs.ErrConflict
	case 412:
		return cerrdefs.ErrFailedPrecondition
	case 429:
		return cerrdefs.ErrResourceExhausted
	case 500:
		return cerrdefs.ErrInternal
	case 501:
		return cerrdefs.ErrNotImplemented
	case 503:
		return cerrdefs.ErrUnavailable
	case 504:
		return context.DeadlineExceeded // errdefs has no value of its own: IsDeadlineExceeded matches this
	}
	return cerrdefs.ErrUnknown
}

// Health calls GET /healthz.
func (c *Client) Health(ctx context.Context) (api.Health, error) {
	var h api.Health
	raw, err := c.do(ctx, "GET", "/healthz", nil)
	if err != nil {
		return h, err
	}
	if err := json.Unmarshal(raw, &h); err != nil {
		return h, fmt.Errorf("daemon: decode health: %w", err)
	}
	if !h.OK {
		return h, errors.New("daemon: health check answered ok=false")
	}
	return h, nil
}

// ExecRaw calls the exec tool and returns the result exactly as the daemon
// sent it.
func (c *Client) ExecRaw(ctx context.Context, p api.ExecParams) (json.RawMessage, error) {
	return c.do(ctx, "POST", "/v1/tools/exec", api.NewExecRequest(p, false))
}

// Exec calls the exec tool.
func (c *Client) Exec(ctx context.Context, p api.ExecParams) (api.Result, error) {
	return decodeResult(c.ExecRaw(ctx, p))
}

// ProcessRaw calls the process tool and returns the result exactly as the
// daemon sent it.
func (c *Client) ProcessRaw(ctx context.Context, p api.ProcessParams) (json.RawMessage, error) {
	return c.do(ctx, "POST", "/v1/tools/process", p)
}

// Process calls the process tool.
func (c *Client) Process(ctx context.Context, p api.ProcessParams) (api.Result, error) {
	return decodeResult(c.ProcessRaw(ctx, p))
}

// Sandboxes calls GET /v1/sandboxes and returns the JSON list.
func (c *Client) Sandboxes(ctx context.Context) (json.RawMessage, error) {
	return c.do(ctx, "GET", "/v1/sandboxes", nil)
}

// Shutdown asks the daemon to shut down gracefully (unix socket only). It
// returns once the daemon accepted the request, not when it has stopped.
func (c *Client) Shutdown(ctx context.Context) error {
	_, err := c.do(ctx, "POST", "/v1/shutdown", struct{}{})
	return err
}

// EventStream reads the NDJSON event stream of GET /v1/events.
type EventStream struct {
	body io.ReadCloser
	dec  *json.Decoder
}

// Events opens the event stream. It ends when ctx is done, Close is called,
// or the daemon stops (Next then returns io.EOF or an error).
func (c *Client) Events(ctx context.Context) (*EventStream, error) {
	return c.EventsSince(ctx, EventsQuery{})
}

// EventsQuery selects what GET /v1/events streams.
type EventsQuery struct {
	// Since, when set, replays the events after this cursor first (0: all
	// the journal holds); unset streams only new events.
	Since *int64
	// Agent, when set, shows only this agent's events.
	Agent string
}

// EventsSince streams events as q selects: a client that reconnects with
// the cursor of the last event it saw misses nothing, or gets a "gap"
// event (api.EventGap) first.
func (c *Client) EventsSince(ctx context.Context, q EventsQuery) (*EventStream, error) {
	v := url.Values{}
	if q.Since != nil {
		v.Set("since", strconv.FormatInt(*q.Since, 10))
	}
	if q.Agent != "" {
		v.Set("agent", q.Agent)
	}
	path := "/v1/events"
	if len(v) > 0 {
		path += "?" + v.Encode()
	}
	body, err := c.send(ctx, "GET", path, nil)
	if err != nil {
		return nil, err
	}
	return &EventStream{body: body, dec: json.NewDecoder(bufio.NewReader(body))}, nil
}

// Next decodes the next event into v (e.g. a *api.Event or a
// *map[string]any).
func (s *EventStream) Next(v any) error { return s.dec.Decode(v) }

// Close ends the stream.
func (s *EventStream) Close() error { return s.body.Close() }

func decodeResult(raw json.RawMessage, err error) (api.Result, error) {
	var res api.Result
	if err != nil {
		return res, err
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		return res, fmt.Errorf("daemon: decode result: %w", err)
	}
	return res, nil
}

// Call sends body (JSON, nil for none) to path and returns the JSON answer;
// an error status comes back as an *APIError.
func (c *Client) Call(ctx context.Context, method, path string, body any) (json.RawMessage, error) {
	return c.do(ctx, method, path, body)
}

func (c *Client) do(ctx context.Context, method, path string, body any) (json.RawMessage, error) {
	rc, err := c.send(ctx, method, path, body)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		return nil, fmt.Errorf("daemon: %s %s: read answer: %w", method, path, err)
	}
	return json.RawMessage(bytes.TrimSpace(data)), nil
}

// send performs the request and returns the body of a 2xx answer; any
// other answer becomes an *APIError. A client from Connect that finds no
// daemon listening starts one and sends the request again (it never
// reached a daemon, so nothing happens twice).
func (c *Client) send(ctx context.Context, method, path string, body any) (io.ReadCloser, error) {
	req := Request{Method: method, URL: c.base + path, Path: path, Header: map[string]string{}}
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return nil, fmt.Errorf("daemon: encode request: %w", err)
		}
		req.Body = data
		req.Header["Content-Type"] = "application/json"
	}
	for k, v := range c.headers {
		req.Header[k] = v
	}
	if c.token != "" {
		req.Header["Authorization"] = "Bearer " + c.token
	}
	return c.roundTrip(ctx, req)
}

// roundTrip sends req (see send).
func (c *Client) roundTrip(ctx context.Context, req Request) (io.ReadCloser, error) {
	method, path := req.Method, req.Path
	status, rc, err := c.rt.RoundTrip(ctx, req)
	if err != nil && c.autoStart != nil && errors.Is(err, ErrNoDaemon) {
		if serr := StartDetached(ctx, *c.autoStart); serr != nil {
			return nil, serr
		}
		status, rc, err = c.rt.RoundTrip(ctx, req)
	}
	if err != nil {
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return nil, fmt.Errorf("daemon: %s %s: %w", method, path, err)
	}
	if status/100 == 2 {
		return rc, nil
	}
	defer rc.Close()
	data, _ := io.ReadAll(io.LimitReader(rc, 64<<10))
	var eb api.ErrorBody
	msg := strings.TrimSpace(string(data))
	if json.Unmarshal(data, &eb) == nil && eb.Error != "" {
		msg = eb.Error
	}
	if msg == "" {
		msg = fmt.Sprintf("HTTP status %d", status)
	}
	return nil, &APIError{StatusCode: status, Message: msg, Field: eb.Field, Code: eb.Code}
}
