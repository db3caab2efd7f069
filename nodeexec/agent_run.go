package nodeexec

import (
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sandboxctl/sandboxctl/hostexec"
	"github.com/sandboxctl/sandboxctl/internal/audit"
	"github.com/sandboxctl/sandboxctl/sandbox/supervisor"
	"github.com/sandboxctl/sandboxctl/vocab"
)

type stdinOp struct {
	data  []byte
	close bool
}

// runProc is a started command as the agent follows it: a child of the
// agent (*hostexec.Process) or a session of the node's host supervisor
// (*supervisor.Proc).
type runProc interface {
	Stdout() io.Reader
	Stderr() io.Reader // nil for a PTY
	Write(b []byte) (int, error)
	CloseStdin() error
	Resize(ctx context.Context, cols, rows int) error
	Wait(ctx context.Context) (int, string, error)
	Done() <-chan struct{}
	Kill(ctx context.Context) error
	PID() int
}

// nodeRun is one process the node started for the gateway.
type nodeRun struct {
	a       *agent
	id, key string
	tag     string   // run tag; in the host supervisor also its session id
	state   RunState // what hello reports (Running and PID are filled in then)
	stdin   chan stdinOp
	timer   *time.Timer

	mu   sync.Mutex
	cond *sync.Cond // signalled when link changes or the run is abandoned
	// proc is nil for a run that a previous agent started in the host
	// supervisor until the gateway says where its output resumes (held is
	// its session then), and for a run whose supervisor died (lost).
	proc         runProc
	held         *supervisor.SessionInfo
	link         *agentLink // nil while the link is down
	pos          [2]int64   // stream position of the next output byte (stdout, stderr)
	sent         [2]int64   // supervised: stream position up to which output went on a link
	recent       [2][]byte  // supervised: the last output sent per stream (at most maxResend)
	backlog      []*frame   // unsupervised: frames queued while the link is down
	backlogBytes int
	dropped      int
	exit         *exitInfo
	abandoned    bool         // nothing of it is sent any more (ended, or the agent stops)
	lostReason   string       // why the node ended it, reported with its exit
	forgotten    bool         // delivered: the agent and the supervisor dropped it
	outBytes     atomic.Int64 // output bytes read (for the audit record of its exit)
}

func newNodeRun(a *agent, id, key, tag string, st RunState) *nodeRun {
	r := &nodeRun{a: a, id: id, key: key, tag: tag, state: st, stdin: make(chan stdinOp, stdinQueue)}
	r.cond = sync.NewCond(&r.mu)
	return r
}

// supervised reports whether the run is a session of the host supervisor.
func (r *nodeRun) supervised() bool { return r.a.sup != nil }

// current returns the run's process, nil while it is held or lost.
func (r *nodeRun) current() runProc {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.proc
}

// report is the run's entry in hello.
func (r *nodeRun) report() RunState {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := r.state
	switch {
	case r.proc != nil:
		st.PID = r.proc.PID()
		select {
		case <-r.proc.Done():
		default:
			st.Running = true
		}
	case r.held != nil:
		st.PID, st.Running = r.held.PID, r.held.Running
	}
	return st
}

// emit sends a frame of this run in order. Output frames get their stream
// position. Unsupervised, a frame goes on the link when it is up and nothing
// is queued, else into the backlog (output beyond maxBacklog is dropped and
// counted). Supervised, emit waits for a link: the host supervisor keeps
// the output on disk meanwhile (its flow control holds the command's
// output back, never the command). It reports whether f was sent.
func (r *nodeRun) emit(f *frame) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if f.Type == frameOutput {
		i := streamIndex(f.Stream)
		f.Offset = r.pos[i]
		r.pos[i] += int64(len(f.Data))
	}
	if f.Type == frameExit {
		r.exit = f.Exit
	}
	if r.supervised() {
		for !r.abandoned {
			if r.link == nil {
				r.cond.Wait()
				continue
			}
			if err := r.link.send(f); err == nil {
				switch f.Type {
				case frameOutput:
					r.keepSentLocked(f)
				case frameExit:
					go r.a.delivered(r)
				}
				return true
			}
			r.link = nil
		}
		return false
	}
	if r.link != nil && len(r.backlog) == 0 && r.dropped == 0 {
		if err := r.link.send(f); err == nil {
			if f.Type == frameExit {
				go r.a.delivered(r)
			}
			return true
		}
		r.link = nil
	}
	if f.Type == frameOutput && r.backlogBytes+len(f.Data) > maxBacklog {
		r.dropped += len(f.Data)
		return false
	}
	r.markDropsLocked()
	r.backlog = append(r.backlog, f)
	r.backlogBytes += len(f.Data)
	return false
}

// maxResend is how much of the output last sent per stream a supervised
// run keeps to send again when the gateway did not get it (in flight when
// the connection died).
const maxResend = 256 << 10

// keepSentLocked records output frame f as sent.
func (r *nodeRun) keepSentLocked(f *frame) {
	i := streamIndex(f.Stream)
	r.sent[i] = f.Offset + int64(len(f.Data))
	r.recent[i] = append(r.recent[i], f.Data...)
	if n := len(r.recent[i]) - maxResend; n > 0 {
		r.recent[i] = append(r.recent[i][:0], r.recent[i][n:]...)
	}
}

