package daemon

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/containerd/errdefs/pkg/errhttp"

	"github.com/sandboxctl/sandboxctl/api"
	"github.com/sandboxctl/sandboxctl/internal/atomicfile"
	"github.com/sandboxctl/sandboxctl/internal/audit"
	"github.com/sandboxctl/sandboxctl/internal/console"
	"github.com/sandboxctl/sandboxctl/nodeexec"
	"github.com/sandboxctl/sandboxctl/sessions/toolapi"
	"log/slog"
)

// MaxBodyBytes is the largest request body the daemon reads (1 MiB); larger
// bodies are refused with 413.
const MaxBodyBytes = 1 << 20

// minTokenLen is the shortest bearer token accepted for the TCP listener.
const minTokenLen = 16

// maxSocketPath is the longest unix socket path every supported OS accepts
// (sun_path is 108 bytes on Linux and 104 on the BSDs, including the NUL).
const maxSocketPath = 103

// decidePattern is the route of an approval decision.
const decidePattern = "POST /v1/approvals/{id}"

// ErrAlreadyRunning is returned by Listen when another daemon serves the state
// directory.
var ErrAlreadyRunning = errors.New("a sandboxctl daemon is already running for this state directory")

// Tools is the part of a *sessions.Manager that the daemon serves.
type Tools interface {
	toolapi.Tools
	// Close ends every process the tools started; the daemon calls it once
	// on shutdown, after it stopped accepting requests.
	Close(ctx context.Context) error
}

// EventSource is where the live tool events come from (sessions.Manager).
type EventSource interface {
	// Subscribe returns the events published from now on; the channel
	// closes or stops being written to once ctx is done.
	Subscribe(ctx context.Context) <-chan api.Event
}

// SessionLister lists sessions (sessions.Manager).
type SessionLister interface {
	// Sessions lists the sessions of every scope; a non-empty agentID:
	// that agent's only.
	Sessions(agentID string) []api.Details
}

// Options configure a Server. StateDir and Tools are required.
type Options struct {
	// StateDir holds the socket, pid file, lock and token; it is created
	// (mode 0700) when missing.
	StateDir string
	Tools    Tools
	// Events are the tool events (sessions.Manager) GET /v1/events streams
	// when there is no Journal; nil makes it answer 503.
	Events EventSource
	// Journal, when set, serves GET /v1/events instead of Events: numbered
	// events, replay with ?since=CURSOR, an ?agent=ID filter.
	Journal EventJournal
	// Streams serves streamed exec ("stream": true) and GET
	// /v1/sessions/{id}/stream (sessions.Manager); nil answers 501.
	Streams toolapi.Streamer
	// Sandboxes serves the sandbox lifecycle and snapshots (/v1/sandboxes
	// and below; also to pinned callers, who see their agent's only); nil
	// makes GET /v1/sandboxes answer 503.
	Sandboxes Sandboxes
	// Files serves the files API (/v1/files and below, FileRoutes; also to
	// pinned callers, for their agent's sandbox only); nil: no files API.
	Files FileStore
	// FilesMaxBytes bounds one transfer (default DefaultFileMaxBytes).
	FilesMaxBytes int64
	// FilesAudit, when set, records every file transfer (see
	// FileRoutesOptions.Audit).
	FilesAudit FileAudit
	// Sessions lists the sessions for GET /v1/sessions (sessions.Manager);
	// nil makes the endpoint answer 503.
	Sessions SessionLister
	// IsInvalidInput reports errors that are the caller's fault (→ 400)
	// beyond the containerd errdefs classes, e.g. toolapi.ErrInvalidInput.
	IsInvalidInput func(error) bool
	// IsUnavailable reports errors of a backend that is down (→ 503), e.g.
	// sandbox.ErrDockerUnreachable.
	IsUnavailable func(error) bool
	// Listen, when set, also serves on this TCP address; every request there
	// needs "Authorization: Bearer <token>".
	Listen string
	// Token is the bearer token of the TCP listener; empty means the content
	// of <StateDir>/token, generated (mode 0600) when missing.
	Token string
	// TLSCertFile and TLSKeyFile, both or neither, serve TCP over TLS.
	TLSCertFile, TLSKeyFile string
	// Metrics serves GET /metrics (the Prometheus handler); nil: no
	// route.
	Metrics http.Handler
	// MCP serves the MCP endpoint /mcp (its own protocol; a pinned caller
	// reaches it too, and the handler scopes it with PinFrom); nil: no
	// route.
	MCP http.Handler
	// Nodes are the connected node agents: GET /v1/nodes lists them (an
	// empty list when nil), and on TCP their link (nodeexec.ConnectPath)
	// is served without the daemon's bearer token, because it checks the
	// node token itself; never on the socket.
	Nodes Nodes
	// Approvals serves GET /v1/approvals (a tool route) and POST
	// /v1/approvals/{id}, the decisions. A tool client must never reach
	// those: on the socket they serve only a peer that is not a process
	// sandboxctl started (see approverCheck), on TCP only a request
	// carrying ApproverToken — the tool token is not enough. Nil: neither.
	Approvals Approvals
	// Previews, when set, serves the previews' management API (Routes;
	// tool token and socket only) and, on TCP, the previews themselves
	// (ProxyRoutes, each behind its own token, not the daemon's).
	Previews *Previews
	// ApproverToken is the bearer token of the decisions on TCP; empty
	// refuses approval decisions over TCP. It is never written to the state
	// directory, where commands could read it.
	ApproverToken string
	// AgentTokens maps a TCP bearer token to the agent it is pinned to (see
	// Pin and LoadAgentTokens). A pinned client may use exec, process,
	// sessions, events, sandboxes, files and the approvals list (its
	// agent's only), /healthz and /mcp, nothing else (pinnedRoutes).
	AgentTokens map[string]string
	// Lock is the state directory's lock, taken with LockStateDir before
	// anything else; nil makes Listen take it. The Server releases it.
	Lock *StateLock
	// AuditDir is the audit log's directory, served (read-only) by GET
	// /v1/audit to operators; "" answers 503.
	AuditDir string
	// Version is reported by /healthz.
	Version string
	// Identity is the configuration and Engine the daemon serves, reported
	// by /healthz; a client sending another is refused (checkIdentity).
	Identity api.Identity
	// MaxConns bounds the open connections of each listener (default
	// DefaultMaxConns); more wait in the kernel's backlog until one closes.
	MaxConns int
	// WriteStall is how long one write to a client may block before its
	// connection is dropped (default DefaultWriteStall): a client that
	// never reads cannot pin the daemon's memory.
	WriteStall time.Duration
	// ShutdownGrace is how long in-flight requests may finish on their own
	// before the tools are closed (default 2 s).
	ShutdownGrace time.Duration
	Logf          func(format string, args ...any)
	// Logger, when set, gets one access-log line per request (see
	// accessLog).
	Logger *slog.Logger
}

