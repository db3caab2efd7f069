package nodeexec

import (
	"context"
	crand "crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"

	"github.com/sandboxctl/sandboxctl/hostexec"
	"github.com/sandboxctl/sandboxctl/hostexec/hostsup"
	"github.com/sandboxctl/sandboxctl/internal/audit"
	"github.com/sandboxctl/sandboxctl/vocab"
)

// Errors of RunAgent that end it (no reconnect can fix them).
var (
	// ErrUnauthorized: the gateway refused the node's token (HTTP 401).
	ErrUnauthorized = errors.New("the gateway refused the node token")
	// ErrTLSRequired: the gateway refuses plain connections from this peer.
	ErrTLSRequired = errors.New("the gateway requires TLS")
)

// Agent defaults.
const (
	DefaultMinBackoff     = 500 * time.Millisecond
	DefaultMaxBackoff     = 30 * time.Second
	DefaultIdempotencyTTL = 10 * time.Minute
	// maxBacklog is the most output a run keeps per link outage.
	maxBacklog = 1 << 20
	// stdinQueue is how many stdin frames a run queues before dropping.
	stdinQueue  = 256
	dialTimeout = 15 * time.Second
)

// AgentOptions configure a node agent (`sandboxctl node run`).
type AgentOptions struct {
	// GatewayURL is the daemon's address: wss://host:port (the connect path
	// is added when missing). ws:// is accepted only for a loopback host.
	GatewayURL string
	// Token is the node token the gateway expects.
	Token string
	// Name is the node's display name; default the host name.
	Name string
	// TLSFingerprint pins the gateway's certificate: the SHA-256 of its leaf
	// certificate (hex, colons optional). When set, only that certificate is
	// accepted (no CA needed); when empty, the system roots (or RootCAs)
	// verify the gateway as usual.
	TLSFingerprint string
	// RootCAs replaces the system roots when no fingerprint is pinned.
	RootCAs *x509.CertPool
	// StateDir holds node-id and approvals.json; default ~/.sandboxctl/node.
	StateDir string
	// Config is the node's own guard configuration.
	Config GuardConfig
	// Guard replaces the default PolicyGuard over StateDir/approvals.json.
	Guard Guard
	// Workdir is the default working directory of runs; default the agent's
	// own working directory.
	Workdir string
	// Supervisor, when set, runs every command in the node's host
	// supervisor (package hostsup, serving SupervisorDir(StateDir)): the
	// commands outlive a crash of the agent, and the next agent on the
	// state directory re-adopts them with their output and exit status,
	// which the supervisor keeps on disk. Without it, commands are children
	// of the agent, and the next agent ends what a dead one left running.
	Supervisor *hostsup.Supervisor
	// Shell, Environ and KillGrace configure the hostexec.Runner (see
	// hostexec.Options).
	Shell     string
	Environ   []string
	KillGrace time.Duration
	// LinkGrace is how long runs survive a lost link before the node kills
	// them (default DefaultLinkGrace).
	LinkGrace time.Duration
	// PingInterval: see DefaultPingInterval.
	PingInterval time.Duration
	// MinBackoff and MaxBackoff bound the reconnect delay (doubling, with
	// jitter, reset once a link came up).
	MinBackoff, MaxBackoff time.Duration
	// IdempotencyTTL is how long a run's idempotency key is remembered.
	IdempotencyTTL time.Duration
	// Version is reported in hello.
	Version string
	// Logf receives diagnostics (default: discard).
	Logf func(format string, args ...any)
	// OnConnect, when set, is called each time the link is up.
	OnConnect func(nodeID, name string)
	// Audit, when set, is the node's own audit log (audit.Log): each run
	// the gateway asks for is recorded with its runId as the requestId and
	// the gateway's sessionId, so the gateway's records of the session
	// name the node's. A run whose request cannot be recorded (audit
	// onFailure refuse) is refused.
	Audit audit.Recorder
}

// RunAgent runs a node agent until ctx ends (then it kills every process it
// started and returns nil) or a permanent error: a refused token
// (ErrUnauthorized), a certificate that fails verification or pinning
// (ErrFingerprintMismatch), a plain URL to a non-loopback host
// (ErrInsecureURL), or bad options.
func RunAgent(ctx context.Context, opts AgentOptions) error {
	a, err := newAgent(ctx, opts)
	if err != nil {
		return err
	}
	defer a.ledger.close()
	return a.run(ctx)
}

