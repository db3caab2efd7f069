package runtimecli

import (
	"context"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/sandboxctl/sandboxctl/api"
	"github.com/sandboxctl/sandboxctl/envguard"
	"github.com/sandboxctl/sandboxctl/envknob"
	"github.com/sandboxctl/sandboxctl/hostexec"
	"github.com/sandboxctl/sandboxctl/hostexec/guard"
	"github.com/sandboxctl/sandboxctl/hostexec/hostsup"
	"github.com/sandboxctl/sandboxctl/internal/apiclient"
	"github.com/sandboxctl/sandboxctl/internal/audit"
	"github.com/sandboxctl/sandboxctl/internal/cli"
	"github.com/sandboxctl/sandboxctl/internal/daemon"
	"github.com/sandboxctl/sandboxctl/internal/eventjournal"
	"github.com/sandboxctl/sandboxctl/internal/mcpserver"
	"github.com/sandboxctl/sandboxctl/internal/metrics"
	"github.com/sandboxctl/sandboxctl/nodeexec"
	"github.com/sandboxctl/sandboxctl/sandbox"
	"github.com/sandboxctl/sandboxctl/sandbox/kube"
	"github.com/sandboxctl/sandboxctl/sessions"
	"github.com/sandboxctl/sandboxctl/sessions/config"
	"github.com/sandboxctl/sandboxctl/sessions/output"
	"github.com/sandboxctl/sandboxctl/sessions/toolapi"
	"github.com/sandboxctl/sandboxctl/vocab"
)

// pruneInterval is how often the daemon prunes idle and old sandboxes.
const pruneInterval = 30 * time.Minute

// expiryInterval is how often sandboxes whose TTL passed are looked for
// (cheap: the Engine is asked only when one is due).
const expiryInterval = time.Second

// ServeOptions are the flags of `sandboxctl serve`.
type ServeOptions struct {
	// Foreground runs the daemon in this process (the default); false
	// starts it detached, as exec's auto-start does, and returns.
	Foreground bool
	// LogFormat is the log's format: LogFormatText or LogFormatJSON.
	LogFormat string
	Listen    string
	Token     string
	TLSCert   string
	TLSKey    string
	// NodeToken is what node agents present; default $SANDBOXCTL_NODE_TOKEN,
	// then <state>/node-token (generated, mode 0600).
	NodeToken string
	// ApproverToken decides approvals over TCP; default
	// $SANDBOXCTL_APPROVER_TOKEN; none refuses decisions over TCP.
	ApproverToken string
	// FilesMaxBytes bounds one transfer of the files API.
	FilesMaxBytes int64
	// E2B serves the E2B API (internal/e2b) on this TCP address.
	E2B string
}

func newServeCommand(c *cli.CLI) *cobra.Command {
	var opts ServeOptions
	cmd := &cobra.Command{
		Use:   "serve",
		Short: cli.RuntimeShort("serve"),
		Long: `Run the sandboxctl daemon. It serves HTTP/JSON on <state>/sandboxctl.sock
(mode 0600) and, with --listen, on TCP behind a bearer token (--token, else
<state>/token, generated with mode 0600 when missing) and optionally TLS.

Endpoints: POST /v1/tools/exec, POST /v1/tools/process, GET /v1/events
(NDJSON stream), GET /v1/sandboxes, GET /v1/sandboxes/NAME, GET /v1/approvals,
GET /healthz, and POST /v1/shutdown (socket only).

The web console is at /ui/ on both: 'sandboxctl ui' opens it through the
socket with a one-time login link; over --listen its page asks for a token
(the approver token decides, the tool token only watches).

Approval decisions (POST /v1/approvals/ID, 'sandboxctl approvals resolve')
are for people: on the socket the daemon refuses every process it started
(and their descendants) and every sandbox; over TCP they need
--approver-token, never the tool token.

With --e2b ADDR it also serves the E2B API on ADDR (docs/e2b.md): E2B's own
SDKs run unchanged; their API keys are the agent tokens below.

Agent tokens: <state>/agent-tokens.json (mode 0600), {"agentId": "token"},
pins a TCP client to one agent: its exec and process act as that agent, and
/v1/events and /v1/approvals show it only that agent's items. SIGTERM, SIGINT or 'sandboxctl serve stop' shut it down
gracefully: every process it started is killed and its socket and pid file
are removed.`,
		Args: cli.ExactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return RunServe(cmd.Context(), c, opts)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&opts.Foreground, "foreground", true, "run in the foreground (--foreground=false starts a detached daemon and returns)")
	f.StringVar(&opts.Listen, "listen", "", "also serve on this TCP address, e.g. 127.0.0.1:7766")
	f.StringVar(&opts.Token, "token", "", "bearer token for --listen, at least 16 characters (default: $"+string(envknob.Token)+", then <state>/token)")
	f.StringVar(&opts.TLSCert, "tls-cert", "", "TLS certificate file for --listen")
	f.StringVar(&opts.TLSKey, "tls-key", "", "TLS key file for --listen")
	f.StringVar(&opts.ApproverToken, "approver-token", "", "token that decides approvals over --listen, distinct from --token (default: $"+string(envknob.ApproverToken)+"; none: decide on the unix socket only)")
	f.Int64Var(&opts.FilesMaxBytes, "files-max-bytes", daemon.DefaultFileMaxBytes, "largest file content one files API transfer (upload or download) may move")
	f.StringVar(&opts.LogFormat, "log-format", LogFormatText, "format of the daemon's log on stderr: text (key=value) or json (one object a line)")
	f.StringVar(&opts.NodeToken, "node-token", "", "token node agents must present on --listen (default: $"+string(envknob.NodeToken)+", then <state>/node-token)")
	f.StringVar(&opts.E2B, "e2b", "", "also serve the E2B API (docs/e2b.md) on this TCP address, e.g. 127.0.0.1:3000; API keys are the agent tokens")
	cmd.AddCommand(newHostSupervisorCommand(c))
	cmd.AddCommand(newServeStatusCommand(c))
	cmd.AddCommand(&cobra.Command{
		Use:   "stop",
		Short: "Stop the state directory's daemon gracefully",
		Args:  cli.ExactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return RunServeStop(cmd.Context(), c)
		},
	})
	return cmd
}