// Server is a listening daemon. Create it with Listen, run it with Serve.
type Server struct {
	opts     Options
	token    string
	lock     *os.File
	sockPath string
	pidPath  string
	tlsCert  tls.Certificate

	console         *console.Console
	unixLn, tcpLn   net.Listener
	unixSrv, tcpSrv *http.Server

	lnMu     sync.Mutex    // guards unixLn, which watchSocket replaces
	stopReq  chan struct{} // closed by RequestShutdown
	stopOnce sync.Once
	stopping chan struct{} // closed when shutdown begins; ends event streams
	pid      int
	started  time.Time
}

// Listen takes the state directory's lock, removes a stale socket (only when
// nothing answers on it), listens on the unix socket (mode 0600) and, when
// configured, on TCP, and writes the pid file. It fails with ErrAlreadyRunning
// when another daemon serves the directory. The caller must call Serve, which
// releases everything when it returns.
func Listen(ctx context.Context, opts Options) (_ *Server, err error) {
	if opts.StateDir == "" {
		return nil, errors.New("daemon: state directory is required")
	}
	if opts.Tools == nil {
		return nil, errors.New("daemon: tools are required")
	}
	if (opts.TLSCertFile == "") != (opts.TLSKeyFile == "") {
		return nil, errors.New("daemon: --tls-cert and --tls-key must be given together")
	}
	if opts.TLSCertFile != "" && opts.Listen == "" {
		return nil, errors.New("daemon: --tls-cert/--tls-key need --listen")
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	if opts.ShutdownGrace <= 0 {
		opts.ShutdownGrace = 2 * time.Second
	}
	stateDir, err := filepath.Abs(opts.StateDir)
	if err != nil {
		return nil, fmt.Errorf("daemon: state directory: %w", err)
	}
	opts.StateDir = stateDir
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return nil, fmt.Errorf("daemon: create state directory: %w", err)
	}
	s := &Server{
		opts:     opts,
		sockPath: api.SocketPath(stateDir),
		pidPath:  filepath.Join(stateDir, api.PIDFileName),
		stopReq:  make(chan struct{}),
		stopping: make(chan struct{}),
		pid:      os.Getpid(),
		started:  time.Now(),
	}
	if len(s.sockPath) > maxSocketPath {
		return nil, fmt.Errorf("daemon: socket path %q is %d bytes, longer than the %d a unix socket allows; use a shorter --state directory", s.sockPath, len(s.sockPath), maxSocketPath)
	}
	defer func() {
		if err != nil {
			s.release()
		}
	}()

	if opts.Lock != nil && opts.Lock.f != nil {
		s.lock, opts.Lock.f = opts.Lock.f, nil
	} else if s.lock, err = lockStateDir(stateDir); err != nil {
		return nil, err
	}
	if err := s.removeStaleSocket(ctx); err != nil {
		return nil, err
	}
	if opts.Listen != "" {
		s.token = opts.Token
		if s.token != "" && len(s.token) < minTokenLen {
			return nil, fmt.Errorf("daemon: the bearer token must be at least %d characters", minTokenLen)
		}
		if s.token == "" {
			if s.token, err = LoadOrCreateToken(stateDir); err != nil {
				return nil, err
			}
		}
		if opts.ApproverToken != "" && len(opts.ApproverToken) < minTokenLen {
			return nil, fmt.Errorf("daemon: the approver token must be at least %d characters", minTokenLen)
		}
		if opts.ApproverToken != "" && opts.ApproverToken == s.token {
			return nil, errors.New("daemon: the approver token must differ from the bearer token of tool clients")
		}
		for tok, agent := range opts.AgentTokens {
			switch {
			case len(tok) < minTokenLen:
				return nil, fmt.Errorf("daemon: the agent token of %q must be at least %d characters", agent, minTokenLen)
			case tok == s.token || tok == opts.ApproverToken:
				return nil, fmt.Errorf("daemon: the agent token of %q must differ from the tool and approver tokens", agent)
			}
		}
		if opts.TLSCertFile != "" {
			// Loaded here, not in Serve: a bad key pair must fail the
			// start before the caller adopts anything.
			if s.tlsCert, err = tls.LoadX509KeyPair(opts.TLSCertFile, opts.TLSKeyFile); err != nil {
				return nil, fmt.Errorf("daemon: --tls-cert/--tls-key: %w", err)
			}
		}
		if s.tcpLn, err = net.Listen("tcp", opts.Listen); err != nil {
			return nil, fmt.Errorf("daemon: listen on %s: %w", opts.Listen, err)
		}
		s.tcpLn = newBoundedListener(s.tcpLn, opts.MaxConns, opts.WriteStall)
		if ta, ok := s.tcpLn.Addr().(*net.TCPAddr); ok && !ta.IP.IsLoopback() && opts.TLSCertFile == "" {
			opts.Logf("warning: %s is reachable from other machines without TLS: the bearer token travels in clear text (use --tls-cert/--tls-key)", ta)
		}
	}
	// The socket last: a client that finds it finds the token file and
	// the TCP listener ready too.
	if s.unixLn, err = listenUnixPrivate(s.sockPath); err != nil {
		return nil, err
	}
	s.unixLn = newBoundedListener(s.unixLn, opts.MaxConns, opts.WriteStall)
	if err := atomicfile.Write(s.pidPath, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o600); err != nil {
		return nil, fmt.Errorf("daemon: write pid file: %w", err)
	}

	decide := http.NewServeMux()
	if opts.Approvals != nil {
		decide.HandleFunc(decidePattern, approvalRoutes{opts.Approvals}.decide)
	}
	s.console = console.New(console.Options{API: s.routes(false), Decide: decide,
		ToolToken: s.token, ApproverToken: opts.ApproverToken, Logf: opts.Logf})
	s.unixSrv = s.newHTTPServer(s.accessLog("unix", consoleForwardOnly(s.checkIdentity(s.routes(true)))))
	s.unixSrv.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		return withBoundedConn(socketActor(withPeer(ctx, c)), c)
	}
	if s.tcpLn != nil {
		tcp := http.NewServeMux()
		tcp.Handle("/", s.authTCP(s.checkIdentity(withActor(audit.Actor{Via: "tcp", Token: "tool"}, s.routes(false))), s.pinnedRoutes()))
		if opts.Approvals != nil {
			tcp.Handle(decidePattern, s.requireApproverToken(withActor(audit.Actor{Via: "tcp", Token: "approver"}, http.HandlerFunc(approvalRoutes{opts.Approvals}.decide))))
		}
		if opts.Nodes != nil {
			tcp.Handle(nodeexec.ConnectPath, opts.Nodes.Handler())
		}
		if opts.Previews != nil {
			for pattern, h := range opts.Previews.ProxyRoutes() {
				tcp.Handle(pattern, noting(callerPreview, h))
			}
		}
		tcp.Handle(console.Prefix, withActor(audit.Actor{Via: "console"}, noting(callerConsole, s.console))) // its own login (see console)
		s.tcpSrv = s.newHTTPServer(s.accessLog("tcp", tcp))
		s.tcpSrv.ConnContext = withBoundedConn
		if opts.TLSCertFile != "" {
			s.tcpSrv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{s.tlsCert}, MinVersion: tls.VersionTLS12}
		}
	}
	return s, nil
}