type agent struct {
	opts     AgentOptions
	url      *url.URL
	client   *http.Client
	runner   *hostexec.Runner
	sup      *hostsup.Supervisor // nil: commands are the agent's children
	ledger   *runLedger
	guard    Guard
	nodeID   string
	nodeKey  string // hex; see Hello.Key
	name     string
	platform string
	workdir  string
	logf     func(string, ...any)
	ctx      context.Context

	mu       sync.Mutex
	stopping bool // shutdown began: a run admitted now is killed at once
	link     *agentLink
	runs     map[string]*nodeRun
	idem     map[string]*idemEntry
	grace    *time.Timer
	wg       sync.WaitGroup
}

// idemEntry remembers what became of an idempotency key.
type idemEntry struct {
	runID  string
	at     time.Time
	ready  chan struct{} // closed once answer is set
	answer *frame        // started, denied, approval-pending or error
	exit   *exitInfo     // set once the run ended and was forgotten
}

func newAgent(ctx context.Context, opts AgentOptions) (*agent, error) {
	if opts.Token == "" {
		return nil, errors.New("nodeexec: node agent: a gateway token is required")
	}
	u, err := checkGatewayURL(opts.GatewayURL)
	if err != nil {
		return nil, fmt.Errorf("nodeexec: node agent: %w", err)
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: opts.RootCAs}
	if opts.TLSFingerprint != "" {
		pin, err := ParseFingerprint(opts.TLSFingerprint)
		if err != nil {
			return nil, fmt.Errorf("nodeexec: node agent: %w", err)
		}
		// The pin replaces CA verification: only this exact certificate is
		// accepted, checked in VerifyConnection (which runs regardless).
		tc.InsecureSkipVerify = true //nolint:gosec // pinned below
		tc.VerifyConnection = pinnedVerify(pin)
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: tc, Proxy: nil, DisableKeepAlives: true}}

	if opts.LinkGrace <= 0 {
		opts.LinkGrace = DefaultLinkGrace
	}
	if opts.PingInterval <= 0 {
		opts.PingInterval = DefaultPingInterval
	}
	if opts.MinBackoff <= 0 {
		opts.MinBackoff = DefaultMinBackoff
	}
	if opts.MaxBackoff < opts.MinBackoff {
		opts.MaxBackoff = max(DefaultMaxBackoff, opts.MinBackoff)
	}
	if opts.IdempotencyTTL <= 0 {
		opts.IdempotencyTTL = DefaultIdempotencyTTL
	}
	logf := opts.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	if opts.StateDir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return nil, fmt.Errorf("nodeexec: node agent: no state directory: %w", err)
		}
		opts.StateDir = filepath.Join(home, ".sandboxctl", "node")
	}
	if err := os.MkdirAll(opts.StateDir, 0o700); err != nil {
		return nil, fmt.Errorf("nodeexec: node agent: state directory: %w", err)
	}
	id, err := loadNodeID(opts.StateDir)
	if err != nil {
		return nil, fmt.Errorf("nodeexec: node agent: %w", err)
	}
	key, err := loadNodeKey(opts.StateDir)
	if err != nil {
		return nil, fmt.Errorf("nodeexec: node agent: %w", err)
	}
	name := opts.Name
	if name == "" {
		if name, err = os.Hostname(); err != nil || name == "" {
			name = "node-" + id[:8]
		}
	}
	if err := validText("node name", name, maxNameLen); err != nil || strings.TrimSpace(name) == "" {
		return nil, fmt.Errorf("nodeexec: node agent: invalid node name %q", name)
	}
	g := opts.Guard
	if g == nil {
		pg, err := NewPolicyGuard(opts.Config, filepath.Join(opts.StateDir, "approvals.json"))
		if err != nil {
			return nil, err
		}
		g = pg
	}
	runner, err := hostexec.NewRunner(ctx, hostexec.Options{Shell: opts.Shell, Environ: opts.Environ, KillGrace: opts.KillGrace, Logf: logf})
	if err != nil {
		return nil, fmt.Errorf("nodeexec: node agent: %w", err)
	}
	ledger, err := openRunLedger(opts.StateDir)
	if err != nil {
		return nil, err
	}
	// What a previous agent on this state directory started and did not
	// see end (it died) is ended now, before anything new runs.
	ledger.sweep(logf)
	wd := opts.Workdir
	if wd == "" {
		if wd, err = os.Getwd(); err != nil {
			return nil, fmt.Errorf("nodeexec: node agent: working directory: %w", err)
		}
	}
	if !filepath.IsAbs(wd) {
		if wd, err = filepath.Abs(wd); err != nil {
			return nil, fmt.Errorf("nodeexec: node agent: working directory: %w", err)
		}
	}
	a := &agent{
		opts: opts, url: u, client: client, runner: runner, sup: opts.Supervisor, ledger: ledger, guard: g,
		nodeID: id, nodeKey: key, name: name, platform: runtime.GOOS + "/" + runtime.GOARCH, workdir: wd, logf: logf,
		ctx: ctx, runs: map[string]*nodeRun{}, idem: map[string]*idemEntry{},
	}
	if a.sup != nil {
		// What a previous agent started runs on in the supervisor: it is
		// held until a gateway says whether it keeps it.
		a.loadHeld(ctx)
	}
	return a, nil
}

