package sandbox

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"
)

// TestDialPortReachesAServerInTheSandbox: a web server listening on the
// loopback of a sandbox without network (busybox httpd) answers through
// DialPort byte for byte, a port nothing listens on is ErrPortClosed, and
// the container publishes no port on the host.
func TestDialPortReachesAServerInTheSandbox(t *testing.T) {
	m := newTestManager(t, nil)
	ctx := ctxT(t)
	s := Scope{AgentID: "relay"}
	res, err := m.Ensure(ctx, s)
	if err != nil {
		t.Fatalf("Ensure: %v", err)
	}
	if !res.Supervised {
		t.Fatalf("sandbox not supervised: %s", res.SupervisorNote)
	}
	page := make([]byte, 1<<20)
	_, _ = rand.Read(page)
	if err := m.WriteFiles(ctx, s, "/workspace", 1<<20, tarOf(t, "www/", "")); err != nil {
		t.Fatalf("WriteFiles: %v", err)
	}
	if err := m.WriteFile(ctx, s, "/workspace/www/page.bin", 0o644, 2<<20, bytes.NewReader(page)); err != nil {
		t.Fatalf("WriteFile: %v", err)
	}
	if _, err := m.DialPort(ctx, s, 8080); !errors.Is(err, ErrPortClosed) {
		t.Fatalf("DialPort before the server listens: %v, want ErrPortClosed", err)
	}
	st, err := m.Start(ctx, s, ExecOptions{Cmd: []string{"sh", "-c", "exec busybox httpd -f -vv -p 127.0.0.1:8080 -h /workspace/www 2>/workspace/httpd.log"}})
	if err != nil {
		t.Fatalf("start httpd: %v", err)
	}
	t.Cleanup(func() {
		kctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = st.Kill(kctx)
	})

	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return m.DialPort(ctx, s, 8080)
	}}}
	defer hc.CloseIdleConnections()
	var resp *http.Response
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err = hc.Get("http://sandbox/page.bin")
		if err == nil || !errors.Is(err, ErrPortClosed) || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond) // httpd not listening yet
	}
	if err != nil {
		t.Fatalf("GET through the relay: %v", err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || !bytes.Equal(body, page) {
		t.Fatalf("GET through the relay: %s, %d bytes (want %d, equal %v), %v", resp.Status, len(body), len(page), bytes.Equal(body, page), err)
	}
	var log bytes.Buffer
	if err := m.ReadFiles(ctx, s, "/workspace/httpd.log", 1<<20, &log); err != nil {
		t.Fatalf("read httpd.log: %v", err)
	}
	if !strings.Contains(log.String(), "page.bin") {
		t.Fatalf("httpd's log does not show the request:\n%s", log.String())
	}

	insp, err := m.first().cli.ContainerInspect(ctx, res.ID, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pb := insp.Container.HostConfig.PortBindings; len(pb) > 0 {
		t.Fatalf("the sandbox publishes ports: %v", pb)
	}
	if insp.Container.HostConfig.PublishAllPorts {
		t.Fatal("the sandbox publishes all ports")
	}
	if mode := string(insp.Container.HostConfig.NetworkMode); mode != "none" {
		t.Fatalf("network mode %q, want none", mode)
	}
}
