package nodeexec

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sandboxctl/sandboxctl/sessions/hostapi"
)

// NewID returns a random 128-bit id in hex.
func NewID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Start asks node (id or name; "" = the only node) to run spec. The node
// re-checks the request with its own guard: a refusal is a *DeniedError
// (errors.Is ErrDenied), a pending approval an *ApprovalPendingError; an
// unknown node is ErrNodeUnknown and a disconnected one ErrNodeOffline. If
// the link drops before the node answered, Start waits for the node to come
// back (up to the link grace) and resends the request under the same
// idempotency key, so the node never starts it twice.
//
// ctx bounds the start only; the run lives until it exits or is killed.
func (r *Registry) Start(ctx context.Context, node string, spec hostapi.StartSpec) (*RemoteProcess, error) {
	if strings.TrimSpace(spec.Command) == "" {
		return nil, errors.New("nodeexec: start: empty command")
	}
	e, err := r.lookup(node)
	if err != nil {
		return nil, fmt.Errorf("nodeexec: start: %w", err)
	}
	params := RunParams{
		Argv: []string{"/bin/sh", "-c", spec.Command}, RawCommand: spec.Command,
		Dir: spec.Dir, Env: spec.Env, AgentID: spec.AgentID, SessionKey: spec.SessionKey,
		RunID: NewID(), IdempotencyKey: NewID(), Security: spec.Security, Ask: spec.Ask,
		PTY: spec.PTY, Cols: spec.Cols, Rows: spec.Rows, KeepStdin: spec.KeepStdin,
		SessionID: spec.SessionID,
	}
	if spec.Timeout > 0 {
		params.TimeoutMs = max(1, spec.Timeout.Milliseconds())
	}
	return r.startParams(ctx, e, params)
}

// startParams sends a prepared system.run and waits for the node's answer.
func (r *Registry) startParams(ctx context.Context, e *nodeEntry, params RunParams) (*RemoteProcess, error) {
	params.Owner = r.ownerMark(r.epoch, e.hello.NodeID, params)
	if err := params.validate(); err != nil {
		return nil, fmt.Errorf("nodeexec: start: invalid request: %w", err)
	}
	r.mu.Lock()
	canRun := slices.Contains(e.hello.Capabilities, CapSystemRun)
	r.mu.Unlock()
	if !canRun {
		return nil, fmt.Errorf("nodeexec: start: node %s does not offer %s", e.hello.Name, CapSystemRun)
	}
	l, _ := r.currentLink(e)
	if l == nil {
		r.mu.Lock()
		name, lastErr := e.hello.Name, e.lastErr
		r.mu.Unlock()
		return nil, fmt.Errorf("nodeexec: start: %w: node %s is not connected (last error: %s)", ErrNodeOffline, name, lastErr)
	}
	r.mu.Lock()
	rp := newRemoteProcess(r, e, params)
	r.runs[params.RunID] = rp
	r.mu.Unlock()
	ok := false
	defer func() {
		if !ok {
			r.forgetRun(rp)
		}
	}()
	sctx, cancel := context.WithTimeout(ctx, r.opts.StartTimeout)
	defer cancel()
	for {
		l, changed := r.currentLink(e)
		if l == nil || l.ctx.Err() != nil {
			t := time.NewTimer(r.opts.LinkGrace)
			select {
			case <-changed:
				t.Stop()
				continue
			case <-t.C:
				return nil, fmt.Errorf("nodeexec: start on %s: %w: the link dropped before the node answered and did not come back within %s",
					rp.nodeName, ErrNodeOffline, r.opts.LinkGrace)
			case <-sctx.Done():
				t.Stop()
				return nil, fmt.Errorf("nodeexec: start on %s: %w", rp.nodeName, sctx.Err())
			}
		}
		rp.mu.Lock()
		rp.link = l
		rp.mu.Unlock()
		if err := l.sendCtx(sctx, &frame{Type: frameRun, RunID: params.RunID, Run: &params}); err != nil {
			r.logf("nodeexec: send run %s to %s: %v (will retry when the link is back)", params.RunID, rp.nodeName, err)
			l.close(err)
		}
		select {
		case f := <-rp.answer:
			switch f.Type {
			case frameStarted:
				ok = true
				return rp, nil
			case frameDenied:
				return nil, &DeniedError{Node: rp.nodeName, Reason: f.Reason}
			case framePending:
				a := Approval{}
				if f.Approval != nil {
					a = *f.Approval
				}
				a.NodeID, a.Node = rp.nodeID, rp.nodeName
				return nil, &ApprovalPendingError{Node: rp.nodeName, Approval: a}
			default:
				return nil, fmt.Errorf("nodeexec: node %s could not start the command: %s", rp.nodeName, f.Reason)
			}
		case <-l.ctx.Done():
			// Retry on the next link with the same idempotency key.
		case <-sctx.Done():
			_ = l.send(&frame{Type: frameKill, RunID: params.RunID})
			return nil, fmt.Errorf("nodeexec: start on %s: no answer: %w", rp.nodeName, sctx.Err())
		}
	}
}