// RunServe runs the daemon until ctx is done or it is asked to stop.
func RunServe(ctx context.Context, c *cli.CLI, opts ServeOptions) error {
	cfg, err := c.LoadConfig()
	if err != nil {
		return err
	}
	state, err := c.StateDir(cfg)
	if err != nil {
		return err
	}
	if !opts.Foreground {
		return runServeDetached(ctx, c, state, opts)
	}
	if opts.Token == "" {
		// The environment keeps the token out of ps, unlike --token.
		opts.Token = envknob.Token.Get(c.Getenv)
	}
	if opts.ApproverToken == "" {
		opts.ApproverToken = envknob.ApproverToken.Get(c.Getenv)
	}
	if opts.NodeToken == "" {
		opts.NodeToken = envknob.NodeToken.Get(c.Getenv)
	}
	logger, err := newLogger(c.Err, opts.LogFormat)
	if err != nil {
		return cli.UsageErrorf("serve: %v", err)
	}
	logf := logfTo(logger)
	hardenDaemonProcess(ctx, logf)

	// The lock comes first: a second daemon must not touch the state
	// directory or take over the first one's supervisors (Recover below)
	// before it learns that the directory is served.
	lock, err := daemon.LockStateDir(state)
	if err != nil {
		return err
	}
	defer lock.Release()

	labels, err := parseSandboxLabels(envknob.SandboxLabels.Get(c.Getenv))
	if err != nil {
		return &cli.ExitError{Code: 2, Err: fmt.Errorf("serve: $%s: %w", envknob.SandboxLabels, err)}
	}
	// The metrics come first: the sandbox manager reports to them.
	metricSet := metrics.NewSet()
	steps := &stepEvents{}
	egressEv := &egressEvents{metrics: metricSet}
	sbxOpts := sandbox.Options{Labels: labels, DisableSupervisor: envknob.Supervisor.Get(c.Getenv) == envknob.SupervisorOff, Observer: metricSet, Steps: steps,
		EgressObserver: egressEv}
	brk, err := startBroker(cfg, state, c.Getenv, logger)
	if err != nil {
		return &cli.ExitError{Code: 2, Err: err}
	}
	var mask *output.Masker
	if brk != nil {
		sbxOpts.EgressInterceptor, mask = brk, brk.Masker()
	}
	hosts, runner, sbx, hostSup, err := buildHosts(ctx, cfg, state, sbxOpts, logf)
	if err != nil {
		return err
	}
	if hostSup != nil {
		// After the Manager closed (deferred later, so run earlier): its
		// sessions are ended, and an idle host supervisor is stopped.
		defer func() {
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := hostSup.Stop(sctx); err != nil {
				logf("warning: %v", err)
			}
		}()
	}
	gate, err := buildGate(cfg, state)
	if err != nil {
		return err
	}
	if sbx != nil {
		// After the sessions Manager closed (deferred later, so run
		// earlier): its engines' watches, warm pools and connections stop
		// (the Kubernetes engine's too, through the Manager); the
		// sandboxes and their commands go on for the next daemon.
		defer sbx.Close()
	}
	journalFile, err := eventjournal.Open(filepath.Join(state, "events"), 0)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	defer journalFile.Close()
	auditLog, err := openAudit(cfg, state, c.Version, logf)
	if err != nil {
		return err
	}
	defer auditLog.close()
	// Every event is journalled through the audit log's tap: the sandbox
	// and node events it maps are recorded whoever publishes them.
	journal := audit.Tap{Next: journalFile, Log: auditLog.rec}
	nodes, err := buildNodeRegistry(c, opts, state, logf, func(n nodeexec.Refusal) {
		if _, err := journal.Append(api.Event{Type: vocab.EventNodeRefused, Time: time.Now(),
			Text:    fmt.Sprintf("Refused node %q (id %s) from %s: %v", n.Name, n.NodeID, n.Remote, n.Err),
			Details: api.Details{NodeID: new(n.NodeID), Name: new(n.Name), Remote: n.Remote, Error: n.Err.Error()}}); err != nil {
			logf("warning: %v", err)
		}
	})
	if err != nil {
		return err
	}
	if nodes != nil {
		defer nodes.Close()
		hosts[vocab.HostNode] = sessions.NewNodeHost(nodes, cfg.Exec.Node)
	} else {
		hosts[vocab.HostNode] = unavailableHost{err: fmt.Errorf("%w: node host: this daemon takes no node connections; start it with --listen ADDR (and --tls-cert/--tls-key) so nodes can connect", sessions.ErrHostUnavailable)}
	}
	mgr, err := sessions.New(sessions.Options{Config: cfg, Hosts: hosts, Guard: sessions.NewGateGuard(gate, runner), Logf: logf,
		CursorFile: filepath.Join(state, "cursors.json"), AwaitedFile: filepath.Join(state, "awaited.json"), SpillDir: filepath.Join(state, "output"), Journal: journal, Observer: metricSet, Audit: auditLog.rec, Mask: mask})
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	steps.publishTo(mgr)
	egressEv.publishTo(mgr)
	identity, err := c.Identity()
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	src := metrics.Sources{
		Version:          c.Version,
		RunningSessions:  mgr.Running,
		PendingApprovals: func(ctx context.Context) (int, error) { return pendingApprovals(ctx, gate.Store) },
	}
	if sbx != nil {
		src.Sandboxes = sbx.List
	}
	// The tool calls are counted where they all arrive: the manager
	// reports them to metricSet, its Observer.
	metricSet.AddSources(src)
	if err := metricSet.Register(auditLog.gauges()...); err != nil {
		return fmt.Errorf("serve: metrics: %w", err)
	}
	if sbx != nil {
		if err := metricSet.Register(engineGauges(sbx)...); err != nil {
			return fmt.Errorf("serve: metrics: %w", err)
		}
	}
	dopts := daemon.Options{
		Identity:       identity,
		StateDir:       state,
		Tools:          mgr,
		Streams:        mgr,
		Sessions:       mgr,
		Journal:        journalFile,
		AuditDir:       auditLog.dir(),
		Metrics:        metricSet.Handler(),
		IsInvalidInput: toolapi.IsInvalidInput,
		IsUnavailable: func(err error) bool {
			return errors.Is(err, sandbox.ErrDockerUnreachable) || errors.Is(err, sandbox.ErrImageMissing) || errors.Is(err, sandbox.ErrEngineDown) ||
				errors.Is(err, sessions.ErrHostUnavailable)
		},
		Events:      mgr,
		Listen:      opts.Listen,
		Token:       opts.Token,
		TLSCertFile: opts.TLSCert,
		TLSKeyFile:  opts.TLSKey,
		Version:     c.Version,
		Logf:        logf,
		Logger:      logger,
		Lock:        lock,
	}
	approvals := &approvalsAPI{store: gate.Store, nodes: nodes, now: time.Now, audit: auditLog.rec}
	dopts.Approvals = approvals
	dopts.ApproverToken = opts.ApproverToken
	if opts.Listen != "" {
		if dopts.AgentTokens, err = daemon.LoadAgentTokens(filepath.Join(state, daemon.AgentTokensFileName)); err != nil {
			return err
		}
	}
	if cfg.Exec.ApprovalHook != "" {
		hook := &approvalHook{path: cfg.Exec.ApprovalHook, logf: logf,
			resolve: func(ctx context.Context, id string, d vocab.ApprovalDecision) error {
				return approvals.decide(audit.WithActor(ctx, audit.Actor{Via: "hook"}), id, d)
			},
			timeout: time.Duration(max(cfg.Exec.ApprovalTimeoutSec, 1)) * time.Second}
		go hook.run(ctx, mgr.Subscribe(ctx))
	}
	var lifecycle *sandboxAPI // the sandbox lifecycle (nil: no sandboxes)
	if sbx != nil {
		lifecycle = &sandboxAPI{m: sbx, publish: mgr.Publish, audit: auditLog.rec}
		dopts.Sandboxes = lifecycle
		dopts.Files, dopts.FilesMaxBytes, dopts.FilesAudit = sandboxFiles{sbx}, opts.FilesMaxBytes, auditLog.files()
	}
	var mcpSandboxes mcpserver.Sandboxes
	if lifecycle != nil && cfg.MCP.SandboxLifecycle {
		mcpSandboxes = lifecycle
	}
	dopts.MCP = mcpHandler(mgr, sbx, mcpSandboxes, mcpserver.PolicyOf(cfg), opts.FilesMaxBytes, auditLog.files(), c.Version, logf)
	if nodes != nil {
		dopts.Nodes = nodes
		if opts.TLSCert != "" {
			if fp, err := certFingerprint(opts.TLSCert); err == nil {
				logf("nodes connect to %s with --tls-fingerprint %s", opts.Listen, fp)
			}
		}
	}
	if cfg.Previews.Enabled && sbx != nil {
		// Ports of sandboxes through the TCP listener, each behind a
		// token of its own (docs/previews.md).
		scheme := "http"
		if opts.TLSCert != "" {
			scheme = "https"
		}
		previews := daemon.NewPreviews(sandboxPorts{sbx}, daemon.PreviewOptions{Publish: mgr.Publish, IsUnavailable: dopts.IsUnavailable, Logf: logf,
			BaseURL: func() string {
				host, port, err := net.SplitHostPort(opts.Listen)
				if err != nil {
					return ""
				}
				if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
					host = "localhost" // listening on every address: this host's own
				}
				return scheme + "://" + net.JoinHostPort(host, port)
			}})
		defer previews.Close()
		dopts.Previews = previews
		if opts.Listen == "" {
			logf("previews.enabled: previews are served on the TCP listener only; start the daemon with --listen to open them")
		}
	}
	// Everything that can fail comes before adoption: the listeners, the
	// TLS key pair and the pid file (daemon.Listen). A start that fails
	// here has adopted nothing, so closing the Manager ends nothing that a
	// previous daemon left running (issue 32 item 1).
	var e2bAPI *e2bListener
	if opts.E2B != "" {
		if e2bAPI, err = listenE2B(opts.E2B, opts.TLSCert, opts.TLSKey, cfg, state, mgr, mgr, dopts.Streams, sbx, opts.FilesMaxBytes, logf); err != nil {
			closeCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = mgr.Close(closeCtx)
			return err
		}
		defer e2bAPI.ln.Close()
	}
	srv, err := daemon.Listen(ctx, dopts)
	if err != nil {
		closeCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = mgr.Close(closeCtx)
		return err
	}
	// The commands that follow find this daemon's configuration without
	// repeating --config (cli.CLI.LoadConfig).
	content, err := c.ConfigContent()
	if err != nil {
		return err
	}
	record := api.DaemonConfig{PID: os.Getpid(), Identity: identity, Content: string(content), Exec: new(cfg.Exec.ClientSettings())}
	if err := apiclient.WriteDaemonConfig(state, record); err != nil {
		logf("warning: commands without --config will not find this daemon's configuration: %v", err)
	}
	defer apiclient.RemoveDaemonConfig(state, os.Getpid())
	// Sessions that outlived a previous daemon (supervised sandboxes, the
	// host supervisor and nodes keep them) are listed, polled and logged
	// again as before the restart. Requests wait in the listen backlog
	// until Serve below.
	recoverStart := time.Now()
	auditLog.started(ctx, cfg)
	if n, err := mgr.Recover(ctx); err != nil {
		logf("warning: recovering sessions: %v", err)
	} else if n > 0 {
		logf("recovered %d session(s) from a previous daemon in %v", n, time.Since(recoverStart).Round(time.Millisecond))
	}
	runCtx, stopPruner := context.WithCancel(ctx)
	defer stopPruner()
	if sbx != nil && (cfg.Sandbox.Prune.IdleHours > 0 || cfg.Sandbox.Prune.MaxAgeDays > 0) {
		go sbx.RunPruner(runCtx, pruneInterval)
	}
	// Events the CLI's own sandbox commands spooled (sandbox_events.go).
	go drainSpooledEvents(runCtx, state, mgr.Publish, auditLog.rec, logf)
	if sbx != nil {
		expired := &sandboxAPI{publish: mgr.Publish, audit: auditLog.rec}
		go sbx.RunExpiry(runCtx, expiryInterval, func(in sandbox.Info) { expired.event(runCtx, "expired", in) })
	}
	if e2bAPI != nil {
		go e2bAPI.serve(runCtx, logf)
	}
	return srv.Serve(ctx)
}

