package runtimecli

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"time"

	"github.com/docker/go-units"
	"golang.org/x/net/netutil"

	"github.com/sandboxctl/sandboxctl/internal/daemon"
	"github.com/sandboxctl/sandboxctl/internal/e2b"
	"github.com/sandboxctl/sandboxctl/sandbox"
	"github.com/sandboxctl/sandboxctl/sessions"
	"github.com/sandboxctl/sandboxctl/sessions/config"
)

// e2bListener is the E2B API of `serve --e2b ADDR` (internal/e2b): bound
// before the daemon adopts anything, served once it runs.
type e2bListener struct {
	srv *e2b.Server
	ln  net.Listener
	tls bool
}

// listenE2B binds addr for the E2B API. API keys are the agent tokens of
// <state>/agent-tokens.json.
func listenE2B(addr, certFile, keyFile string, cfg config.File, state string, tools e2b.Tools, mgr *sessions.Manager, streams e2b.Streams, sbx *sandbox.Manager, filesMax int64, logf func(string, ...any)) (*e2bListener, error) {
	if sbx == nil {
		return nil, errors.New("serve --e2b: the E2B API needs the sandbox host (Docker)")
	}
	keys, err := daemon.LoadAgentTokens(filepath.Join(state, daemon.AgentTokensFileName))
	if err != nil {
		return nil, err
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("serve --e2b: no API keys: add agent tokens to %s ({\"agentId\": \"token\"}, mode 0600)", filepath.Join(state, daemon.AgentTokensFileName))
	}
	memMB := 0
	if n, err := units.RAMInBytes(cfg.Sandbox.Docker.Memory); err == nil && n > 0 {
		memMB = int(n >> 20)
	}
	srv, err := e2b.New(e2b.Options{Tools: tools, Streams: streams, Sandboxes: sbx, Sessions: mgr.Sessions, AgentTokens: keys,
		Pauser: sbx, ContainerPrefix: cfg.Sandbox.Docker.ContainerPrefix,
		ScopeMode: cfg.Sandbox.Scope, StateDir: state, FilesMaxBytes: filesMax,
		Templates: func(name string) error { _, err := cfg.Sandbox.TemplateDocker(name); return err },
		CPUCount:  max(int(cfg.Sandbox.Docker.CPUs+0.5), 1), MemoryMB: memMB, Logf: logf})
	if err != nil {
		return nil, fmt.Errorf("serve --e2b: %w", err)
	}
	var tlsCfg *tls.Config
	if certFile != "" {
		// Loaded here, so a bad pair fails the start, not the listener.
		pair, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("serve --e2b: TLS: %w", err)
		}
		tlsCfg = &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("serve --e2b: %w", err)
	}
	ln = netutil.LimitListener(ln, daemon.DefaultMaxConns)
	if tlsCfg != nil {
		ln = tls.NewListener(ln, tlsCfg)
	}
	return &e2bListener{srv: srv, ln: ln, tls: tlsCfg != nil}, nil
}

// serve runs the E2B API until ctx is done.
func (l *e2bListener) serve(ctx context.Context, logf func(string, ...any)) {
	hs := &http.Server{Handler: l.srv, ReadHeaderTimeout: 10 * time.Second, BaseContext: func(net.Listener) context.Context { return ctx }}
	go l.srv.Run(ctx)
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = hs.Shutdown(sctx)
		_ = hs.Close()
	}()
	scheme := "http"
	if l.tls {
		scheme = "https"
	}
	logf("E2B API on %s://%s", scheme, l.ln.Addr())
	if err := hs.Serve(l.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		logf("warning: E2B API: %v", err)
	}
}