// loadNodeID reads StateDir/node-id, creating it on first use.
func loadNodeID(dir string) (string, error) {
	p := filepath.Join(dir, "node-id")
	b, err := os.ReadFile(p)
	if err == nil {
		id := strings.TrimSpace(string(b))
		if verr := validID("node id", id); verr != nil {
			return "", fmt.Errorf("%s: %w", p, verr)
		}
		return id, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("node id: %w", err)
	}
	id := NewID()
	if err := os.WriteFile(p, []byte(id+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("node id: %w", err)
	}
	return id, nil
}

// nodeKeyBytes is the size of a node credential.
const nodeKeyBytes = 32

// loadNodeKey reads StateDir/node-key (hex), creating it on first use: the
// node's own credential, which the gateway binds its id and name to.
func loadNodeKey(dir string) (string, error) {
	p := filepath.Join(dir, "node-key")
	b, err := os.ReadFile(p)
	if err == nil {
		key := strings.TrimSpace(string(b))
		if raw, herr := hex.DecodeString(key); herr != nil || len(raw) != nodeKeyBytes {
			return "", fmt.Errorf("%s: not a node credential (%d hex digits)", p, 2*nodeKeyBytes)
		}
		return key, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("node credential: %w", err)
	}
	raw := make([]byte, nodeKeyBytes)
	if _, err := crand.Read(raw); err != nil {
		return "", fmt.Errorf("node credential: %w", err)
	}
	key := hex.EncodeToString(raw)
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", fmt.Errorf("node credential: %w", err)
	}
	if _, err := f.WriteString(key + "\n"); err != nil {
		f.Close()
		return "", fmt.Errorf("node credential: %w", err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("node credential: %w", err)
	}
	return key, nil
}

// permanent reports errors no reconnect can fix.
func permanent(err error) bool {
	var cve *tls.CertificateVerificationError
	var uae x509.UnknownAuthorityError
	var hne x509.HostnameError
	var cie x509.CertificateInvalidError
	return errors.Is(err, ErrUnauthorized) || errors.Is(err, ErrTLSRequired) ||
		errors.Is(err, ErrFingerprintMismatch) || errors.As(err, &cve) ||
		errors.As(err, &uae) || errors.As(err, &hne) || errors.As(err, &cie)
}

func (a *agent) run(ctx context.Context) error {
	defer a.shutdown()
	a.mu.Lock()
	if len(a.runs) > 0 {
		// Held runs of a previous agent are ended if no gateway takes
		// them within the grace.
		a.grace = time.AfterFunc(a.opts.LinkGrace, a.graceExpired)
	}
	a.mu.Unlock()
	backoff := a.opts.MinBackoff
	for {
		up, err := a.session(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if permanent(err) {
			a.logf("nodeexec: node agent stops: %v", err)
			return fmt.Errorf("nodeexec: node agent: %w", err)
		}
		if up {
			backoff = a.opts.MinBackoff
		}
		d := backoff/2 + rand.N(backoff/2+1)
		a.logf("nodeexec: link to gateway down (%v); reconnecting in %s", err, d.Round(time.Millisecond))
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		backoff = min(backoff*2, a.opts.MaxBackoff)
	}
}

// session runs one link: dial, hello, welcome, then frames until it ends.
// up reports whether the gateway accepted the node.
func (a *agent) session(ctx context.Context) (up bool, err error) {
	lctx, lcancel := context.WithCancelCause(ctx)
	defer lcancel(nil)
	hs := time.AfterFunc(dialTimeout, func() { lcancel(errors.New("handshake timed out")) })
	conn, resp, err := websocket.Dial(lctx, a.url.String(), &websocket.DialOptions{
		HTTPClient: a.client,
		HTTPHeader: http.Header{"Authorization": {"Bearer " + a.opts.Token}},
	})
	if err != nil {
		hs.Stop()
		if resp != nil {
			switch resp.StatusCode {
			case http.StatusUnauthorized:
				return false, fmt.Errorf("%w (HTTP 401 from %s)", ErrUnauthorized, a.url.Redacted())
			case http.StatusForbidden:
				return false, fmt.Errorf("%w (HTTP 403 from %s)", ErrTLSRequired, a.url.Redacted())
			}
		}
		return false, fmt.Errorf("dial %s: %w", a.url.Redacted(), err)
	}
	conn.SetReadLimit(MaxFrameBytes)
	l := &agentLink{wsLink{conn: conn, ctx: lctx, cancel: lcancel}}
	defer l.close(errors.New("session ended"))
	if err := l.send(&frame{Type: frameHello, Hello: a.hello(ctx)}); err != nil {
		hs.Stop()
		return false, err
	}
	var wf frame
	if err := wsjson.Read(lctx, conn, &wf); err != nil {
		hs.Stop()
		return false, fmt.Errorf("waiting for welcome: %w", err)
	}
	if !hs.Stop() {
		return false, errors.New("handshake timed out")
	}
	if wf.Type != frameWelcome {
		return false, fmt.Errorf("gateway sent %q before welcome", wf.Type)
	}
	if wf.Reason != "" {
		return false, fmt.Errorf("gateway refused the node: %s", wf.Reason)
	}
	a.logf("nodeexec: node %s (%s) connected to %s", a.name, a.nodeID, a.url.Redacted())
	a.attach(l, wf.Resume)
	if a.opts.OnConnect != nil {
		a.opts.OnConnect(a.nodeID, a.name)
	}
	go l.pinger(a.opts.PingInterval)
	for {
		var f frame
		if err := wsjson.Read(lctx, conn, &f); err != nil {
			if c := context.Cause(lctx); c != nil && !errors.Is(c, context.Canceled) {
				err = c
			}
			a.detach(l)
			return true, err
		}
		a.handle(l, &f)
	}
}

func (a *agent) hello(ctx context.Context) *Hello {
	h := &Hello{
		Protocol: ProtocolVersion, NodeID: a.nodeID, Key: a.nodeKey, Name: a.name, Platform: a.platform, Version: a.opts.Version,
		Capabilities: []string{CapSystemRun, CapSystemWhich, CapApprovals},
		Approvals:    a.guard.Summary(ctx),
		Workdir:      a.workdir,
	}
	if a.sup != nil {
		h.Capabilities = append(h.Capabilities, CapDurableRuns)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, r := range a.runs {
		h.Running = append(h.Running, r.report())
	}
	return h
}

// attach makes l the current link and hands it the runs the gateway keeps
// (resume), each going on from where the gateway's output of it ends; the
// node ends the runs the gateway does not keep.
func (a *agent) attach(l *agentLink, resume []Resume) {
	a.mu.Lock()
	a.link = l
	if a.grace != nil {
		a.grace.Stop()
		a.grace = nil
	}
	runs := a.runList()
	a.mu.Unlock()
	keep := make(map[string]Resume, len(resume))
	for _, rs := range resume {
		keep[rs.RunID] = rs
	}
	for _, r := range runs {
		rs, ok := keep[r.id]
		if !ok {
			a.logf("nodeexec: the gateway does not keep run %s; ending it", r.id)
			a.goAsync(func() { a.end(r) })
			continue
		}
		if a.sup != nil {
			a.resume(l, r, rs)
			continue
		}
		if rs.Adopt {
			// Nothing of the output is kept here beyond the backlog,
			// which follows.
			_ = l.send(&frame{Type: frameKept, RunID: r.id, Kept: &keptInfo{}})
		}
		r.attachLink(l)
	}
}

// detach drops l and starts the grace after which every run is killed.
func (a *agent) detach(l *agentLink) {
	l.close(errors.New("link lost"))
	a.mu.Lock()
	if a.link == l {
		a.link = nil
		if a.grace == nil && len(a.runs) > 0 {
			a.grace = time.AfterFunc(a.opts.LinkGrace, a.graceExpired)
		}
	}
	runs := a.runList()
	a.mu.Unlock()
	for _, r := range runs {
		r.mu.Lock()
		if r.link == l {
			r.link = nil
		}
		r.mu.Unlock()
	}
}

func (a *agent) runList() []*nodeRun {
	out := make([]*nodeRun, 0, len(a.runs))
	for _, r := range a.runs {
		out = append(out, r)
	}
	return out
}

// graceExpired kills every run when the link did not come back in time.
func (a *agent) graceExpired() {
	a.mu.Lock()
	a.grace = nil
	if a.link != nil {
		a.mu.Unlock()
		return
	}
	runs := a.runList()
	a.mu.Unlock()
	if len(runs) == 0 {
		return
	}
	a.logf("nodeexec: link to the gateway not restored within %s; killing %d run(s)", a.opts.LinkGrace, len(runs))
	if a.sup == nil {
		a.endAll(runs)
		return
	}
	// Supervised, each run's end waits for the next link with its output:
	// a restarted gateway adopts it as ended with this reason, the gateway
	// that failed it has it ended for good.
	reason := fmt.Sprintf("the node ended it: its link to the gateway was not back within %s", a.opts.LinkGrace)
	var wg sync.WaitGroup
	for _, r := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a.killKept(r, reason)
		}()
	}
	wg.Wait()
}

// killKept kills a supervised run's tree and keeps the run, its exit
// carrying reason, for the next gateway link.
func (a *agent) killKept(r *nodeRun, reason string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r.mu.Lock()
	r.lostReason = reason
	held := r.held
	r.mu.Unlock()
	if held != nil {
		p, err := a.sup.Attach(ctx, *held, held.Stdout, held.Stderr)
		if err != nil {
			a.logf("nodeexec: run %s: attach to end it: %v", r.id, err)
			a.end(r)
			return
		}
		r.mu.Lock()
		r.proc, r.held, r.pos = p, nil, [2]int64{held.Stdout, held.Stderr}
		r.mu.Unlock()
		r.begin()
	}
	if p := r.current(); p != nil {
		if err := p.Kill(ctx); err != nil {
			a.logf("nodeexec: kill run %s: %v", r.id, err)
		}
	}
}

// endAll ends runs (end) in parallel.
func (a *agent) endAll(runs []*nodeRun) {
	var wg sync.WaitGroup
	for _, r := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a.end(r)
		}()
	}
	wg.Wait()
}