// pendingApprovals counts the requests awaiting a decision.
func pendingApprovals(ctx context.Context, store *guard.Store) (int, error) {
	list, err := store.List(ctx)
	n := 0
	now := time.Now().UnixMilli()
	for _, p := range list {
		if p.Decision == "" && p.Cancelled == "" && (p.ExpiresAtMs == 0 || p.ExpiresAtMs > now) {
			n++
		}
	}
	return n, err
}

// hardenDaemonProcess keeps the daemon's secrets and its approvals out of
// reach of the commands it runs as its own uid: the tokens leave its
// environment before any command inherits it; the process is not dumpable
// (its memory, environ and fds cannot be read or ptraced by them); and it
// is the child subreaper of its commands, so none leaves its process tree
// (see daemon.AdoptOrphans).
func hardenDaemonProcess(ctx context.Context, logf func(string, ...any)) {
	for _, k := range []envknob.Knob{envknob.Token, envknob.NodeToken, envknob.ApproverToken} {
		_ = os.Unsetenv(string(k))
	}
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		logf("warning: cannot make the daemon undumpable: %v", err)
	}
	if err := daemon.AdoptOrphans(ctx, logf); err != nil {
		logf("warning: %v; a command that double-forks and clears its environment could pass the approver check", err)
	}
}

