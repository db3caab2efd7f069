package daemon

import (
	"context"
	"errors"
	"fmt"
	"github.com/sandboxctl/sandboxctl/nodeexec"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/sandboxctl/sandboxctl/api"

	"github.com/sandboxctl/sandboxctl/internal/apiclient"
)

// TestSecurityHandlerPanicAnswers500: a deliberately panicking handler (an
// injected fault: a built-in route's tools, an extra route, a self-auth
// route, over the socket and over TCP) answers 500 with an error body, and
// the daemon goes on serving. Before, net/http dropped the connection with
// no answer, and nothing logged the stack where the daemon logs.
func TestSecurityHandlerPanicAnswers500(t *testing.T) {
	boom := http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("injected handler fault") })
	var (
		mu     sync.Mutex
		logged strings.Builder
	)
	tools := &fakeTools{processFunc: func(context.Context, api.ProcessParams) (api.Result, error) {
		var offsets []int
		_ = offsets[len(offsets)-1]
		return api.Result{}, nil
	}}
	opts := Options{Listen: "127.0.0.1:0", Token: "s3cret-token-for-tests", Tools: tools,
		Metrics: boom,
		Nodes:   boomNodes{boom},
		Logf: func(format string, args ...any) {
			mu.Lock()
			defer mu.Unlock()
			fmt.Fprintf(&logged, format+"\n", args...)
		}}
	r := startServer(t, opts)

	// A built-in route whose tools panic.
	_, err := r.client.Process(t.Context(), api.ProcessParams{Action: "list"})
	var apiErr *apiclient.APIError
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusInternalServerError || !strings.Contains(apiErr.Error(), "internal error") {
		t.Fatalf("a panicking process handler: %v, want a 500 answer", err)
	}
	base := "http://" + r.srv.TCPAddr().String()
	for _, path := range []string{"/metrics", nodeexec.ConnectPath} {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, base+path, nil)
		req.Header.Set("Authorization", "Bearer s3cret-token-for-tests")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s: no answer: %v", path, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusInternalServerError || !strings.Contains(string(body), "internal error serving GET "+path) {
			t.Fatalf("%s: %d %s, want 500 with an error body", path, resp.StatusCode, body)
		}
	}
	if _, err := r.client.Health(t.Context()); err != nil {
		t.Fatalf("the daemon stopped serving: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Count(logged.String(), "(recovered): ") != 3 || !strings.Contains(logged.String(), "injected handler fault") {
		t.Fatalf("the panics were not logged: %q", logged.String())
	}
}

// boomNodes serves the node link with h.
type boomNodes struct{ h http.Handler }

func (boomNodes) List() []nodeexec.NodeInfo { return nil }
func (b boomNodes) Handler() http.Handler   { return b.h }