// end kills a run's whole tree, waits for its end and forgets it: nothing
// of it is sent any more, and the host supervisor drops it.
func (a *agent) end(r *nodeRun) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r.abandon()
	p := r.current()
	if p == nil && a.sup != nil {
		r.mu.Lock()
		held := r.held
		r.mu.Unlock()
		if held != nil {
			var err error
			if p, err = a.sup.Attach(ctx, *held, held.Stdout, held.Stderr); err != nil {
				a.logf("nodeexec: run %s: attach to end it: %v", r.id, err)
			}
		}
	}
	if p != nil {
		if err := p.Kill(ctx); err != nil {
			a.logf("nodeexec: kill run %s: %v", r.id, err)
		}
		_, _, _ = p.Wait(ctx)
	}
	a.delivered(r)
}

// delivered forgets a run whose end the gateway has (or that was ended):
// the host supervisor drops its output and exit status.
func (a *agent) delivered(r *nodeRun) {
	r.mu.Lock()
	again := r.forgotten
	r.forgotten = true
	r.mu.Unlock()
	if again {
		return
	}
	if a.sup != nil && r.tag != "" {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := a.sup.Forget(ctx, r.tag); err != nil {
			a.logf("nodeexec: run %s: forget: %v", r.id, err)
		}
		cancel()
	}
	a.forget(r)
}

