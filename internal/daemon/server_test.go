package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandboxctl/sandboxctl/sessions/toolapi"

	cerrdefs "github.com/containerd/errdefs"

	"github.com/sandboxctl/sandboxctl/api"
	"github.com/sandboxctl/sandboxctl/internal/apiclient"
	"github.com/sandboxctl/sandboxctl/internal/apiclient/tcpclient"
)

// fakeTools is a func-field fake: a nil field answers with the zero value.
type fakeTools struct {
	execFunc    func(ctx context.Context, p api.ExecParams) (api.Result, error)
	processFunc func(ctx context.Context, p api.ProcessParams) (api.Result, error)
	closed      atomic.Int32
}

func (f *fakeTools) Exec(ctx context.Context, p api.ExecParams) (api.Result, error) {
	if f.execFunc == nil {
		return api.Result{}, nil
	}
	return f.execFunc(ctx, p)
}

func (f *fakeTools) Process(ctx context.Context, p api.ProcessParams) (api.Result, error) {
	if f.processFunc == nil {
		return api.Result{}, nil
	}
	return f.processFunc(ctx, p)
}

func (f *fakeTools) Close(context.Context) error {
	f.closed.Add(1)
	return nil
}

type running struct {
	srv    *Server
	client *apiclient.Client
	done   chan error
}

// startServer listens with opts (StateDir defaults to a fresh temp dir) and
// serves until the test ends.
func startServer(t testing.TB, opts Options) *running {
	t.Helper()
	if opts.StateDir == "" {
		opts.StateDir = t.TempDir()
	}
	if opts.Tools == nil {
		opts.Tools = &fakeTools{}
	}
	if opts.Logf == nil {
		opts.Logf = t.Logf
	}
	opts.Version = "test"
	srv, err := Listen(t.Context(), opts)
	if err != nil {
		t.Fatalf("Listen: %v", err)
	}
	r := &running{srv: srv, client: apiclient.NewUnixClient(srv.SocketPath()), done: make(chan error, 1)}
	go func() { r.done <- srv.Serve(context.Background()) }()
	t.Cleanup(func() { r.stop(t) })
	return r
}

func (r *running) stop(t testing.TB) {
	t.Helper()
	r.srv.RequestShutdown()
	select {
	case err := <-r.done:
		if err != nil {
			t.Errorf("Serve: %v", err)
		}
		r.done <- err // stop is idempotent
	case <-time.After(30 * time.Second):
		t.Fatalf("daemon did not stop within 30s")
	}
	r.client.CloseIdleConnections()
}

// postRaw sends body as is to the daemon's socket.
func postRaw(t *testing.T, srv *Server, path string, body []byte) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://sandboxctl"+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", srv.SocketPath())
	}}}
	defer hc.CloseIdleConnections()
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var eb api.ErrorBody
	_ = json.NewDecoder(resp.Body).Decode(&eb)
	return resp.StatusCode, eb.Error
}

func TestSocketModeAndFiles(t *testing.T) {
	r := startServer(t, Options{})
	fi, err := os.Stat(r.srv.SocketPath())
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Type() != os.ModeSocket || fi.Mode().Perm() != 0o600 {
		t.Errorf("socket mode = %v, want a socket with 0600", fi.Mode())
	}
	pid, err := api.ReadPIDFile(filepath.Dir(r.srv.SocketPath()))
	if err != nil || pid != os.Getpid() {
		t.Errorf("pid file = %d, %v; want %d", pid, err, os.Getpid())
	}
	// No temp directories left behind by the private bind.
	matches, _ := filepath.Glob(filepath.Join(filepath.Dir(r.srv.SocketPath()), ".sock-*"))
	if len(matches) != 0 {
		t.Errorf("left-over temp dirs: %v", matches)
	}
}

