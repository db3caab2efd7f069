package nodeexec

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/sandboxctl/sandboxctl/api"
)

// Errors of the gateway side; test with errors.Is.
var (
	// ErrNodeUnknown: no node with this id or name ever connected.
	ErrNodeUnknown = errors.New("node unknown")
	// ErrNodeOffline: the node is known but its link is down.
	ErrNodeOffline = errors.New("node offline")
	// ErrNodeAmbiguous: the name matches more than one connected node.
	ErrNodeAmbiguous = errors.New("node name is ambiguous")
	// ErrDenied: the node refused the run (its guard, envguard, a rawCommand
	// mismatch, an invalid request). Nothing ran. The error is a
	// *DeniedError carrying the node's reason.
	ErrDenied = errors.New("refused by the node")
	// ErrApprovalPending: the node needs a human decision first. The error
	// is an *ApprovalPendingError; nothing ran.
	ErrApprovalPending = errors.New("approval pending on the node")
	// ErrLinkLost: the link to the node went down and was not restored in
	// time; Wait of the affected runs returns an error wrapping it.
	ErrLinkLost = errors.New("link to node lost")
	// ErrApprovalUnknown: no node knows this approval id.
	ErrApprovalUnknown = errors.New("unknown approval id")
	// ErrNoStdin: the run has no open stdin (KeepStdin false, or closed).
	ErrNoStdin = errors.New("stdin is closed")
	// ErrExited: the run already ended.
	ErrExited = errors.New("process has exited")
	// ErrNotPTY: Resize of a run without a terminal.
	ErrNotPTY = errors.New("process has no terminal")
	// ErrClosed: the Registry was closed.
	ErrClosed = errors.New("node registry closed")
)

// DeniedError is a node's refusal of a run.
type DeniedError struct {
	Node   string // node name (or id)
	Reason string // the node's reason, shown to the agent
}

func (e *DeniedError) Error() string {
	return fmt.Sprintf("node %s refused the command: %s", e.Node, e.Reason)
}

// Is makes a DeniedError match ErrDenied.
func (e *DeniedError) Is(target error) bool { return target == ErrDenied }

// LinkLostError ends a run whose node link was lost: Wait returns it. It
// matches ErrLinkLost.
type LinkLostError struct {
	Node  string
	RunID string
	// Detail says what happened (the link's failure and the grace, or that
	// the node came back without the run).
	Detail string
}

func (e *LinkLostError) Error() string {
	return fmt.Sprintf("the link to node %s was lost: %s", e.Node, e.Detail)
}

// Is makes a LinkLostError match ErrLinkLost.
func (e *LinkLostError) Is(target error) bool { return target == ErrLinkLost }

// ApprovalPendingError says the node wants a human decision before it runs
// the command. Resolving it (Registry.ResolveApproval, or `sandboxctl
// approvals resolve`) and repeating the same request (same command, cwd,
// agent, env) runs it once for allow-once.
type ApprovalPendingError struct {
	Node     string
	Approval Approval
}

func (e *ApprovalPendingError) Error() string {
	return fmt.Sprintf("node %s needs approval %s for %q (expires at %s)", e.Node, e.Approval.Slug,
		e.Approval.Command, time.UnixMilli(e.Approval.ExpiresAtMs).UTC().Format(time.RFC3339))
}

// Is makes an ApprovalPendingError match ErrApprovalPending.
func (e *ApprovalPendingError) Is(target error) bool { return target == ErrApprovalPending }

// Details are the approval-pending result fields of docs/tools.md: approvalId,
// approvalSlug, expiresAtMs, host, command, cwd, nodeId (plus node).
func (e *ApprovalPendingError) Details() api.Details {
	return api.Details{
		ApprovalID:   e.Approval.ID,
		ApprovalSlug: e.Approval.Slug,
		ExpiresAtMs:  e.Approval.ExpiresAtMs,
		Host:         "node",
		Command:      e.Approval.Command,
		Cwd:          e.Approval.Cwd,
		NodeID:       new(e.Approval.NodeID),
		Node:         e.Node,
	}
}

// maxBuffered is the most unread output a RemoteProcess holds per stream.
// Beyond it new output is dropped (with a marker) rather than stalling the
// link that every run of the node shares.
const maxBuffered = 8 << 20

// stream is the gateway-side buffer of one output stream.
type stream struct {
	mu      sync.Mutex
	cond    *sync.Cond
	buf     []byte
	closed  bool
	dropped int
}

func newStream() *stream {
	s := &stream{}
	s.cond = sync.NewCond(&s.mu)
	return s
}