// shutdown kills everything the agent started and waits for its goroutines.
func (a *agent) shutdown() {
	a.mu.Lock()
	a.stopping = true
	if a.grace != nil {
		a.grace.Stop()
		a.grace = nil
	}
	runs := a.runList()
	a.mu.Unlock()
	if len(runs) > 0 {
		a.logf("nodeexec: node agent stopping; killing %d run(s)", len(runs))
	}
	a.endAll(runs)
	a.wg.Wait()
	if a.sup != nil {
		// Its sessions ended: an idle supervisor stops with the agent.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := a.sup.Stop(ctx); err != nil {
			a.logf("nodeexec: %v", err)
		}
	}
}

// forget drops a run; its idempotency key keeps the exit for replays.
func (a *agent) forget(r *nodeRun) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.runs[r.id] == r {
		delete(a.runs, r.id)
	}
	if e := a.idem[r.key]; e != nil {
		r.mu.Lock()
		e.exit = r.exit
		r.mu.Unlock()
	}
}

func (a *agent) currentLink() *agentLink {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.link
}

// handle dispatches one frame from the gateway. Slow work (the guard,
// starting a process, approvals I/O) runs in goroutines so that the link
// keeps reading.
func (a *agent) handle(l *agentLink, f *frame) {
	switch f.Type {
	case frameRun:
		a.handleRun(l, f)
	case frameStdin, frameStdinClose:
		if r := a.lookupRun(f.RunID); r != nil {
			select {
			case r.stdin <- stdinOp{data: f.Data, close: f.Type == frameStdinClose}:
			default:
				a.logf("nodeexec: run %s: stdin queue full; %d bytes dropped", f.RunID, len(f.Data))
			}
		}
	case frameResize:
		if r := a.lookupRun(f.RunID); r != nil && r.current() != nil {
			ctx, cancel := context.WithTimeout(a.ctx, 5*time.Second)
			if err := r.current().Resize(ctx, f.Cols, f.Rows); err != nil {
				a.logf("nodeexec: run %s: resize: %v", f.RunID, err)
			}
			cancel()
		}
	case frameKill:
		if r := a.lookupRun(f.RunID); r != nil {
			a.goAsync(func() {
				p := r.current()
				if p == nil {
					a.end(r) // held or lost: nothing follows it yet
					return
				}
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				if err := p.Kill(ctx); err != nil {
					a.logf("nodeexec: run %s: kill: %v", f.RunID, err)
				}
			})
		}
	case frameApprovalsList:
		a.goAsync(func() {
			list, err := a.guard.Approvals(a.ctx)
			reply := &frame{Type: frameReply, ReqID: f.ReqID, Approvals: list}
			if err != nil {
				reply.Error = err.Error()
			}
			for i := range reply.Approvals {
				reply.Approvals[i].NodeID = a.nodeID
			}
			_ = l.send(reply)
		})
	case frameApprovalsSolve:
		a.goAsync(func() {
			reply := &frame{Type: frameReply, ReqID: f.ReqID}
			d, err := vocab.ParseApprovalDecision(f.Decision)
			if err == nil {
				err = a.guard.Resolve(a.ctx, f.ApprovalID, d)
			}
			if err != nil {
				reply.Error = err.Error()
				if errors.Is(err, ErrApprovalUnknown) {
					reply.Reason = "unknown-approval"
				}
			}
			_ = l.send(reply)
		})
	case frameWhich:
		_ = l.send(a.which(f))
	default:
		a.logf("nodeexec: ignoring frame %q from the gateway", truncate(f.Type, 40))
	}
}

func (a *agent) goAsync(fn func()) {
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		fn()
	}()
}

func (a *agent) lookupRun(id string) *nodeRun {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.runs[id]
}

func (a *agent) which(f *frame) *frame {
	reply := &frame{Type: frameReply, ReqID: f.ReqID, Paths: map[string]string{}}
	if len(f.Names) > 64 {
		reply.Error = "too many names"
		return reply
	}
	for _, n := range f.Names {
		if n == "" || strings.ContainsRune(n, '/') || validText("name", n, 255) != nil {
			continue
		}
		reply.Paths[n] = ""
		for _, dir := range filepath.SplitList(a.runner.Path()) {
			if !filepath.IsAbs(dir) {
				continue
			}
			p := filepath.Join(dir, n)
			if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
				reply.Paths[n] = p
				break
			}
		}
	}
	return reply
}
