package nodeexec

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/sandboxctl/sandboxctl/hostexec"
)

type stdinOp struct {
	data  []byte
	close bool
}

// nodeRun is one process the node started for the gateway.
type nodeRun struct {
	a       *agent
	id, key string
	command string
	proc    *hostexec.Process
	stdin   chan stdinOp
	timer   *time.Timer

	mu           sync.Mutex
	link         *agentLink // nil while the link is down
	backlog      []*frame
	backlogBytes int
	dropped      int
	exit         *exitInfo
}

func (r *nodeRun) procExited() bool {
	select {
	case <-r.proc.Done():
		return true
	default:
		return false
	}
}

// emit sends a frame of this run in order: on the link when it is up and
// nothing is queued, else into the backlog (output beyond maxBacklog is
// dropped and counted).
func (r *nodeRun) emit(f *frame) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if f.Type == frameExit {
		r.exit = f.Exit
	}
	if r.link != nil && len(r.backlog) == 0 && r.dropped == 0 {
		if err := r.link.send(f); err == nil {
			if f.Type == frameExit {
				go r.a.forget(r)
			}
			return
		}
		r.link = nil
	}
	if f.Type == frameOutput && r.backlogBytes+len(f.Data) > maxBacklog {
		r.dropped += len(f.Data)
		return
	}
	r.markDropsLocked()
	r.backlog = append(r.backlog, f)
	r.backlogBytes += len(f.Data)
}

func (r *nodeRun) markDropsLocked() {
	if r.dropped == 0 {
		return
	}
	msg := fmt.Sprintf("\n[nodeexec: %d bytes of output dropped while the link to the gateway was down]\n", r.dropped)
	r.backlog = append(r.backlog, &frame{Type: frameOutput, RunID: r.id, Stream: streamStdout, Data: []byte(msg)})
	r.dropped = 0
}

// attachLink delivers the backlog on l and makes it the run's link.
func (r *nodeRun) attachLink(l *agentLink) {
	r.mu.Lock()
	r.markDropsLocked()
	r.link = l
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
		r.a.forget(r)
	}
}

// begin starts the output pumps, the stdin writer and the exit reporter.
func (r *nodeRun) begin() {
	var pumps sync.WaitGroup
	pump := func(rd interface{ Read([]byte) (int, error) }, stream string) {
		defer pumps.Done()
		buf := make([]byte, MaxOutputChunk)
		for {
			n, err := rd.Read(buf)
			if n > 0 {
				r.emit(&frame{Type: frameOutput, RunID: r.id, Stream: stream, Data: append([]byte(nil), buf[:n]...)})
			}
			if err != nil {
				return
			}
		}
	}
	pumps.Add(1)
	go pump(r.proc.Stdout(), streamStdout)
	if se := r.proc.Stderr(); se != nil {
		pumps.Add(1)
		go pump(se, streamStderr)
	}
	r.a.goAsync(func() {
		for {
			select {
			case op := <-r.stdin:
				var err error
				if op.close {
					err = r.proc.CloseStdin()
				} else {
					_, err = r.proc.Write(op.data)
				}
				if err != nil {
					r.a.logf("nodeexec: run %s: stdin: %v", r.id, err)
				}
			case <-r.proc.Done():
				return
			}
		}
	})
	r.a.goAsync(func() {
		code, sig, err := r.proc.Wait(context.Background())
		// What the command left behind is swept with it (its tag is
		// the ledger entry); only then is the entry done.
		if _, serr := hostexec.SweepTag(r.proc.Tag()); serr != nil {
			r.a.logf("nodeexec: run %s: sweep: %v", r.id, serr)
		}
		r.a.ledger.done(r.proc.Tag())
		pumps.Wait()
		if r.timer != nil {
			r.timer.Stop()
		}
		x := &exitInfo{Code: code, Signal: sig}
		if err != nil {
			x.Error = err.Error()
		}
		r.emit(&frame{Type: frameExit, RunID: r.id, Exit: x})
	})
}