// buildHosts creates the gateway host (always) and the sandbox host (with
// sbxOpts' Labels and DisableSupervisor). A
// Docker Engine that does not answer does not stop the daemon: sandbox runs
// then fail with the Engine's own "not reachable, start it with …" error.
func buildHosts(ctx context.Context, cfg config.File, state string, sbxOpts sandbox.Options, logf func(string, ...any)) (map[vocab.Host]sessions.Host, *hostexec.Runner, *sandbox.Manager, *hostsup.Supervisor, error) {
	// This executable is the launcher that confines gateway commands to
	// the workspace (hostexec.ConfineArg, handled in cmd/sandboxctld).
	self, err := os.Executable()
	if err != nil {
		return nil, nil, nil, nil, fmt.Errorf("serve: gateway host: %w", err)
	}
	cwd, err := config.ExpandHome(cfg.Exec.Cwd)
	if err != nil {
		return nil, nil, nil, nil, fmt.Errorf("serve: exec.cwd: %w", err)
	}
	var envelope *hostexec.Envelope
	if cfg.Exec.Envelope.Enabled {
		if envelope, err = gatewayEnvelope(cfg.Exec, cwd, state); err != nil {
			return nil, nil, nil, nil, &cli.ExitError{Code: 2, Err: fmt.Errorf("serve: %w", err)}
		}
	} else {
		logf("warning: exec.envelope.enabled is false: gateway commands run as this daemon's user (uid %d) with nothing but the guard around them", os.Geteuid())
	}
	runner, err := hostexec.NewRunner(ctx, hostexec.Options{PathPrepend: cfg.Exec.PathPrepend, Logf: logf, Launcher: self, Envelope: envelope})
	if err != nil {
		return nil, nil, nil, nil, fmt.Errorf("serve: gateway host: %w", err)
	}
	switch abi, err := runner.Landlock(); {
	case envelope != nil && (err != nil || abi < 3):
		logf("warning: Landlock ABI %d (%v): %v, so gateway commands are refused", abi, err, hostexec.ErrEnvelopeUnavailable)
	case envelope == nil && err != nil && cwd != "":
		logf("warning: %v: gateway commands that pass the external-directory check run unconfined (each result says so); keep exec.cwd out of directories a sandbox writes", err)
	}
	if envelope != nil && envelope.Identity != nil {
		logf("gateway commands run as uid %d gid %d, writing only %v", envelope.Identity.UID, envelope.Identity.GID, envelope.Writable)
		for _, w := range envelope.Writable {
			if fi, err := os.Stat(w); err == nil && !envelope.Identity.MayWrite(fi) {
				logf("warning: gateway commands (uid %d gid %d) cannot write %s: give it to them (chown -R %d:%d %s) or they fail there",
					envelope.Identity.UID, envelope.Identity.GID, w, envelope.Identity.UID, envelope.Identity.GID, w)
			}
		}
	}
	hosts := map[vocab.Host]sessions.Host{}
	sup, err := hostSupervisor(state, logf)
	if err != nil {
		logf("warning: %v; gateway commands run unsupervised and do not survive a crash of the daemon", err)
		hosts[vocab.HostGateway] = sessions.NewGatewayHost(runner, cwd)
	} else {
		hosts[vocab.HostGateway] = sessions.NewSupervisedGatewayHost(runner, cwd, sup)
	}

	sbxOpts.Config, sbxOpts.StateDir, sbxOpts.Logf = cfg.Sandbox, state, logf
	sbx, err := newManager(ctx, sbxOpts)
	if err != nil {
		if errors.Is(err, sandbox.ErrInvalidConfig) {
			return nil, nil, nil, nil, &cli.ExitError{Code: 2, Err: fmt.Errorf("serve: %w", err)}
		}
		logf("sandbox host unavailable: %v", err)
		hosts[vocab.HostSandbox] = unavailableHost{err: err}
		return hosts, runner, nil, sup, nil
	}
	pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := sbx.Ping(pctx); err != nil {
		logf("warning: %v; sandbox commands fail until it is up", err)
	}
	// The warm pool (sandbox.pool.size) fills in the background.
	sbx.StartPool()
	// Commands go through the Manager whatever its engine (Docker or
	// Kubernetes), as every other front door does.
	hosts[vocab.HostSandbox] = sessions.NewSandboxHost(sbx)
	return hosts, runner, sbx, sup, nil
}