func (s *stream) append(b []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	if len(s.buf)+len(b) > maxBuffered {
		s.dropped += len(b)
		return
	}
	if s.dropped > 0 {
		s.buf = fmt.Appendf(s.buf, "\n[nodeexec: %d bytes of output dropped: the reader fell behind]\n", s.dropped)
		s.dropped = 0
	}
	s.buf = append(s.buf, b...)
	s.cond.Broadcast()
}

func (s *stream) close() {
	s.mu.Lock()
	s.closed = true
	s.cond.Broadcast()
	s.mu.Unlock()
}

// Read blocks until output arrives or the stream ended (io.EOF).
func (s *stream) Read(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.buf) == 0 && !s.closed {
		s.cond.Wait()
	}
	if len(s.buf) == 0 {
		return 0, io.EOF
	}
	n := copy(p, s.buf)
	s.buf = s.buf[n:]
	if len(s.buf) == 0 {
		s.buf = nil
	}
	return n, nil
}

// RemoteProcess is a run on a node, seen from the gateway. Its method set is
// exactly sessions.Process (std types only). Callers must read Stdout (and
// Stderr when not nil) to io.EOF.
type RemoteProcess struct {
	reg      *Registry
	runID    string
	key      string
	nodeID   string
	nodeName string
	params   RunParams

	stdout, stderr *stream
	answer         chan *frame // started / denied / approval-pending / error

	done chan struct{} // closed when the run ended (exit or failure)

	mu        sync.Mutex
	link      *gwLink // nil while the link is down
	started   bool
	pid       int
	pty       bool
	cwd       string
	warnings  []string
	stdinOpen bool
	recv      [2]int64  // output bytes received per stream (stdout, stderr)
	adopting  *RunState // an adopted run until its kept output arrived
	finished  bool
	exitCode  int
	signal    string
	err       error
	lostTimer *time.Timer
	// durable: the node's runs outlive its agent (CapDurableRuns); doubt,
	// set when the link of a durable run was not restored within the
	// grace, says why its state is unknown (Doubt).
	durable bool
	doubt   string
}

func newRemoteProcess(reg *Registry, node *nodeEntry, p RunParams) *RemoteProcess {
	rp := &RemoteProcess{
		reg: reg, runID: p.RunID, key: p.IdempotencyKey,
		nodeID: node.hello.NodeID, nodeName: node.hello.Name, params: p,
		stdout: newStream(), answer: make(chan *frame, 4), done: make(chan struct{}),
		durable: slices.Contains(node.hello.Capabilities, CapDurableRuns),
	}
	if !p.PTY {
		rp.stderr = newStream()
	}
	return rp
}

// newAdoptedProcess is a run that an earlier incarnation of the gateway
// started, as node e reports it on link l; its output comes after the kept
// output (adopt).
func newAdoptedProcess(reg *Registry, node *nodeEntry, rs RunState, l *gwLink) *RemoteProcess {
	p := newRemoteProcess(reg, node, RunParams{
		RunID: rs.RunID, RawCommand: rs.Command, Dir: rs.Dir, AgentID: rs.AgentID, SessionKey: rs.SessionKey,
		PTY: rs.PTY, KeepStdin: rs.KeepStdin, Owner: rs.Owner, SessionID: rs.SessionID,
	})
	st := rs
	p.started, p.pid, p.pty, p.cwd, p.link, p.adopting = true, rs.PID, rs.PTY, rs.Dir, l, &st
	p.stdinOpen = rs.KeepStdin && rs.Running
	return p
}

// adopt takes the kept output of an adopted run (a kept frame): what
// follows it streams as usual. It returns the run to hand to the sessions,
// nil if the run is not being adopted.
func (p *RemoteProcess) adopt(f *frame) *AdoptedRun {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.adopting == nil || f.Kept == nil {
		return nil
	}
	a := &AdoptedRun{Process: p, State: *p.adopting, Output: f.Data,
		Covered: f.Kept.Stdout + f.Kept.Stderr, Dropped: f.Kept.Dropped}
	p.adopting = nil
	p.recv = [2]int64{f.Kept.Stdout, f.Kept.Stderr}
	return a
}