// SocketPath is the unix socket the server listens on.
func (s *Server) SocketPath() string { return s.sockPath }

// TCPAddr is the address of the TCP listener, or nil without one.
func (s *Server) TCPAddr() net.Addr {
	if s.tcpLn == nil {
		return nil
	}
	return s.tcpLn.Addr()
}

// Token is the bearer token the TCP listener requires ("" without one).
func (s *Server) Token() string { return s.token }

// RequestShutdown makes Serve shut down gracefully; it does not wait.
func (s *Server) RequestShutdown() { s.stopOnce.Do(func() { close(s.stopReq) }) }

// Serve serves until ctx is done or RequestShutdown is called, then shuts
// down gracefully: it stops accepting, ends event streams, gives in-flight
// requests ShutdownGrace to finish, closes the tools (which kill everything
// they started), and removes the socket, pid file and lock.
func (s *Server) Serve(ctx context.Context) error {
	errc := make(chan error, 2)
	s.lnMu.Lock()
	first := s.unixLn
	s.lnMu.Unlock()
	go func() { errc <- s.unixSrv.Serve(first) }()
	if s.tcpSrv != nil {
		go func() {
			if s.opts.TLSCertFile != "" {
				errc <- s.tcpSrv.ServeTLS(s.tcpLn, "", "") // the key pair loaded by Listen
				return
			}
			errc <- s.tcpSrv.Serve(s.tcpLn)
		}()
	}
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	go s.watchSocket(watchCtx, errc)
	s.opts.Logf("sandboxctl daemon (pid %d) listening on %s", os.Getpid(), s.sockPath)
	if s.tcpLn != nil {
		s.opts.Logf("also listening on tcp %s (tls: %t)", s.tcpLn.Addr(), s.opts.TLSCertFile != "")
	}

	var serveErr error
	select {
	case <-ctx.Done():
		s.opts.Logf("shutting down: %v", context.Cause(ctx))
	case <-s.stopReq:
		s.opts.Logf("shutting down: requested")
	case err := <-errc:
		if !errors.Is(err, http.ErrServerClosed) {
			serveErr = fmt.Errorf("daemon: serve: %w", err)
			s.opts.Logf("shutting down: %v", err)
		}
	}
	if err := s.shutdown(); err != nil && serveErr == nil {
		serveErr = err
	}
	return serveErr
}