func TestHealth(t *testing.T) {
	r := startServer(t, Options{})
	h, err := r.client.Health(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !h.OK || h.PID != os.Getpid() || h.Version != "test" {
		t.Errorf("health = %+v", h)
	}
}

func TestExecRoundTripFake(t *testing.T) {
	tools := &fakeTools{execFunc: func(_ context.Context, p api.ExecParams) (api.Result, error) {
		return api.Result{
			Content: []api.Content{{Type: "text", Text: "ran " + p.Command}},
			Details: api.Details{Status: "completed", ExitCode: api.Code(0), AgentID: new(p.AgentID)},
		}, nil
	}}
	r := startServer(t, Options{Tools: tools})
	res, err := r.client.Exec(t.Context(), api.ExecParams{Command: "echo hi", AgentID: "a1"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Content[0].Text != "ran echo hi" || res.Details.AgentID == nil || *res.Details.AgentID != "a1" {
		t.Errorf("result = %+v", res)
	}
}

func TestBadRequests(t *testing.T) {
	r := startServer(t, Options{})
	big := append([]byte(`{"command":"`), bytes.Repeat([]byte("x"), MaxBodyBytes+10)...)
	big = append(big, `"}`...)
	tests := []struct {
		name     string
		path     string
		body     []byte
		wantCode int
		wantMsg  string
	}{
		{"unknown field", "/v1/tools/exec", []byte(`{"command":"true","bogusField":1}`), 400, `"bogusField"`},
		{"unknown process field", "/v1/tools/process", []byte(`{"action":"list","nope":true}`), 400, `"nope"`},
		{"wrong type", "/v1/tools/exec", []byte(`{"command":5}`), 400, `field "command"`},
		{"empty body", "/v1/tools/exec", nil, 400, "empty"},
		{"malformed", "/v1/tools/exec", []byte(`{"command":`), 400, "truncated"},
		{"not an object", "/v1/tools/exec", []byte(`[1]`), 400, "JSON object"},
		{"trailing data", "/v1/tools/exec", []byte(`{"command":"a"} {}`), 400, "after the JSON object"},
		{"oversize", "/v1/tools/exec", big, 413, "larger than"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, msg := postRaw(t, r.srv, tc.path, tc.body)
			if code != tc.wantCode || !strings.Contains(msg, tc.wantMsg) {
				t.Errorf("got %d %q, want %d containing %q", code, msg, tc.wantCode, tc.wantMsg)
			}
		})
	}
}

func TestErrorClasses(t *testing.T) {
	var next error
	tools := &fakeTools{execFunc: func(context.Context, api.ExecParams) (api.Result, error) {
		return api.Result{}, next
	}}
	errDown := errors.New("docker is not reachable")
	r := startServer(t, Options{
		Tools:          tools,
		IsInvalidInput: func(err error) bool { return errors.Is(err, toolapi.ErrInvalidInput) },
		IsUnavailable:  func(err error) bool { return errors.Is(err, errDown) },
	})
	tests := []struct {
		err      error
		wantCode int
	}{
		{&toolapi.InputError{Field: "command", Msg: "Provide a command to start."}, 400},
		{cerrdefs.ErrNotFound.WithMessage("gone"), 404},
		{fmt.Errorf("exec: %w", errDown), 503},
		{errors.New("boom"), 500},
	}
	for _, tc := range tests {
		next = tc.err
		_, err := r.client.Exec(t.Context(), api.ExecParams{Command: "x"})
		var apiErr *apiclient.APIError
		if !errors.As(err, &apiErr) || apiErr.StatusCode != tc.wantCode || apiErr.Message != tc.err.Error() {
			t.Errorf("%v: got %v (%#v), want %d", tc.err, err, apiErr, tc.wantCode)
		}
	}
	next = &toolapi.InputError{Msg: "bad"}
	if _, err := r.client.Exec(t.Context(), api.ExecParams{}); !cerrdefs.IsInvalidArgument(err) || errors.Is(err, api.ErrCommandNotFound) {
		t.Errorf("400 is not ErrInvalidArgument on the client side, or is a command not found: %v", err)
	}
	// A program not found crosses as its code, not only as its text: the
	// client's error is api.ErrCommandNotFound whatever the message says.
	next = &toolapi.InputError{Field: "start", Msg: "exec: start on sandbox host: no program here", Err: fmt.Errorf("refused: %w", api.ErrCommandNotFound)}
	_, err := r.client.Exec(t.Context(), api.ExecParams{Command: "x"})
	var apiErr *apiclient.APIError
	if !errors.As(err, &apiErr) || apiErr.Field != "start" || apiErr.Code != api.ErrorCodeCommandNotFound ||
		!errors.Is(err, api.ErrCommandNotFound) || !cerrdefs.IsInvalidArgument(err) {
		t.Errorf("command not found: %v (%#v)", err, apiErr)
	}
}

func TestUnknownEndpointAndMethod(t *testing.T) {
	r := startServer(t, Options{})
	if code, _ := postRaw(t, r.srv, "/v1/nope", []byte(`{}`)); code != 404 {
		t.Errorf("unknown endpoint: %d, want 404", code)
	}
	if code, _ := postRaw(t, r.srv, "/healthz", []byte(`{}`)); code != 405 {
		t.Errorf("POST /healthz: %d, want 405", code)
	}
}

func TestTCPTokenAuth(t *testing.T) {
	r := startServer(t, Options{Listen: "127.0.0.1:0", Token: "s3cret-token-for-tests"})
	base := "http://" + r.srv.TCPAddr().String()
	tests := []struct {
		name, token string
		wantErr     bool
	}{
		{"no token", "", true},
		{"wrong token", "s3cret-token-for-tesTs", true},
		{"prefix of token", "s3cret", true},
		{"right token", "s3cret-token-for-tests", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := tcpclient.New(base, tc.token, nil)
			defer c.CloseIdleConnections()
			_, err := c.Health(t.Context())
			var apiErr *apiclient.APIError
			if tc.wantErr {
				if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusUnauthorized {
					t.Errorf("got %v, want 401", err)
				}
				return
			}
			if err != nil {
				t.Errorf("got %v, want success", err)
			}
		})
	}
	// Shutdown is for the socket's owner only, never over TCP.
	c := tcpclient.New(base, "s3cret-token-for-tests", nil)
	defer c.CloseIdleConnections()
	var apiErr *apiclient.APIError
	if err := c.Shutdown(t.Context()); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound {
		t.Errorf("shutdown over TCP: %v, want 404", err)
	}
}

func TestTCPTokenFileGenerated(t *testing.T) {
	dir := t.TempDir()
	r := startServer(t, Options{StateDir: dir, Listen: "127.0.0.1:0"})
	fi, err := os.Stat(filepath.Join(dir, api.TokenFileName))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("token file mode %v, want 0600", fi.Mode().Perm())
	}
	tok, err := LoadOrCreateToken(dir)
	if err != nil || tok != r.srv.Token() || len(tok) != 64 {
		t.Fatalf("token %q (%v), server has %q", tok, err, r.srv.Token())
	}
	c := tcpclient.New("http://"+r.srv.TCPAddr().String(), tok, nil)
	defer c.CloseIdleConnections()
	if _, err := c.Health(t.Context()); err != nil {
		t.Errorf("health with the generated token: %v", err)
	}
}