// output appends an output frame to its stream, without what was already
// received (the frame's Offset says where its data starts).
func (p *RemoteProcess) output(f *frame) {
	i := streamIndex(f.Stream)
	data := f.Data
	p.mu.Lock()
	end := f.Offset + int64(len(data))
	switch {
	case end <= p.recv[i]:
		p.mu.Unlock()
		return
	case f.Offset < p.recv[i]:
		data = data[p.recv[i]-f.Offset:]
	case f.Offset > p.recv[i]:
		p.reg.logf("nodeexec: run %s on %s: %d bytes of %s never arrived", p.runID, p.nodeName, f.Offset-p.recv[i], f.Stream)
	}
	p.recv[i] = end
	p.mu.Unlock()
	if i == 1 && p.stderr != nil {
		p.stderr.append(data)
	} else {
		p.stdout.append(data)
	}
}

// received is how many output bytes arrived per stream: where the node
// resumes the output after a reconnect.
func (p *RemoteProcess) received() (stdout, stderr int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.recv[0], p.recv[1]
}

// SessionID is the gateway session the run belongs to.
func (p *RemoteProcess) SessionID() string { return p.params.SessionID }

// RunID is the run's id on the link (also the node's key for it).
func (p *RemoteProcess) RunID() string { return p.runID }

// Node is the name of the node the run is on.
func (p *RemoteProcess) Node() string { return p.nodeName }

// NodeID is the id of the node the run is on.
func (p *RemoteProcess) NodeID() string { return p.nodeID }

// Cwd is the working directory the node used.
func (p *RemoteProcess) Cwd() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cwd
}

// Warnings are the node's start warnings (workdir fallback, PTY fallback);
// the sessions Manager shows them in the exec result.
func (p *RemoteProcess) Warnings() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.warnings...)
}

// PID is the process id on the node.
func (p *RemoteProcess) PID() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pid
}

// Stdout is the output stream (stdout and stderr merged for a PTY).
func (p *RemoteProcess) Stdout() io.Reader { return p.stdout }

// Stderr is the error stream, or nil for a PTY.
func (p *RemoteProcess) Stderr() io.Reader {
	if p.stderr == nil {
		return nil
	}
	return p.stderr
}

// liveLink returns the current link, or an error if the run ended or the
// link is down.
func (p *RemoteProcess) liveLink() (*gwLink, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.finished {
		return nil, fmt.Errorf("run %s on node %s: %w", p.runID, p.nodeName, ErrExited)
	}
	if p.link == nil {
		return nil, fmt.Errorf("run %s: %w: node %s is not connected", p.runID, ErrNodeOffline, p.nodeName)
	}
	return p.link, nil
}

// Write sends data to the process's stdin on the node, in chunks of at most
// MaxStdinChunk bytes. It returns once the data is on the link.
func (p *RemoteProcess) Write(b []byte) (int, error) {
	p.mu.Lock()
	open := p.stdinOpen
	p.mu.Unlock()
	if !open {
		return 0, fmt.Errorf("run %s: %w", p.runID, ErrNoStdin)
	}
	l, err := p.liveLink()
	if err != nil {
		return 0, err
	}
	n := 0
	for n < len(b) {
		end := min(len(b), n+MaxStdinChunk)
		if err := l.send(&frame{Type: frameStdin, RunID: p.runID, Data: b[n:end]}); err != nil {
			return n, fmt.Errorf("run %s: write stdin: %w", p.runID, err)
		}
		n = end
	}
	return n, nil
}

// CloseStdin closes stdin on the node (EOF for a pipe; ^D for a PTY).
func (p *RemoteProcess) CloseStdin() error {
	p.mu.Lock()
	open := p.stdinOpen
	p.stdinOpen = p.pty // a PTY stays writable after ^D
	p.mu.Unlock()
	if !open {
		return fmt.Errorf("run %s: %w", p.runID, ErrNoStdin)
	}
	l, err := p.liveLink()
	if err != nil {
		return err
	}
	if err := l.send(&frame{Type: frameStdinClose, RunID: p.runID}); err != nil {
		return fmt.Errorf("run %s: close stdin: %w", p.runID, err)
	}
	return nil
}

// Resize changes the terminal size of a PTY run.
func (p *RemoteProcess) Resize(ctx context.Context, cols, rows int) error {
	p.mu.Lock()
	isPTY := p.pty
	p.mu.Unlock()
	if !isPTY {
		return fmt.Errorf("run %s: %w", p.runID, ErrNotPTY)
	}
	if cols <= 0 || rows <= 0 || cols > 0xffff || rows > 0xffff {
		return fmt.Errorf("run %s: terminal size %dx%d out of range", p.runID, cols, rows)
	}
	l, err := p.liveLink()
	if err != nil {
		return err
	}
	if err := l.sendCtx(ctx, &frame{Type: frameResize, RunID: p.runID, Cols: cols, Rows: rows}); err != nil {
		return fmt.Errorf("run %s: resize: %w", p.runID, err)
	}
	return nil
}