func (s *Server) shutdown() error {
	close(s.stopping)
	servers := []*http.Server{s.unixSrv}
	if s.tcpSrv != nil {
		servers = append(servers, s.tcpSrv)
	}
	// Stop accepting and wait for in-flight requests, but only for the
	// grace period: a foreground exec can wait minutes for its command, and
	// closing the tools below is what ends it.
	graceCtx, cancelGrace := context.WithTimeout(context.Background(), s.opts.ShutdownGrace)
	defer cancelGrace()
	var wg sync.WaitGroup
	for _, srv := range servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := srv.Shutdown(graceCtx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
				s.opts.Logf("http shutdown: %v", err)
			}
		}()
	}
	wg.Wait()

	closeCtx, cancelClose := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancelClose()
	var closeErr error
	if err := s.opts.Tools.Close(closeCtx); err != nil {
		closeErr = fmt.Errorf("daemon: close tools: %w", err)
		s.opts.Logf("%v", closeErr)
	}
	// Requests still running now were ended by Close; give them a moment
	// to write their answers, then cut what is left.
	finalCtx, cancelFinal := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancelFinal()
	for _, srv := range servers {
		if err := srv.Shutdown(finalCtx); err != nil {
			_ = srv.Close()
		}
	}
	s.release()
	s.opts.Logf("sandboxctl daemon (pid %d) stopped", os.Getpid())
	return closeErr
}

// release removes the socket and pid file and drops the lock, in that order,
// so that a daemon starting next never sees our files as its own.
func (s *Server) release() {
	s.lnMu.Lock()
	ln := s.unixLn
	s.unixLn = nil
	s.lnMu.Unlock()
	if ln != nil {
		_ = ln.Close()
		_ = os.Remove(s.sockPath)
	}
	if s.tcpLn != nil {
		_ = s.tcpLn.Close()
	}
	if s.lock != nil {
		if data, err := os.ReadFile(s.pidPath); err == nil && strings.TrimSpace(string(data)) == strconv.Itoa(os.Getpid()) {
			_ = os.Remove(s.pidPath)
		}
		_ = s.lock.Close() // closing the descriptor drops the flock
		s.lock = nil
	}
}

// socketCheckEvery is how often the daemon checks that its socket file is
// still in place.
const socketCheckEvery = 500 * time.Millisecond

