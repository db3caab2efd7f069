package sandbox

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"
)

// engineRT answers every Engine call with status and body.
type engineRT struct {
	status int
	body   string
}

func (rt engineRT) RoundTrip(r *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: rt.status, Header: http.Header{"Content-Type": {"application/json"}, "Api-Version": {"1.47"}},
		Body: io.NopCloser(strings.NewReader(rt.body)), Request: r}, nil
}

// TestEngineInternalErrorClassified replays issue 13 item 8: an Engine that
// answers 500 while it shuts down ("failed to update store for object type
// *libnetwork.endpoint") yields ErrEngineFailed (Unavailable class, 503 at
// the daemon) with the way out, not the Engine's internals.
func TestEngineInternalErrorClassified(t *testing.T) {
	var (
		logsMu sync.Mutex // the Engine health check logs from its own goroutine
		logs   strings.Builder
	)
	cli, err := client.New(client.WithHost("tcp://engine.invalid:2375"), client.WithAPIVersion("1.47"),
		client.WithHTTPClient(&http.Client{Transport: engineRT{500, `{"message":"failed to update store for object type *libnetwork.endpoint: open /var/lib/docker/network/files/local-kv.db: bad file descriptor"}`}}))
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Docker.Image = testImage
	m, err := NewManager(context.Background(), Options{Config: cfg, StateDir: t.TempDir(), Home: t.TempDir(), Client: cli,
		Logf: func(f string, a ...any) { logsMu.Lock(); defer logsMu.Unlock(); logs.WriteString(f) }})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	_, err = m.Ensure(context.Background(), Scope{AgentID: "x"})
	if !errors.Is(err, ErrEngineFailed) || !cerrdefs.IsUnavailable(err) {
		t.Fatalf("Ensure against a failing Engine: %v, want ErrEngineFailed (unavailable)", err)
	}
	if strings.Contains(err.Error(), "libnetwork") || !strings.Contains(err.Error(), "docker info") {
		t.Fatalf("message: %q", err)
	}
}
