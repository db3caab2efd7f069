package apiclient

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/sandboxctl/sandboxctl/api"
)

// serveUnix runs h (net/http's server, as the daemon does) on a unix socket
// in a fresh directory and returns the socket path.
func serveUnix(t *testing.T, h http.Handler) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "apic")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	path := filepath.Join(dir, api.SocketName)
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return path
}

func TestUnixTransportAgainstNetHTTP(t *testing.T) {
	big := strings.Repeat("x", 300_000) // larger than any server buffer: close-delimited
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/tools/exec", func(w http.ResponseWriter, r *http.Request) {
		var p api.ExecParams
		if err := json.NewDecoder(r.Body).Decode(&p); err != nil || r.Header.Get("Content-Type") != "application/json" {
			w.WriteHeader(http.StatusBadRequest)
			_ = json.NewEncoder(w).Encode(api.ErrorBody{Error: fmt.Sprintf("bad body: %v", err)})
			return
		}
		text := "ran " + p.Command
		if p.Command == "big" {
			text = big
		}
		_ = json.NewEncoder(w).Encode(api.Result{Content: []api.Content{{Type: "text", Text: text}}, Details: api.Details{Status: "completed"}})
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(api.Health{OK: true, PID: 42, Version: "t"})
	})
	mux.HandleFunc("GET /v1/events", func(w http.ResponseWriter, r *http.Request) {
		for i := range 3 {
			_ = json.NewEncoder(w).Encode(api.Event{Type: "exit", Text: fmt.Sprint(i)})
			w.(http.Flusher).Flush()
		}
		<-r.Context().Done() // an open stream, as the daemon's
	})
	mux.HandleFunc("POST /v1/approvals/{id}", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNotFound)
		_ = json.NewEncoder(w).Encode(api.ErrorBody{Error: "unknown approval " + r.PathValue("id")})
	})
	c := NewUnixClient(serveUnix(t, mux))
	ctx := t.Context()

	if h, err := c.Health(ctx); err != nil || h.PID != 42 {
		t.Fatalf("health: %+v %v", h, err)
	}
	for _, cmd := range []string{"echo hi", "big"} {
		res, err := c.Exec(ctx, api.ExecParams{Command: cmd})
		want := "ran " + cmd
		if cmd == "big" {
			want = big
		}
		if err != nil || len(res.Content) != 1 || res.Content[0].Text != want {
			t.Fatalf("exec %q: %d bytes, %v", cmd, len(fmt.Sprint(res)), err)
		}
	}
	_, err := c.Call(ctx, "POST", "/v1/approvals/nope", map[string]string{"decision": "deny"})
	var apiErr *APIError
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 404 || apiErr.Message != "unknown approval nope" || !errors.Is(err, cerrdefs.ErrNotFound) {
		t.Fatalf("error answer: %v", err)
	}

	sctx, cancel := context.WithCancel(ctx)
	stream, err := c.Events(sctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		var ev api.Event
		if err := stream.Next(&ev); err != nil || ev.Text != fmt.Sprint(i) {
			t.Fatalf("event %d: %+v %v", i, ev, err)
		}
	}
	done := make(chan error, 1)
	go func() { var ev api.Event; done <- stream.Next(&ev) }()
	cancel() // ends a blocked read
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("read after cancel succeeded")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("cancelling the context did not end the stream")
	}
	_ = stream.Close()
}

func TestUnixTransportRefusesInjection(t *testing.T) {
	var requests atomic.Int32
	c := NewUnixClient(serveUnix(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { requests.Add(1) })))
	for _, path := range []string{"/v1/approvals/a b", "/v1/x\r\nX-Evil: 1", "no-slash"} {
		if _, err := c.Call(t.Context(), "POST", path, nil); err == nil || !strings.Contains(err.Error(), "invalid request") {
			t.Errorf("path %q: %v", path, err)
		}
	}
	if n := requests.Load(); n != 0 {
		t.Fatalf("%d requests reached the server", n)
	}
}