// newManager is the composition root of the sandbox engines: a Manager
// over the Docker Engines of sandbox.engines, or, with
// sandbox.kubernetes.enabled, over the Kubernetes engine (sandbox/kube,
// built here and handed over as the Manager's Backend).
func newManager(ctx context.Context, opts sandbox.Options) (*sandbox.Manager, error) {
	if !opts.Config.Kubernetes.Enabled {
		return sandbox.NewManager(ctx, opts)
	}
	kctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	eng, err := kube.New(kctx, kube.Options{Config: opts.Config, Logf: opts.Logf})
	if err != nil {
		return nil, fmt.Errorf("kubernetes sandbox engine: %w", err)
	}
	opts.Backend = kube.NewBackend(eng, opts.Config)
	m, err := sandbox.NewManager(ctx, opts)
	if err != nil {
		_ = eng.Close()
		return nil, err
	}
	return m, nil
}

// gatewayEnvelope is the envelope of every gateway command (exec.envelope):
// a root daemon's commands run as the configured identity, checked against
// the host's account files here, at start; a non-root daemon's keep its
// uid. They write exec.cwd and exec.envelope.writable, and read everything
// but the built-in secret locations (the daemon's home's credentials, its
// state directory) and exec.envelope.secrets.
func gatewayEnvelope(e config.Exec, cwd, state string) (*hostexec.Envelope, error) {
	expand := func(key string, in []string) ([]string, error) {
		out := make([]string, 0, len(in))
		for i, p := range in {
			x, err := config.ExpandHome(p)
			if err != nil {
				return nil, fmt.Errorf("%s[%d]: %w", key, i, err)
			}
			out = append(out, x)
		}
		return out, nil
	}
	writable, err := expand("exec.envelope.writable", e.Envelope.Writable)
	if err != nil {
		return nil, err
	}
	if cwd != "" {
		writable = append([]string{cwd}, writable...)
	}
	secrets, err := expand("exec.envelope.secrets", e.Envelope.Secrets)
	if err != nil {
		return nil, err
	}
	home, _ := os.UserHomeDir()
	env := &hostexec.Envelope{Writable: writable, Secrets: hostexec.DefaultSecrets(home, state, secrets...)}
	if os.Geteuid() == 0 {
		id := hostexec.Identity{UID: e.Envelope.UID, GID: e.Envelope.GID}
		if err := hostexec.CheckIdentity(id, hostexec.SystemIdentityFiles); err != nil {
			return nil, fmt.Errorf("exec.envelope: %w", err)
		}
		env.Identity = &id
	}
	return env, nil
}

