package nodeexec

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

const testToken = "test-token-0123456789"

// testGateway is a Registry behind an httptest TLS server.
type testGateway struct {
	reg         *Registry
	srv         *httptest.Server
	url         string // wss://127.0.0.1:port/v1/nodes/connect
	fingerprint string
	// adopted is the Registry's Adoptions, read from its start when the
	// options name a gateway ID.
	adopted <-chan *AdoptedRun
}

func newTestGateway(t testing.TB, opts RegistryOptions) *testGateway {
	t.Helper()
	return newTestGatewayOn(t, opts, "")
}

// newTestGatewayOn listens on addr ("" = loopback).
func newTestGatewayOn(t testing.TB, opts RegistryOptions, addr string) *testGateway {
	t.Helper()
	if opts.Token == "" {
		opts.Token = testToken
	}
	if opts.Logf == nil {
		opts.Logf = t.Logf
	}
	reg, err := NewRegistry(opts)
	if err != nil {
		t.Fatal(err)
	}
	var adopted <-chan *AdoptedRun
	if opts.Key != "" {
		adopted = reg.Adoptions()
	}
	mux := http.NewServeMux()
	mux.Handle(ConnectPath, reg.Handler())
	srv := httptest.NewUnstartedServer(mux)
	if addr != "" {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		_ = srv.Listener.Close()
		srv.Listener = ln
	}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(func() {
		_ = reg.Close()
		srv.CloseClientConnections()
		srv.Close()
	})
	return &testGateway{
		reg: reg, srv: srv, adopted: adopted,
		url:         "wss://" + strings.TrimPrefix(srv.URL, "https://") + ConnectPath,
		fingerprint: Fingerprint(srv.Certificate().Raw),
	}
}

// waitNode waits until a node with this name is connected.
func (g *testGateway) waitNode(t testing.TB, name string) NodeInfo {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		for _, n := range g.reg.List() {
			if n.Name == name && n.Connected {
				return n
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("node %s did not connect; nodes: %+v", name, g.reg.List())
	return NodeInfo{}
}

// startAgent runs RunAgent in this process until the test ends.
func startAgent(t testing.TB, opts AgentOptions) {
	t.Helper()
	if opts.Token == "" {
		opts.Token = testToken
	}
	if opts.StateDir == "" {
		opts.StateDir = t.TempDir()
	}
	if opts.Shell == "" {
		opts.Shell = "/bin/sh"
	}
	if opts.Environ == nil {
		opts.Environ = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + opts.StateDir, "LANG=C.UTF-8"}
	}
	if opts.Logf == nil {
		opts.Logf = t.Logf
	}
	if opts.MinBackoff == 0 {
		opts.MinBackoff, opts.MaxBackoff = 50*time.Millisecond, 500*time.Millisecond
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- RunAgent(ctx, opts) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil && !errors.Is(err, context.Canceled) {
				t.Logf("agent %s: %v", opts.Name, err)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("agent %s did not stop", opts.Name)
		}
	})
}

// collected reads a RemoteProcess's streams to EOF.
type collected struct {
	wg             sync.WaitGroup
	mu             sync.Mutex
	stdout, stderr strings.Builder
}

func collect(p *RemoteProcess) *collected {
	c := &collected{}
	read := func(r io.Reader, b *strings.Builder) {
		defer c.wg.Done()
		buf := make([]byte, 4096)
		for {
			n, err := r.Read(buf)
			c.mu.Lock()
			b.Write(buf[:n])
			c.mu.Unlock()
			if err != nil {
				return
			}
		}
	}
	c.wg.Add(1)
	go read(p.Stdout(), &c.stdout)
	if e := p.Stderr(); e != nil {
		c.wg.Add(1)
		go read(e, &c.stderr)
	}
	return c
}

func (c *collected) Stdout() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stdout.String()
}

func (c *collected) wait() (string, string) {
	c.wg.Wait()
	return c.stdout.String(), c.stderr.String()
}

// waitFor polls cond until it holds or the limit passes.
func waitFor(t testing.TB, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", limit, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func marker(t testing.TB) string {
	return filepath.Join(t.TempDir(), "MARKER")
}

func runWait(t testing.TB, rp *RemoteProcess) (int, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return rp.Wait(ctx)
}

// testNodeKey is a node credential for a hand-made hello: the same for the
// same node id.
func testNodeKey(node string) string {
	sum := sha256.Sum256([]byte(node))
	return hex.EncodeToString(sum[:])
}
