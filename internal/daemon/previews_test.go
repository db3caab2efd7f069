package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/sandboxctl/sandboxctl/api"
	"github.com/sandboxctl/sandboxctl/vocab"
)

// hostDialer dials a real TCP server of the test for every port: the
// proxy's logic (token, rewriting, upgrades) without a sandbox. The relay
// into a sandbox is sandbox.TestDialPortReachesAServerInTheSandbox.
type hostDialer struct {
	addr  string
	dials atomic.Int32
}

func (d *hostDialer) DialPort(ctx context.Context, _, _ string, _ int) (net.Conn, error) {
	d.dials.Add(1)
	var nd net.Dialer
	return nd.DialContext(ctx, "tcp", d.addr)
}

// TestPreviewsTokenAndProxy: a preview answers only with its token (no
// token, a wrong one, an unknown or closed preview: 401/404 and nothing
// reaches the port, not even a connection); with it, HTTP and a WebSocket
// pass through with the prefix, the token and its cookie removed.
func TestPreviewsTokenAndProxy(t *testing.T) {
	var (
		mu   sync.Mutex
		seen []*http.Request
	)
	backend := http.NewServeMux()
	backend.HandleFunc("/ws", func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer c.CloseNow()
		typ, msg, err := c.Read(r.Context())
		if err == nil {
			_ = c.Write(r.Context(), typ, append([]byte("echo "), msg...))
		}
	})
	backend.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Clone(context.Background()))
		mu.Unlock()
		_, _ = io.WriteString(w, "page "+r.URL.Path)
	})
	port := httptest.NewServer(backend)
	defer port.Close()
	dial := &hostDialer{addr: port.Listener.Addr().String()}
	var events []api.Event
	pv := NewPreviews(dial, PreviewOptions{Publish: func(e api.Event) { mu.Lock(); events = append(events, e); mu.Unlock() }})
	defer pv.Close()
	mux := http.NewServeMux()
	for pat, h := range pv.Routes() {
		mux.Handle(pat, h)
	}
	for pat, h := range pv.ProxyRoutes() {
		mux.Handle(pat, h)
	}
	srv := httptest.NewServer(mux)
	defer srv.Close()

	resp, err := http.Post(srv.URL+"/v1/previews", "application/json", strings.NewReader(`{"agentId":"a1","port":8080}`))
	if err != nil {
		t.Fatal(err)
	}
	var opened api.Preview
	_ = json.NewDecoder(resp.Body).Decode(&opened)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated || opened.Token == "" || opened.Path != "/preview/"+opened.ID+"/" || opened.Port != 8080 {
		t.Fatalf("open: %s %+v", resp.Status, opened)
	}
	for _, bad := range []string{`{"agentId":"a1","port":0}`, `{"port":80}`, `{"agentId":"a1","port":70000}`} {
		resp, err := http.Post(srv.URL+"/v1/previews", "application/json", strings.NewReader(bad))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("open %s: %s, want 400", bad, resp.Status)
		}
	}
	resp, _ = http.Get(srv.URL + "/v1/previews")
	list, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(list), opened.ID) || strings.Contains(string(list), opened.Token) {
		t.Fatalf("list shows %s", list)
	}

	get := func(path string, hdr http.Header) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", srv.URL+path, nil)
		for k, v := range hdr {
			req.Header[k] = v
		}
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	wrong := strings.Repeat("0", len(opened.Token))
	for name, tc := range map[string]struct {
		path string
		hdr  http.Header
		want int
	}{
		"no token":          {opened.Path + "x", nil, http.StatusUnauthorized},
		"wrong header":      {opened.Path + "x", http.Header{api.PreviewTokenHeader: {wrong}}, http.StatusUnauthorized},
		"wrong query":       {opened.Path + "x?" + api.PreviewTokenParam + "=" + wrong, nil, http.StatusUnauthorized},
		"wrong cookie":      {opened.Path + "x", http.Header{"Cookie": {previewCookieName(opened.ID) + "=" + wrong}}, http.StatusUnauthorized},
		"token prefix":      {opened.Path + "x", http.Header{api.PreviewTokenHeader: {opened.Token[:10]}}, http.StatusUnauthorized},
		"unknown preview":   {"/preview/0123456789abcdef/x", http.Header{api.PreviewTokenHeader: {opened.Token}}, http.StatusNotFound},
		"other cookie name": {opened.Path + "x", http.Header{"Cookie": {"sandboxctl_preview_other=" + opened.Token}}, http.StatusUnauthorized},
	} {
		if code, body := get(tc.path, tc.hdr); code != tc.want {
			t.Errorf("%s: %d %s, want %d", name, code, body, tc.want)
		}
	}
	if n := dial.dials.Load(); n != 0 {
		t.Fatalf("refused requests dialed the port %d times", n)
	}
	mu.Lock()
	if len(seen) != 0 {
		t.Fatalf("the port saw %d requests before any had the token", len(seen))
	}
	mu.Unlock()

	// The token as a header.
	if code, body := get(opened.Path+"a/b?q=1", http.Header{api.PreviewTokenHeader: {opened.Token}}); code != 200 || body != "page /a/b" {
		t.Fatalf("with the token: %d %q", code, body)
	}
	// A browser's first visit: the token in the URL becomes a cookie.
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar}
	resp, err = browser.Get(srv.URL + opened.Path + "index.html?" + api.PreviewTokenParam + "=" + opened.Token + "&keep=1")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "page /index.html" || resp.Request.URL.Query().Get("keep") != "1" || resp.Request.URL.Query().Has(api.PreviewTokenParam) {
		t.Fatalf("first visit: %s %q at %s", resp.Status, body, resp.Request.URL)
	}
	mu.Lock()
	for _, r := range seen {
		raw := r.URL.String() + " " + r.Header.Get("Cookie") + r.Header.Get(api.PreviewTokenHeader)
		if strings.Contains(raw, opened.Token) {
			t.Errorf("the port saw the token: %s", raw)
		}
	}
	mu.Unlock()

	// A WebSocket passes through.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http")+opened.Path+"ws",
		&websocket.DialOptions{HTTPHeader: http.Header{api.PreviewTokenHeader: {opened.Token}}})
	if err != nil {
		t.Fatalf("websocket through the preview: %v", err)
	}
	if err := ws.Write(ctx, websocket.MessageText, []byte("hi")); err != nil {
		t.Fatal(err)
	}
	if _, msg, err := ws.Read(ctx); err != nil || !bytes.Equal(msg, []byte("echo hi")) {
		t.Fatalf("websocket echo: %q, %v", msg, err)
	}
	ws.CloseNow()

	// Closed: gone for everyone, the token included.
	req, _ := http.NewRequest("DELETE", srv.URL+"/v1/previews/"+opened.ID, nil)
	resp, err = http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("close: %v %v", resp, err)
	}
	resp.Body.Close()
	if code, _ := get(opened.Path+"x", http.Header{api.PreviewTokenHeader: {opened.Token}}); code != http.StatusNotFound {
		t.Fatalf("after close: %d, want 404", code)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(events) != 2 || events[0].Type != vocab.EventPreview || events[0].Details.Action != "opened" || events[1].Details.Action != "closed" || events[1].Details.ID != opened.ID || events[0].AgentID != "a1" {
		t.Fatalf("events: %+v", events)
	}
}