// parseSandboxLabels parses $SANDBOXCTL_SANDBOX_LABELS.
func parseSandboxLabels(v string) (map[string]string, error) {
	if strings.TrimSpace(v) == "" {
		return nil, nil
	}
	labels := map[string]string{}
	for _, kv := range strings.Split(v, ",") {
		k, val, ok := strings.Cut(kv, "=")
		switch {
		case !ok || k == "":
			return nil, fmt.Errorf("label %q: want KEY=VALUE", kv)
		case strings.HasPrefix(k, "sandboxctl.") && !strings.HasPrefix(k, "sandboxctl.test"):
			return nil, fmt.Errorf("label %q: the sandboxctl.* labels name a sandbox's owner and config; only sandboxctl.test* keys are free", k)
		}
		labels[k] = val
	}
	return labels, nil
}

// unavailableHost stands in for a host that could not be built; every use
// reports why.
type unavailableHost struct{ err error }

func (h unavailableHost) ResolveWorkdir(context.Context, string, string, string) (string, string, error) {
	return "", "", h.err
}

func (h unavailableHost) Start(context.Context, sessions.StartSpec) (sessions.Started, error) {
	return sessions.Started{}, h.err
}

func (h unavailableHost) Caps() sessions.HostCaps { return sessions.HostCaps{} }

