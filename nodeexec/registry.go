package nodeexec

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"
)

// Defaults of RegistryOptions and AgentOptions.
const (
	// DefaultLinkGrace is how long runs survive a lost link: the gateway
	// fails them, and the node kills them, when the link is not back by then.
	DefaultLinkGrace = 10 * time.Second
	// DefaultPingInterval is how often each end pings the other; a ping not
	// answered within the interval closes the link.
	DefaultPingInterval = 15 * time.Second
	// DefaultHelloTimeout bounds the wait for a node's hello after the
	// WebSocket handshake.
	DefaultHelloTimeout = 10 * time.Second
	// DefaultStartTimeout bounds Start's wait for the node's answer.
	DefaultStartTimeout = 30 * time.Second
	// writeTimeout bounds one frame write.
	writeTimeout = 10 * time.Second
)

// RegistryOptions configure the gateway side.
type RegistryOptions struct {
	// Token is the shared secret nodes present (Authorization: Bearer).
	// Required; compared in constant time.
	Token string
	// LinkGrace: see DefaultLinkGrace.
	LinkGrace time.Duration
	// PingInterval: see DefaultPingInterval.
	PingInterval time.Duration
	// HelloTimeout: see DefaultHelloTimeout.
	HelloTimeout time.Duration
	// StartTimeout: see DefaultStartTimeout.
	StartTimeout time.Duration
	// AllowPlainRemote accepts connections without TLS from non-loopback
	// peers (only for a daemon behind a TLS-terminating proxy). Default:
	// plain connections are accepted from loopback peers only.
	AllowPlainRemote bool
	// Key is a secret that stays the same across the gateway's restarts
	// (the daemon keeps it in its state directory). Every run carries an
	// owner mark: the Registry's epoch and a MAC under Key of the run's
	// identity and session scope (run, node, session, agent, session key).
	// A Registry with the same Key adopts the runs of earlier epochs when
	// their node reconnects (see Adoptions), under the scope it gave them:
	// a node cannot forge a run into a session. Runs no session owns, and
	// runs of other gateways, are ended. Default: a random key (nothing is
	// adopted across Registries).
	Key string
	// IdentityFile keeps the node enrolments: each node's id and name bound
	// to its own credential (Hello.Key) when it first connects. A node
	// that claims an id or name bound to another credential is refused
	// (logged, and told why). Ids and names are one namespace. Default:
	// enrolments last as long as the Registry.
	IdentityFile string
	// OnRefused, when set, is told of each node refused for its identity
	// (the daemon journals it as an event).
	OnRefused func(Refusal)
	// Logf receives diagnostics (default: discard).
	Logf func(format string, args ...any)
}

// AdoptedRun is a run that an earlier incarnation of this gateway started
// on a node, taken over when the node reconnected: the node's report of
// it, the output the node kept (streams interleaved; Covered is the byte
// count of both streams it ends at, Dropped how many older bytes the node
// no longer has) and the process, which streams what follows Output.
type AdoptedRun struct {
	Process *RemoteProcess
	State   RunState
	Output  []byte
	Covered int64
	Dropped int64
}

// Registry is the gateway side of node hosts: the nodes connected through
// Handler, and Start to run commands on them. It is safe for concurrent use.
type Registry struct {
	opts   RegistryOptions
	epoch  string // this incarnation, the first part of every owner mark
	ctx    context.Context
	cancel context.CancelFunc

	// handlers counts the requests inside serveHTTP (node links included,
	// which the HTTP server no longer tracks once hijacked): Close waits
	// for them, so nothing of a link runs or logs after Close.
	handlers sync.WaitGroup

	mu      sync.Mutex
	adopted chan *AdoptedRun // nil until Adoptions: nothing is adopted then
	closed  bool
	nodes   map[string]*nodeEntry // by node id
	enrols  *enrolments
	runs    map[string]*RemoteProcess // by run id
}