func TestNoDaemon(t *testing.T) {
	dir := t.TempDir()
	_, err := NewUnixClient(api.SocketPath(dir)).Health(t.Context())
	if !errors.Is(err, ErrNoDaemon) {
		t.Fatalf("no socket: %v", err)
	}
	// A stale socket file nobody accepts on counts as no daemon too.
	l, err := net.Listen("unix", api.SocketPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	_ = l.Close()
	if _, err := NewUnixClient(api.SocketPath(dir)).Health(t.Context()); !errors.Is(err, ErrNoDaemon) {
		t.Fatalf("stale socket: %v", err)
	}
	// Connect would start one, but cannot: the reason is reported.
	why := errors.New("sandboxctld not found")
	_, err = Connect(StartOptions{StateDir: dir, CommandErr: why}).Health(t.Context())
	if !errors.Is(err, why) {
		t.Fatalf("auto-start without a command: %v", err)
	}
}

// Connect looks for the daemon's command (FindCommand) only when a daemon
// must be started: a request to a running daemon does not, and a start
// that cannot find one reports why.
func TestConnectFindsTheCommandOnlyToStart(t *testing.T) {
	var finds atomic.Int32
	why := errors.New("sandboxctld not found")
	find := func() ([]string, error) {
		finds.Add(1)
		return nil, why
	}
	sock := serveUnix(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"ok":true}`)
	}))
	if _, err := Connect(StartOptions{StateDir: filepath.Dir(sock), FindCommand: find}).Health(t.Context()); err != nil {
		t.Fatalf("health of a running daemon: %v", err)
	}
	if n := finds.Load(); n != 0 {
		t.Fatalf("FindCommand was called %d times for a running daemon", n)
	}
	_, err := Connect(StartOptions{StateDir: t.TempDir(), FindCommand: find}).Health(t.Context())
	if !errors.Is(err, why) || finds.Load() != 1 {
		t.Fatalf("auto-start without a daemon binary: %v (FindCommand called %d times)", err, finds.Load())
	}
}

// An answer cut short of its Content-Length is an error, not a shorter
// body.
func TestUnixTransportTruncatedAnswer(t *testing.T) {
	dir, err := os.MkdirTemp("", "apic")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	l, err := net.Listen("unix", filepath.Join(dir, api.SocketName))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		buf := make([]byte, 4096)
		_, _ = c.Read(buf)
		_, _ = c.Write([]byte("HTTP/1.0 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"ok\":"))
		_ = c.Close()
	}()
	_, err = NewUnixClient(filepath.Join(dir, api.SocketName)).Call(t.Context(), "GET", "/healthz", nil)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("truncated answer: %v", err)
	}
}

// TestUnixAnswerBeforeTheBody: a daemon that answers (404, 413) before it
// read a streamed body, and closes, makes the client's write fail; the
// client gives the daemon's answer, not the broken pipe (CI saw "write:
// broken pipe" instead of "no sandbox for scope").
func TestUnixAnswerBeforeTheBody(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "s")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		// Read the request line and headers only, answer, close.
		br := bufio.NewReader(c)
		for {
			line, err := br.ReadString('\n')
			if err != nil || line == "\r\n" {
				break
			}
		}
		body := `{"error":"no sandbox for scope agent:x"}`
		fmt.Fprintf(c, "HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		_ = c.Close()
	}()
	const size = 64 << 20 // far more than the socket buffers hold
	status, rc, err := Unix{Path: sock}.RoundTrip(context.Background(), Request{Method: "PUT", Path: "/v1/files?path=/x",
		Stream: io.LimitReader(zeroReader{}, size), StreamLen: size})
	if err != nil {
		t.Fatalf("round trip: %v (want the daemon's 404)", err)
	}
	defer rc.Close()
	b, _ := io.ReadAll(rc)
	if status != 404 || !strings.Contains(string(b), "no sandbox for scope") {
		t.Fatalf("answer %d %s", status, b)
	}
}

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
