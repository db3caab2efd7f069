package nodeexec

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

type gwLink struct {
	wsLink
	reg  *Registry
	node *nodeEntry

	mu   sync.Mutex
	rpcs map[string]chan *frame
}

func (l *gwLink) name() string {
	l.reg.mu.Lock()
	defer l.reg.mu.Unlock()
	return l.node.hello.Name
}

func (l *gwLink) nodeID() string {
	l.reg.mu.Lock()
	defer l.reg.mu.Unlock()
	return l.node.hello.NodeID
}

func (l *gwLink) close(cause error) {
	l.closeConn(cause)
	l.mu.Lock()
	for id, ch := range l.rpcs {
		close(ch)
		delete(l.rpcs, id)
	}
	l.mu.Unlock()
}

// rpc sends a request frame and waits for its reply.
func (l *gwLink) rpc(ctx context.Context, f *frame) (*frame, error) {
	f.ReqID = NewID()
	ch := make(chan *frame, 1)
	l.mu.Lock()
	if l.ctx.Err() != nil {
		l.mu.Unlock()
		return nil, fmt.Errorf("link closed: %w", context.Cause(l.ctx))
	}
	l.rpcs[f.ReqID] = ch
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		delete(l.rpcs, f.ReqID)
		l.mu.Unlock()
	}()
	if err := l.sendCtx(ctx, f); err != nil {
		return nil, err
	}
	t := time.NewTimer(DefaultStartTimeout)
	defer t.Stop()
	select {
	case rf, ok := <-ch:
		if !ok {
			return nil, fmt.Errorf("link closed: %w", context.Cause(l.ctx))
		}
		return rf, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-t.C:
		return nil, errors.New("no reply from the node")
	}
}

// pinger closes the link when a ping goes unanswered.
func (l *gwLink) pinger(every time.Duration) {
	l.keepAlive(every, func(err error) { l.close(pingError{every: every, err: err}) })
}