// nodeEntry is a node that connected at least once since the Registry
// started.
type nodeEntry struct {
	hello       Hello
	link        *gwLink // nil while offline
	connectedAt time.Time
	lastSeen    time.Time
	remote      string
	lastErr     string
	changed     chan struct{} // closed and replaced whenever link changes
}

// NodeInfo describes a node for `sandboxctl node ls` and GET /v1/nodes.
type NodeInfo struct {
	ID           string          `json:"id"`
	Name         string          `json:"name"`
	Platform     string          `json:"platform"`
	Version      string          `json:"version,omitempty"`
	Capabilities []string        `json:"capabilities"`
	Connected    bool            `json:"connected"`
	ConnectedAt  time.Time       `json:"connectedAt,omitzero"`
	LastSeen     time.Time       `json:"lastSeen,omitzero"`
	Remote       string          `json:"remote,omitempty"`
	Workdir      string          `json:"workdir,omitempty"`
	Approvals    ApprovalSummary `json:"approvals"`
	// ActiveRuns counts the runs the gateway tracks on this node.
	ActiveRuns int `json:"activeRuns"`
	// Reported lists what the node said still runs when it (re)connected.
	Reported  []RunState `json:"reported,omitempty"`
	LastError string     `json:"lastError,omitempty"`
}

// NewRegistry returns an empty Registry. Close ends it.
func NewRegistry(opts RegistryOptions) (*Registry, error) {
	if opts.Token == "" {
		return nil, errors.New("nodeexec: registry: a node token is required")
	}
	if opts.LinkGrace <= 0 {
		opts.LinkGrace = DefaultLinkGrace
	}
	if opts.PingInterval <= 0 {
		opts.PingInterval = DefaultPingInterval
	}
	if opts.HelloTimeout <= 0 {
		opts.HelloTimeout = DefaultHelloTimeout
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = DefaultStartTimeout
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	if opts.Key == "" {
		opts.Key = NewID()
	}
	enrols, err := loadEnrolments(opts.IdentityFile)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Registry{opts: opts, epoch: NewID()[:16], ctx: ctx, cancel: cancel, enrols: enrols,
		nodes: map[string]*nodeEntry{}, runs: map[string]*RemoteProcess{}}, nil
}

func (r *Registry) logf(format string, args ...any) { r.opts.Logf(format, args...) }

// Adoptions delivers the runs this Registry adopts: runs an earlier
// incarnation of the gateway (same ID) started, as their nodes reconnect.
// Until the first call nothing is adopted (such runs are ended). The
// channel is never closed; read it until the Registry is closed.
func (r *Registry) Adoptions() <-chan *AdoptedRun {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.adopted == nil {
		r.adopted = make(chan *AdoptedRun, 64)
	}
	return r.adopted
}

// ownerMark is the owner of a run this incarnation (epoch) starts on node
// for a session: "EPOCH:MAC".
func (r *Registry) ownerMark(epoch, node string, p RunParams) string {
	m := hmac.New(sha256.New, []byte(r.opts.Key))
	for _, f := range []string{epoch, node, p.RunID, p.SessionID, p.AgentID, p.SessionKey} {
		m.Write([]byte(f))
		m.Write([]byte{0})
	}
	return epoch + ":" + hex.EncodeToString(m.Sum(nil))
}

// earlierRun reports whether rs, as node reports it, is a run an earlier
// incarnation of this gateway started: its owner mark is valid for exactly
// this run, node and session scope, and not of this incarnation.
func (r *Registry) earlierRun(node string, rs RunState) bool {
	epoch, _, ok := strings.Cut(rs.Owner, ":")
	if !ok || epoch == r.epoch {
		return false
	}
	want := r.ownerMark(epoch, node, RunParams{RunID: rs.RunID, SessionID: rs.SessionID, AgentID: rs.AgentID, SessionKey: rs.SessionKey})
	return hmac.Equal([]byte(want), []byte(rs.Owner))
}

// Close drops every link, fails every run still tracked, and returns once
// every request in Handler has returned; later requests get 503. Nodes
// kill their runs when their grace ends.
func (r *Registry) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	var links []*gwLink
	for _, e := range r.nodes {
		if e.link != nil {
			links = append(links, e.link)
		}
	}
	var runs []*RemoteProcess
	for _, rp := range r.runs {
		runs = append(runs, rp)
	}
	r.mu.Unlock()
	r.cancel()
	for _, l := range links {
		l.close(ErrClosed)
	}
	for _, rp := range runs {
		rp.finish(-1, "", fmt.Errorf("run %s on node %s: %w", rp.runID, rp.nodeName, ErrClosed))
	}
	r.handlers.Wait()
	return nil
}