// resendLocked sends on l the output the gateway lacks (it has from)
// that this run sent on an earlier link, and reports whether l took it.
func (r *nodeRun) resendLocked(l *agentLink, from [2]int64) bool {
	for i, stream := range []string{streamStdout, streamStderr} {
		missing := r.sent[i] - from[i]
		if missing <= 0 {
			continue
		}
		if missing > int64(len(r.recent[i])) {
			r.a.logf("nodeexec: run %s: %d bytes of %s sent on the lost link are no longer here to send again", r.id, missing, stream)
			missing = int64(len(r.recent[i]))
		}
		data, off := r.recent[i][int64(len(r.recent[i]))-missing:], r.sent[i]-missing
		for len(data) > 0 {
			n := min(len(data), MaxOutputChunk)
			if l.send(&frame{Type: frameOutput, RunID: r.id, Stream: stream, Offset: off, Data: data[:n]}) != nil {
				return false
			}
			data, off = data[n:], off+int64(n)
		}
	}
	return true
}

func streamIndex(stream string) int {
	if stream == streamStderr {
		return 1
	}
	return 0
}

func (r *nodeRun) markDropsLocked() {
	if r.dropped == 0 {
		return
	}
	msg := fmt.Sprintf("\n[nodeexec: %d bytes of output dropped while the link to the gateway was down]\n", r.dropped)
	r.backlog = append(r.backlog, &frame{Type: frameOutput, RunID: r.id, Stream: streamStdout, Data: []byte(msg), Offset: r.pos[0]})
	r.pos[0] += int64(len(msg))
	r.dropped = 0
}

// abandon stops every wait for a link: nothing of the run is sent any more.
func (r *nodeRun) abandon() {
	r.mu.Lock()
	r.abandoned = true
	r.cond.Broadcast()
	r.mu.Unlock()
}

// attachLink delivers the backlog on l and makes it the run's link.
func (r *nodeRun) attachLink(l *agentLink) {
	r.mu.Lock()
	r.markDropsLocked()
	r.link = l
	r.cond.Broadcast()
	delivered := false
	for len(r.backlog) > 0 {
		f := r.backlog[0]
		if err := l.send(f); err != nil {
			r.link = nil
			break
		}
		r.backlog = r.backlog[1:]
		r.backlogBytes -= len(f.Data)
		delivered = delivered || f.Type == frameExit
	}
	r.mu.Unlock()
	if delivered {
		r.a.delivered(r)
	}
}

// begin starts the output pumps, the stdin writer and the exit reporter of
// r.proc.
func (r *nodeRun) begin() {
	proc := r.current()
	var pumps sync.WaitGroup
	pump := func(rd io.Reader, stream string) {
		defer pumps.Done()
		buf := make([]byte, MaxOutputChunk)
		for {
			n, err := rd.Read(buf)
			if n > 0 {
				r.outBytes.Add(int64(n))
				r.emit(&frame{Type: frameOutput, RunID: r.id, Stream: stream, Data: append([]byte(nil), buf[:n]...)})
			}
			if err != nil {
				return
			}
		}
	}
	pumps.Add(1)
	go pump(proc.Stdout(), streamStdout)
	if se := proc.Stderr(); se != nil {
		pumps.Add(1)
		go pump(se, streamStderr)
	}
	r.a.goAsync(func() {
		for {
			select {
			case op := <-r.stdin:
				var err error
				if op.close {
					err = proc.CloseStdin()
				} else {
					_, err = proc.Write(op.data)
				}
				if err != nil {
					r.a.logf("nodeexec: run %s: stdin: %v", r.id, err)
				}
			case <-proc.Done():
				return
			}
		}
	})
	r.a.goAsync(func() {
		code, sig, err := proc.Wait(context.Background())
		if !r.supervised() {
			// What the command left behind is swept with it (its tag is
			// the ledger entry); only then is the entry done. (The host
			// supervisor does both itself.)
			if _, serr := hostexec.SweepTag(r.tag); serr != nil {
				r.a.logf("nodeexec: run %s: sweep: %v", r.id, serr)
			}
			r.a.ledger.done(r.tag)
		}
		pumps.Wait()
		if r.timer != nil {
			r.timer.Stop()
		}
		x := &exitInfo{Code: code, Signal: sig}
		r.mu.Lock()
		x.Error = r.lostReason
		r.mu.Unlock()
		if err != nil {
			x.Error = err.Error()
		}
		r.recordExit(x, proc.PID())
		r.emit(&frame{Type: frameExit, RunID: r.id, Exit: x})
	})
}

// armTimeout kills the run when the deadline passes.
func (r *nodeRun) armTimeout(deadline time.Time, timeoutMs int64) {
	r.timer = time.AfterFunc(time.Until(deadline), func() {
		r.a.logf("nodeexec: run %s: timeoutMs %d expired; killing it", r.id, timeoutMs)
		kctx, kcancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer kcancel()
		if p := r.current(); p != nil {
			_ = p.Kill(kctx)
		}
	})
}

// recordExit writes the session.exit record of the run to the node's
// audit log.
func (r *nodeRun) recordExit(x *exitInfo, pid int) {
	if r.a.opts.Audit == nil {
		return
	}
	s := &audit.Session{Signal: x.Signal, Reason: x.Error, OutputBytes: r.outBytes.Load(),
		DurationMs: time.Now().UnixMilli() - r.state.StartedAtMs, PID: pid}
	if x.Signal == "" && x.Error == "" {
		code := x.Code
		s.Status, s.ExitCode = "completed", &code
	} else {
		s.Status = "failed"
	}
	_ = r.a.opts.Audit.Record(context.Background(), audit.Record{Kind: audit.KindSessionExit, Actor: audit.Actor{Via: "gateway"},
		RequestID: r.id, SessionID: r.state.SessionID, AgentID: r.state.AgentID, SessionKey: r.state.SessionKey,
		Host: string(vocab.HostNode), Node: r.a.nodeID, Session: s})
}