func runServeDetached(ctx context.Context, c *cli.CLI, state string, opts ServeOptions) error {
	if opts.Listen != "" || opts.Token != "" || opts.TLSCert != "" || opts.TLSKey != "" || opts.E2B != "" {
		return cli.UsageErrorf("serve: --listen, --token, --tls-* and --e2b need --foreground (run the daemon under a service manager instead)")
	}
	argv, err := c.DaemonCommand(state)
	if err != nil {
		return err
	}
	if opts.LogFormat != "" && opts.LogFormat != LogFormatText {
		argv = append(argv, "--log-format", opts.LogFormat)
	}
	client, err := apiclient.EnsureRunning(ctx, apiclient.StartOptions{StateDir: state, Command: argv})
	if err != nil {
		return err
	}
	h, err := client.Health(ctx)
	if err != nil {
		return err
	}
	if c.JSON {
		return cli.WriteJSON(c.Out, h)
	}
	_, err = fmt.Fprintf(c.Out, "sandboxctl daemon running (pid %d) on %s\n", h.PID, api.SocketPath(state))
	return err
}

// RunServeStop stops the state directory's daemon and waits until it has
// let go of the directory.
func RunServeStop(ctx context.Context, c *cli.CLI) error {
	state, err := c.StateDirNoConfig()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return apiclient.Stop(ctx, state)
}

// nodeRunKeyFile, under the state directory, holds the key that marks the
// runs the daemon starts on nodes (nodeexec.RegistryOptions.Key).
const nodeRunKeyFile = "node-run-key"

// buildNodeRegistry accepts node agents when the daemon listens on TCP; the
// unix socket is local only, so without --listen there are no nodes.
func buildNodeRegistry(c *cli.CLI, opts ServeOptions, state string, logf func(string, ...any), onRefused func(nodeexec.Refusal)) (*nodeexec.Registry, error) {
	if opts.Listen == "" {
		return nil, nil
	}
	token := opts.NodeToken
	if token == "" {
		token = envknob.NodeToken.Get(c.Getenv)
	}
	if token == "" {
		var err error
		if token, err = daemon.LoadOrCreateSecret(filepath.Join(state, daemon.NodeTokenFileName)); err != nil {
			return nil, fmt.Errorf("serve: node token: %w", err)
		}
	}
	// The key that marks the runs it starts on nodes, kept across
	// restarts: a restarted daemon adopts exactly the runs its previous
	// incarnation started.
	key, err := daemon.LoadOrCreateSecret(filepath.Join(state, nodeRunKeyFile))
	if err != nil {
		return nil, fmt.Errorf("serve: node run key: %w", err)
	}
	reg, err := nodeexec.NewRegistry(nodeexec.RegistryOptions{Token: token, Key: key, Logf: logf,
		IdentityFile: filepath.Join(state, "node-identities.json"), OnRefused: onRefused})
	if err != nil {
		return nil, fmt.Errorf("serve: node registry: %w", err)
	}
	return reg, nil
}