// List returns every node that connected since the Registry started,
// connected ones first, then by name.
func (r *Registry) List() []NodeInfo {
	r.mu.Lock()
	defer r.mu.Unlock()
	active := map[string]int{}
	for _, rp := range r.runs {
		active[rp.nodeID]++
	}
	out := make([]NodeInfo, 0, len(r.nodes))
	for id, e := range r.nodes {
		out = append(out, NodeInfo{
			ID: id, Name: e.hello.Name, Platform: e.hello.Platform, Version: e.hello.Version,
			Capabilities: append([]string(nil), e.hello.Capabilities...),
			Connected:    e.link != nil, ConnectedAt: e.connectedAt, LastSeen: e.lastSeen,
			Remote: e.remote, Workdir: e.hello.Workdir, Approvals: e.hello.Approvals, ActiveRuns: active[id],
			Reported: append([]RunState(nil), e.hello.Running...), LastError: e.lastErr,
		})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Connected != out[j].Connected {
			return out[i].Connected
		}
		if out[i].Name != out[j].Name {
			return out[i].Name < out[j].Name
		}
		return out[i].ID < out[j].ID
	})
	return out
}

// lookup finds a node by id, else by name (connected nodes win over stale
// entries of the same name). "" picks the only known node.
func (r *Registry) lookup(node string) (*nodeEntry, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, ErrClosed
	}
	if node == "" {
		if len(r.nodes) == 1 {
			for _, e := range r.nodes {
				return e, nil
			}
		}
		return nil, fmt.Errorf("%w: no node given (set exec.node or pass node) and %d nodes are known", ErrNodeUnknown, len(r.nodes))
	}
	if e := r.nodes[node]; e != nil {
		return e, nil
	}
	var all, live []*nodeEntry
	for _, e := range r.nodes {
		if e.hello.Name == node {
			all = append(all, e)
			if e.link != nil {
				live = append(live, e)
			}
		}
	}
	switch {
	case len(live) == 1:
		return live[0], nil
	case len(live) > 1:
		return nil, fmt.Errorf("%w: %d connected nodes are named %q; use the node id", ErrNodeAmbiguous, len(live), node)
	case len(all) > 0:
		return all[0], nil
	}
	return nil, fmt.Errorf("%w: no node with id or name %q has connected to this gateway (see `sandboxctl node ls`)", ErrNodeUnknown, node)
}

// Workdir returns the default working directory a node reported (node id or
// name; "" = the only node).
func (r *Registry) Workdir(node string) (string, error) {
	e, err := r.lookup(node)
	if err != nil {
		return "", fmt.Errorf("nodeexec: workdir: %w", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return e.hello.Workdir, nil
}

// currentLink returns the node's link (nil when offline) and the channel
// closed at its next change.
func (r *Registry) currentLink(e *nodeEntry) (*gwLink, <-chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return e.link, e.changed
}

func (r *Registry) run(id string) *RemoteProcess {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.runs[id]
}

func (r *Registry) forgetRun(rp *RemoteProcess) {
	r.mu.Lock()
	if r.runs[rp.runID] == rp {
		delete(r.runs, rp.runID)
	}
	r.mu.Unlock()
}

func (r *Registry) links() []*gwLink {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*gwLink
	for _, e := range r.nodes {
		if e.link != nil {
			out = append(out, e.link)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].node.hello.Name < out[j].node.hello.Name })
	return out
}