// watchSocket keeps the daemon reachable: a socket file that was deleted
// (a tmp cleaner, a careless rm) is re-created, since nothing else can
// reach or stop a daemon without it and the next auto-start would only
// find the state directory locked. A file that replaced the socket is not
// ours to remove: the daemon shuts down rather than serve unreachable.
func (s *Server) watchSocket(ctx context.Context, errc chan<- error) {
	s.lnMu.Lock()
	ours, err := os.Lstat(s.sockPath)
	s.lnMu.Unlock()
	if err != nil {
		s.opts.Logf("socket watch: %v", err)
		return
	}
	t := time.NewTicker(socketCheckEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.stopping:
			return
		case <-t.C:
		}
		fi, err := os.Lstat(s.sockPath)
		switch {
		case err == nil && os.SameFile(fi, ours):
			continue
		case errors.Is(err, os.ErrNotExist):
			raw, lerr := listenUnixPrivate(s.sockPath)
			if lerr != nil {
				s.opts.Logf("socket %s was deleted and cannot be re-created (%v); shutting down", s.sockPath, lerr)
				s.RequestShutdown()
				return
			}
			ln := newBoundedListener(raw, s.opts.MaxConns, s.opts.WriteStall)
			if ours, err = os.Lstat(s.sockPath); err != nil {
				_ = ln.Close()
				s.opts.Logf("socket %s: %v; shutting down", s.sockPath, err)
				s.RequestShutdown()
				return
			}
			// The old listener stays open (closing it would end its Serve
			// with an error); the server's shutdown closes both.
			s.lnMu.Lock()
			s.unixLn = ln
			s.lnMu.Unlock()
			s.opts.Logf("socket %s was deleted; re-created it", s.sockPath)
			go func() {
				if err := s.unixSrv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
					select {
					case errc <- err:
					default:
					}
				}
			}()
		case err != nil:
			s.opts.Logf("socket watch: %v", err)
		default:
			s.opts.Logf("socket %s was replaced by another file; shutting down", s.sockPath)
			s.RequestShutdown()
			return
		}
	}
}

// removeStaleSocket removes a socket left by a daemon that died, but only
// when nothing answers on it.
func (s *Server) removeStaleSocket(ctx context.Context) error {
	fi, err := os.Lstat(s.sockPath)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("daemon: stat socket: %w", err)
	}
	if fi.Mode().Type() != os.ModeSocket {
		return fmt.Errorf("daemon: %s exists and is not a socket; remove it by hand", s.sockPath)
	}
	hctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if h, ok := probeHealth(hctx, s.sockPath); ok {
		return fmt.Errorf("daemon: %w (pid %d answers on %s)", ErrAlreadyRunning, h.PID, s.sockPath)
	}
	d := net.Dialer{Timeout: time.Second}
	if c, err := d.DialContext(ctx, "unix", s.sockPath); err == nil {
		_ = c.Close()
		return fmt.Errorf("daemon: %w (something accepts connections on %s)", ErrAlreadyRunning, s.sockPath)
	}
	if err := os.Remove(s.sockPath); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("daemon: remove stale socket: %w", err)
	}
	s.opts.Logf("removed stale socket %s", s.sockPath)
	return nil
}

// probeHealth asks the daemon on the unix socket sockPath for its health.
func probeHealth(ctx context.Context, sockPath string) (api.Health, bool) {
	var h api.Health
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sockPath)
	}}
	defer tr.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://sandboxctl/healthz", nil)
	if err != nil {
		return h, false
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return h, false
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&h) != nil {
		return h, false
	}
	return h, h.OK
}

// listenUnixPrivate listens on path with mode 0600 and no window in which the
// socket is reachable with wider permissions: it binds inside a fresh private
// (0700) directory, tightens the mode, and then renames the socket into place.
func listenUnixPrivate(path string) (net.Listener, error) {
	tmpDir, err := os.MkdirTemp(filepath.Dir(path), ".sock-")
	if err != nil {
		return nil, fmt.Errorf("daemon: socket temp dir: %w", err)
	}
	defer os.RemoveAll(tmpDir)
	tmp := filepath.Join(tmpDir, "s")
	ln, err := net.Listen("unix", tmp)
	if err != nil {
		return nil, fmt.Errorf("daemon: listen on unix socket: %w", err)
	}
	ul := ln.(*net.UnixListener)
	// The file now lives at path, not tmp: we remove it ourselves.
	ul.SetUnlinkOnClose(false)
	if err := os.Chmod(tmp, 0o600); err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("daemon: chmod socket: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("daemon: move socket into place: %w", err)
	}
	return ln, nil
}

func (s *Server) newHTTPServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           s.recoverPanics(h),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		// No WriteTimeout: /v1/events streams and a foreground exec may
		// legitimately take up to its yield window.
	}
}