// Wait blocks until the run ended and returns its exit code, or the signal
// that ended it (code -1). A run whose link was lost and not restored within
// the grace period returns an error wrapping ErrLinkLost.
func (p *RemoteProcess) Wait(ctx context.Context) (int, string, error) {
	select {
	case <-p.done:
	case <-ctx.Done():
		return -1, "", fmt.Errorf("run %s: wait: %w", p.runID, ctx.Err())
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exitCode, p.signal, p.err
}

// Done is closed when the run ended.
func (p *RemoteProcess) Done() <-chan struct{} { return p.done }

// Kill asks the node to end the run's whole process tree (TERM, then KILL
// after the node's grace) and waits until the node reports the exit or ctx
// ends. While the link is down the kill cannot be delivered: the node kills
// its runs itself when its own grace ends, and this run fails when the
// gateway's grace ends; Kill waits for that.
func (p *RemoteProcess) Kill(ctx context.Context) error {
	p.mu.Lock()
	finished, l, doubt := p.finished, p.link, p.doubt
	p.mu.Unlock()
	if finished {
		return nil
	}
	if l == nil && doubt != "" {
		// Its node is gone past the grace: the kill cannot reach it, and
		// waiting would not either. The run ends here, saying so.
		p.finish(-1, "", &LinkLostError{Node: p.nodeName, RunID: p.runID,
			Detail: "killed while its node was unreachable past the grace: the kill was not delivered, and the command may still be running on the node"})
		return nil
	}
	if l != nil {
		if err := l.sendCtx(ctx, &frame{Type: frameKill, RunID: p.runID}); err != nil {
			p.reg.logf("nodeexec: kill %s on %s: %v", p.runID, p.nodeName, err)
		}
	}
	select {
	case <-p.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("run %s on node %s: kill: %w", p.runID, p.nodeName, ctx.Err())
	}
}

// finish ends the run once: output streams reach EOF, Wait returns.
func (p *RemoteProcess) finish(code int, sig string, err error) {
	p.mu.Lock()
	if p.finished {
		p.mu.Unlock()
		return
	}
	p.finished = true
	p.exitCode, p.signal, p.err = code, sig, err
	p.stdinOpen = false
	p.link = nil
	if p.lostTimer != nil {
		p.lostTimer.Stop()
		p.lostTimer = nil
	}
	p.mu.Unlock()
	p.stdout.close()
	if p.stderr != nil {
		p.stderr.close()
	}
	close(p.done)
	p.reg.forgetRun(p)
}

// linkDown starts the grace period after which the run fails.
func (p *RemoteProcess) linkDown(cause error, grace time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.finished || !p.started {
		return
	}
	p.link = nil
	if p.lostTimer != nil {
		return
	}
	node, durable := p.nodeName, p.durable
	p.lostTimer = time.AfterFunc(grace, func() {
		if durable {
			// Its agent ends the run when its own grace ends, if it
			// lives; if it died, the run goes on under its host
			// supervisor until an agent on the same state directory
			// takes it back. Not failed while it may run: in doubt
			// until the node reconnects (relink, or attach fails it).
			p.mu.Lock()
			if !p.finished {
				p.doubt = fmt.Sprintf("unknown: the link to node %q was lost (%v) and not restored within %s; the command may still be running (under the node's host supervisor if its agent died)", node, cause, grace)
				p.lostTimer = nil
			}
			p.mu.Unlock()
			p.reg.logf("nodeexec: run %s on %s: link not restored within %s; its state is unknown until the node reconnects", p.runID, node, grace)
			return
		}
		p.finish(-1, "", &LinkLostError{Node: node, RunID: p.runID,
			Detail: fmt.Sprintf("%v; it was not restored within %s, so the run is failed and the node kills what it started", cause, grace)})
	})
}

// Doubt is its hostapi.Started.Doubt: why the run's state is unknown (its
// node's link was not restored within the grace), "" when it is known.
func (p *RemoteProcess) Doubt() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.finished {
		return ""
	}
	return p.doubt
}

// relink attaches the run to a new link of its node.
func (p *RemoteProcess) relink(l *gwLink) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.finished {
		return false
	}
	p.link, p.doubt = l, ""
	if p.lostTimer != nil {
		p.lostTimer.Stop()
		p.lostTimer = nil
	}
	return true
}

func (p *RemoteProcess) answerWith(f *frame) {
	select {
	case p.answer <- f:
	default:
	}
}