func TestTokenFileTooOpenRefused(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, api.TokenFileName), []byte("abc\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadOrCreateToken(dir); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("got %v, want a refusal naming chmod 600", err)
	}
}

func TestSecondDaemonRefused(t *testing.T) {
	dir := t.TempDir()
	startServer(t, Options{StateDir: dir})
	_, err := Listen(t.Context(), Options{StateDir: dir, Tools: &fakeTools{}})
	if !errors.Is(err, ErrAlreadyRunning) {
		t.Fatalf("second Listen: %v, want ErrAlreadyRunning", err)
	}
	// The refused daemon must not have touched the first one's files.
	if _, err := os.Stat(api.SocketPath(dir)); err != nil {
		t.Errorf("socket gone after refused start: %v", err)
	}
	if pid, err := api.ReadPIDFile(dir); err != nil || pid != os.Getpid() {
		t.Errorf("pid file changed: %d %v", pid, err)
	}
}

func TestStaleSocketRemoved(t *testing.T) {
	dir := t.TempDir()
	ln, err := net.Listen("unix", api.SocketPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close() // a dead daemon's socket: the file stays, nothing answers
	r := startServer(t, Options{StateDir: dir})
	if _, err := r.client.Health(t.Context()); err != nil {
		t.Fatalf("health after replacing a stale socket: %v", err)
	}
}

func TestNonSocketInTheWay(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(api.SocketPath(dir), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Listen(t.Context(), Options{StateDir: dir, Tools: &fakeTools{}}); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Fatalf("got %v, want a not-a-socket refusal", err)
	}
}

func TestShutdownEndpoint(t *testing.T) {
	dir := t.TempDir()
	tools := &fakeTools{}
	r := startServer(t, Options{StateDir: dir, Tools: tools})
	if err := apiclient.Stop(t.Context(), dir); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	select {
	case err := <-r.done:
		r.done <- err
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after shutdown")
	}
	if tools.closed.Load() != 1 {
		t.Errorf("tools closed %d times, want 1", tools.closed.Load())
	}
	for _, name := range []string{api.SocketName, api.PIDFileName} {
		if _, err := os.Stat(filepath.Join(dir, name)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s still there after shutdown: %v", name, err)
		}
	}
	// The directory is free again: a new daemon starts.
	startServer(t, Options{StateDir: dir})
	// apiclient.Stop with nothing running is not an error.
	if err := apiclient.Stop(t.Context(), t.TempDir()); err != nil {
		t.Errorf("apiclient.Stop without a daemon: %v", err)
	}
}

func TestEventsStreamEndsOnShutdown(t *testing.T) {
	events := make(chan api.Event, 1)
	r := startServer(t, Options{Events: subscribeFunc(func(context.Context) <-chan api.Event { return events })})
	stream, err := r.client.Events(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	events <- api.Event{Text: "hello"}
	var got map[string]any
	if err := stream.Next(&got); err != nil || got["text"] != "hello" {
		t.Fatalf("event %v, %v", got, err)
	}
	r.srv.RequestShutdown()
	if err := stream.Next(&got); err == nil {
		t.Errorf("stream still open after shutdown: %v", got)
	}
}

func TestSandboxesUnavailable(t *testing.T) {
	r := startServer(t, Options{})
	if _, err := r.client.Sandboxes(t.Context()); !cerrdefs.IsUnavailable(err) {
		t.Errorf("got %v, want 503", err)
	}
}

func TestShortTokenRefused(t *testing.T) {
	_, err := Listen(t.Context(), Options{StateDir: t.TempDir(), Tools: &fakeTools{}, Listen: "127.0.0.1:0", Token: "short"})
	if err == nil || !strings.Contains(err.Error(), "at least 16") {
		t.Fatalf("got %v, want a refusal of the short token", err)
	}
}

// subscribeFunc is an EventSource of a function.
type subscribeFunc func(ctx context.Context) <-chan api.Event

func (f subscribeFunc) Subscribe(ctx context.Context) <-chan api.Event { return f(ctx) }