func (s *Server) routes(unix bool) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", s.handleHealth)
	mux.HandleFunc("POST /v1/tools/exec", s.handleExec)
	mux.HandleFunc("POST /v1/tools/process", s.handleProcess)
	mux.HandleFunc("GET /v1/events", s.handleEvents)
	mux.HandleFunc("GET /v1/sessions", s.handleSessions)
	s.addStreamRoutes(mux)
	s.addSandboxRoutes(mux)
	s.addFileRoutes(mux)
	if s.opts.Approvals != nil {
		mux.HandleFunc("GET /v1/approvals", approvalRoutes{s.opts.Approvals}.list)
	}
	mux.HandleFunc("GET /v1/nodes", s.handleNodes)
	if s.opts.Metrics != nil {
		mux.Handle("GET /metrics", s.opts.Metrics)
	}
	if s.opts.MCP != nil {
		mux.Handle("/mcp", s.opts.MCP)
	}
	if s.opts.Previews != nil {
		for pattern, h := range s.opts.Previews.Routes() {
			mux.Handle(pattern, h)
		}
	}
	if !unix {
		// Behind the daemon's token; an agent token is refused (it reaches
		// pinnedRoutes only).
		mux.HandleFunc("GET /v1/audit", s.handleAudit)
	}
	if unix {
		// Only over the socket: whoever can reach it is the daemon's
		// owner, while a TCP token is meant to grant tool use only.
		mux.HandleFunc("POST /v1/shutdown", s.handleShutdown)
		check := newApproverCheck()
		if s.opts.Approvals != nil {
			mux.Handle(decidePattern, s.requireApproverPeer(check, http.HandlerFunc(approvalRoutes{s.opts.Approvals}.decide)))
		}
		// The console logs a browser in with a code only an approver
		// mints (`sandboxctl ui`), and vets the processes behind every
		// login and session request (see consoleVet).
		mux.Handle(console.Prefix, viaConsole(s.console.WithVet(consoleVet(check))))
		// The audit log is the operator's: no process sandboxctl started
		// reads it.
		mux.Handle("GET /v1/audit", s.requireApproverPeer(check, http.HandlerFunc(s.handleAudit)))
		mux.Handle("POST "+api.ConsoleLoginPath, s.requireApproverPeer(check, s.console.LoginCodeHandler()))
	}
	return mux
}

// requireApproverPeer serves next only to a socket peer that may decide
// approvals; everyone else gets 403 and the reason, and is logged.
func (s *Server) requireApproverPeer(check approverCheck, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, _ := PeerFrom(r.Context())
		if err := check.check(p); err != nil {
			s.opts.Logf("refused %s %s from pid %d: %v", r.Method, r.URL.Path, p.PID, err)
			writeError(w, http.StatusForbidden, err)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// requireApproverToken guards the approval decisions on TCP like authTCP, with
// the approver token.
func (s *Server) requireApproverToken(next http.Handler) http.Handler {
	if s.opts.ApproverToken == "" {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			writeError(w, http.StatusForbidden, fmt.Errorf("%w over TCP: this daemon has no approver token (decide on its unix socket, or start it with an approver token)", ErrNotApprover))
		})
	}
	return bearer(s.opts.ApproverToken, noting(callerApproverToken, next))
}

// noting notes caller for the access log, then serves next.
func noting(caller string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		noteCaller(r, caller)
		next.ServeHTTP(w, r)
	})
}

// authTCP guards the TCP listener: the tool token gets every route, an
// agent token the pinned routes with its Pin in the request context, and
// anything else 401.
func (s *Server) authTCP(all, pinned http.Handler) http.Handler {
	agents := newAgentTokens(s.opts.AgentTokens)
	return bearer(s.token, noting(callerToolToken, all), func(w http.ResponseWriter, r *http.Request, token string) bool {
		agent, ok := agents.match(token)
		if ok {
			noteCaller(r, agentCaller(agent))
			ctx := audit.WithActor(context.WithValue(r.Context(), pinKey{}, Pin{AgentID: agent}), audit.Actor{Via: "agent-token", Token: agent})
			pinned.ServeHTTP(w, r.WithContext(ctx))
		}
		return ok
	})
}

// pinnedRoutes are what an agent token reaches.
func (s *Server) pinnedRoutes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", s.handleHealth)
	mux.HandleFunc("POST /v1/tools/exec", s.handleExec)
	mux.HandleFunc("POST /v1/tools/process", s.handleProcess)
	mux.HandleFunc("GET /v1/events", s.handleEvents)
	mux.HandleFunc("GET /v1/sessions", s.handleSessions)
	s.addStreamRoutes(mux)
	if s.opts.Sandboxes != nil {
		sandboxRoutes{sbx: s.opts.Sandboxes, isDown: s.opts.IsUnavailable}.add(mux)
	}
	s.addFileRoutes(mux)
	if s.opts.Approvals != nil {
		mux.HandleFunc("GET /v1/approvals", approvalRoutes{s.opts.Approvals}.list)
	}
	if s.opts.MCP != nil {
		mux.Handle("/mcp", s.opts.MCP)
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusForbidden, fmt.Errorf("%s %s: an agent token grants its agent's exec, process, sessions, events, files, sandboxes and approvals list only", r.Method, r.URL.Path))
	})
	return mux
}