// certFingerprint is the pin a node passes as --tls-fingerprint.
func certFingerprint(certFile string) (string, error) {
	data, err := os.ReadFile(certFile)
	if err != nil {
		return "", err
	}
	block, _ := pem.Decode(data)
	if block == nil {
		return "", fmt.Errorf("%s: no PEM certificate", certFile)
	}
	return nodeexec.Fingerprint(block.Bytes), nil
}

// buildGate opens the gateway's approvals.json (mode 0600; a corrupt file
// stops the daemon rather than being reset) and returns its guard.
func buildGate(cfg config.File, state string) (*guard.Gate, error) {
	al := cfg.Limits.Approvals
	opts := []guard.StoreOption{guard.WithLimits(guard.StoreLimits{
		PendingPerAgent: al.PendingPerAgent, Pending: al.Pending, RequestBytes: al.RequestBytes, Retained: al.Retained,
	})}
	if cfg.Exec.ApprovalTimeoutSec > 0 {
		opts = append(opts, guard.WithTimeout(time.Duration(cfg.Exec.ApprovalTimeoutSec)*time.Second))
	}
	store, err := guard.OpenStore(filepath.Join(state, "approvals.json"), opts...)
	if err != nil {
		return nil, fmt.Errorf("serve: %w", err)
	}
	workspace, err := config.ExpandHome(cfg.Exec.Cwd)
	if err != nil {
		return nil, fmt.Errorf("serve: exec.cwd: %w", err)
	}
	untrusted, err := sandboxWritableDirs(cfg, state)
	if err != nil {
		return nil, fmt.Errorf("serve: %w", err)
	}
	return &guard.Gate{Store: store, Config: guard.GateConfig{
		Security:      cfg.Exec.Security,
		Ask:           cfg.Exec.Ask,
		AskFallback:   cfg.Exec.AskFallback,
		SafeBins:      cfg.Exec.SafeBins,
		Workspace:     workspace,
		UntrustedDirs: untrusted,
		EnvCheck: func(assign map[string]string) error {
			return envguard.CheckRequest(vocab.HostGateway, assign)
		},
	}}, nil
}

// sandboxWritableDirs are the host directories a sandbox can write: the
// workspace root (sandbox.WorkspaceRoot), the sandbox-owned workspaces under the state dir, and the
// sources of binds not mounted read-only. No executable there ever
// satisfies the gateway's allowlist (issue 12 item 4).
func sandboxWritableDirs(cfg config.File, state string) ([]string, error) {
	home, err := config.ExpandHome("~")
	if err != nil {
		return nil, fmt.Errorf("sandbox.workspaceRoot: %w", err)
	}
	root, err := sandbox.WorkspaceRoot(cfg.Sandbox, state, home)
	if err != nil {
		return nil, err
	}
	dirs := []string{filepath.Join(state, "sandboxes"), root}
	if real, err := filepath.EvalSymlinks(root); err == nil && real != root {
		dirs = append(dirs, real) // a state directory that kept its old workspaces
	}
	for i, d := range dirs {
		abs, err := filepath.Abs(d)
		if err != nil {
			return nil, fmt.Errorf("sandbox-writable dir %s: %w", d, err)
		}
		dirs[i] = abs
	}
	for _, b := range cfg.Sandbox.Docker.Binds {
		parts := strings.Split(b, ":")
		if len(parts) > 2 && slices.Contains(strings.Split(parts[2], ","), "ro") {
			continue
		}
		src, err := config.ExpandHome(parts[0])
		if err != nil || !filepath.IsAbs(src) {
			continue // sandboxconfig refuses such binds before a sandbox starts
		}
		dirs = append(dirs, filepath.Clean(src))
	}
	return dirs, nil
}

// engineGauges are the per-Engine gauges of /metrics: whether each
// sandbox Engine answers and how many sandboxes it holds.
func engineGauges(sbx *sandbox.Manager) []prometheus.Collector {
	var out []prometheus.Collector
	for _, e := range sbx.Engines() {
		status := func() sandbox.EngineStatus {
			for _, s := range sbx.Engines() {
				if s.Name == e.Name {
					return s
				}
			}
			return sandbox.EngineStatus{}
		}
		labels := prometheus.Labels{"engine": e.Name}
		out = append(out,
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "sandboxctl_engine_up", Help: "1 when the sandbox Engine answers its health check.", ConstLabels: labels},
				func() float64 {
					if status().Healthy {
						return 1
					}
					return 0
				}),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "sandboxctl_engine_sandboxes", Help: "Sandboxes of this daemon placed on the Engine (multi-Engine configs).", ConstLabels: labels},
				func() float64 { return float64(status().Sandboxes) }),
		)
	}
	return out
}