// bearer serves next only to requests carrying "Authorization: Bearer
// token"; a request with another bearer token goes to each of others until
// one takes it. Both sides are hashed before the constant-time compare so
// that not even the token's length leaks.
func bearer(token string, next http.Handler, others ...func(w http.ResponseWriter, r *http.Request, token string) bool) http.Handler {
	want := sha256.Sum256([]byte(token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
		tok = strings.TrimSpace(tok)
		got := sha256.Sum256([]byte(tok))
		ok = ok && strings.EqualFold(scheme, "Bearer")
		if ok && subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
			ok = false
			for _, other := range others {
				if other(w, r, tok) {
					return
				}
			}
		}
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="sandboxctl"`)
			writeError(w, http.StatusUnauthorized, errors.New("missing or invalid bearer token"))
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (s *Server) handleHealth(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, api.Health{OK: true, PID: s.pid, Version: s.opts.Version,
		Identity: s.opts.Identity, Socket: s.sockPath, StartedAt: s.started})
}

func (s *Server) handleExec(w http.ResponseWriter, r *http.Request) {
	var req api.ExecRequest
	if code, err := decodeBody(w, r, &req); err != nil {
		writeError(w, code, err)
		return
	}
	p := req.ExecParams
	p.StrictWorkdir = req.StrictWorkdir
	p.Raw = req.Raw
	if p.Raw && !req.Stream && !p.Background {
		s.writeResult(w, api.Result{}, &toolapi.InputError{Field: "raw", Msg: `raw: the whole output is followed by a stream: give "stream": true, or "background": true and follow GET /v1/sessions/{id}/stream?raw=1`})
		return
	}
	if req.Cols < 0 || req.Rows < 0 || req.Cols > 1000 || req.Rows > 1000 {
		writeError(w, http.StatusBadRequest, fmt.Errorf("cols %d, rows %d: want 1..1000 each", req.Cols, req.Rows))
		return
	}
	p.Cols, p.Rows = req.Cols, req.Rows
	if pin, ok := PinFrom(r.Context()); ok {
		p.AgentID = pin.AgentID
	}
	if req.Stream {
		s.serveExecStream(w, r, p)
		return
	}
	res, err := s.opts.Tools.Exec(r.Context(), p)
	s.writeResult(w, res, err)
}

func (s *Server) handleProcess(w http.ResponseWriter, r *http.Request) {
	var p api.ProcessParams
	if code, err := decodeBody(w, r, &p); err != nil {
		writeError(w, code, err)
		return
	}
	if pin, ok := PinFrom(r.Context()); ok {
		p.AgentID = pin.AgentID
	}
	res, err := s.opts.Tools.Process(r.Context(), p)
	s.writeResult(w, res, err)
}

func (s *Server) writeResult(w http.ResponseWriter, res api.Result, err error) {
	if err != nil {
		body := api.ErrorBody{Error: err.Error()}
		if ie := (*toolapi.InputError)(nil); errors.As(err, &ie) {
			body.Field = ie.Field
		}
		if errors.Is(err, api.ErrCommandNotFound) {
			body.Code = api.ErrorCodeCommandNotFound
		}
		writeJSON(w, s.statusFor(err), body)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

func (s *Server) handleEvents(w http.ResponseWriter, r *http.Request) {
	if s.opts.Journal != nil {
		s.serveJournal(w, r)
		return
	}
	if s.opts.Events == nil {
		writeError(w, http.StatusServiceUnavailable, errors.New("the event stream is not available"))
		return
	}
	flusher, ok := w.(http.Flusher)
	if !ok {
		writeError(w, http.StatusInternalServerError, errors.New("streaming unsupported"))
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	pin, pinned := PinFrom(ctx)
	events := s.opts.Events.Subscribe(ctx)
	exemptFromWriteStall(ctx)
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	flusher.Flush()
	enc := json.NewEncoder(w)
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.stopping:
			return
		case ev, ok := <-events:
			if !ok {
				return
			}
			if pinned && !visibleTo(pin, ev) {
				continue
			}
			if err := enc.Encode(ev); err != nil {
				return
			}
			flusher.Flush()
		}
	}
}

// handleSessions lists the sessions of every agent and session key
// (?agent=ID: that agent's only); a pinned client sees its agent's only.
func (s *Server) handleSessions(w http.ResponseWriter, r *http.Request) {
	if s.opts.Sessions == nil {
		writeError(w, http.StatusServiceUnavailable, errors.New("the session list is not available in this daemon"))
		return
	}
	agent := r.URL.Query().Get("agent")
	if pin, ok := PinFrom(r.Context()); ok {
		agent = pin.AgentID
	}
	writeJSON(w, http.StatusOK, api.SessionList{Sessions: s.opts.Sessions.Sessions(agent)})
}

// Nodes are the node agents the daemon takes connections from
// (nodeexec.Registry).
type Nodes interface {
	List() []nodeexec.NodeInfo
	// Handler serves a node's link (nodeexec.ConnectPath).
	Handler() http.Handler
}

// handleNodes serves GET /v1/nodes: the connected nodes, or an empty list
// when the daemon takes no node connections.
func (s *Server) handleNodes(w http.ResponseWriter, _ *http.Request) {
	list := []nodeexec.NodeInfo{}
	if s.opts.Nodes != nil {
		list = s.opts.Nodes.List()
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(list)
}

// addFileRoutes serves Options.Files.
func (s *Server) addFileRoutes(mux *http.ServeMux) {
	if s.opts.Files == nil {
		return
	}
	for pattern, h := range FileRoutes(s.opts.Files, FileRoutesOptions{MaxBytes: s.opts.FilesMaxBytes,
		IsUnavailable: s.opts.IsUnavailable, Logf: s.opts.Logf, Audit: s.opts.FilesAudit}) {
		mux.Handle(pattern, h)
	}
}

// addSandboxRoutes serves Options.Sandboxes; without them GET
// /v1/sandboxes answers 503.
func (s *Server) addSandboxRoutes(mux *http.ServeMux) {
	if s.opts.Sandboxes == nil {
		mux.HandleFunc("GET /v1/sandboxes", func(w http.ResponseWriter, _ *http.Request) {
			writeError(w, http.StatusServiceUnavailable, errors.New("sandboxes are not available in this daemon"))
		})
		return
	}
	sandboxRoutes{sbx: s.opts.Sandboxes, isDown: s.opts.IsUnavailable}.add(mux)
}

func (s *Server) handleShutdown(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusAccepted, api.ShutdownAnswer{OK: true, PID: os.Getpid()})
	s.RequestShutdown()
}

func (s *Server) statusFor(err error) int {
	if s.opts.IsInvalidInput != nil && s.opts.IsInvalidInput(err) {
		return http.StatusBadRequest
	}
	return httpStatus(err, s.opts.IsUnavailable)
}

// httpStatus is the status code of err's containerd errdefs class
// (errhttp.ToHTTP), with what errhttp leaves to 500: an existing thing is
// a conflict (409); a backend that is down (unavailable reports the
// backend's own errors) or a caller gone is 503; another deadline that
// passed (e.g. a command that took none of its stdin) is 504.
func httpStatus(err error, unavailable func(error) bool) int {
	if code := errhttp.ToHTTP(err); code != http.StatusInternalServerError {
		return code
	}
	switch {
	case cerrdefs.IsAlreadyExists(err):
		return http.StatusConflict
	case unavailable != nil && unavailable(err), errors.Is(err, context.Canceled):
		return http.StatusServiceUnavailable
	case cerrdefs.IsDeadlineExceeded(err):
		return http.StatusGatewayTimeout
	}
	return http.StatusInternalServerError
}

// decodeBody decodes one JSON object strictly into v and returns the status
// code to answer with when it cannot.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) (int, error) {
	r.Body = http.MaxBytesReader(w, r.Body, MaxBodyBytes)
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		return decodeStatus(err)
	}
	// A JSON decoder turns invalid UTF-8 into U+FFFD: refuse it rather
	// than run a command other than the one sent.
	if err := toolapi.CheckText(raw); err != nil {
		return http.StatusBadRequest, err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return decodeStatus(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		if err != nil {
			if code, derr := decodeStatus(err); code == http.StatusRequestEntityTooLarge {
				return code, derr
			}
		}
		return http.StatusBadRequest, errors.New("request body has data after the JSON object")
	}
	return 0, nil
}

func decodeStatus(err error) (int, error) {
	var (
		tooBig  *http.MaxBytesError
		typeErr *json.UnmarshalTypeError
		synErr  *json.SyntaxError
	)
	switch {
	case errors.As(err, &tooBig):
		return http.StatusRequestEntityTooLarge, fmt.Errorf("request body is larger than %d bytes", tooBig.Limit)
	case errors.Is(err, io.EOF):
		return http.StatusBadRequest, errors.New("request body is empty; expected a JSON object")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return http.StatusBadRequest, errors.New("request body is truncated JSON")
	case errors.As(err, &typeErr):
		if typeErr.Field != "" {
			return http.StatusBadRequest, fmt.Errorf("field %q: expected %s, got JSON %s", jsonFieldPath(typeErr.Field), typeErr.Type, typeErr.Value)
		}
		return http.StatusBadRequest, fmt.Errorf("request body must be a JSON object, got JSON %s", typeErr.Value)
	case errors.As(err, &synErr):
		return http.StatusBadRequest, fmt.Errorf("malformed JSON at byte %d: %s", synErr.Offset, strings.TrimPrefix(synErr.Error(), "json: "))
	default:
		// e.g. `json: unknown field "foo"` from DisallowUnknownFields.
		return http.StatusBadRequest, fmt.Errorf("bad request body: %s", strings.TrimPrefix(err.Error(), "json: "))
	}
}

// jsonFieldPath drops the Go names of embedded structs (api.ExecRequest embeds
// ExecParams) from a decode error's field path: JSON names are lowerCamel.
func jsonFieldPath(path string) string {
	for {
		head, rest, ok := strings.Cut(path, ".")
		if !ok || head == "" || head[0] < 'A' || head[0] > 'Z' {
			return path
		}
		path = rest
	}
}

func writeError(w http.ResponseWriter, code int, err error) {
	writeJSON(w, code, api.ErrorBody{Error: err.Error()})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
