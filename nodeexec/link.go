package nodeexec

import (
	"context"
	"fmt"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"
)

// wsLink is one end of a node link, on either side: the WebSocket and the
// context that ends with it (its cause says why).
type wsLink struct {
	conn   *websocket.Conn
	ctx    context.Context
	cancel context.CancelCauseFunc
}

// send writes one frame, bounded by writeTimeout.
func (l *wsLink) send(f *frame) error { return l.sendCtx(l.ctx, f) }

// sendCtx is send under ctx as well as the link's own context.
func (l *wsLink) sendCtx(ctx context.Context, f *frame) error {
	if err := context.Cause(l.ctx); err != nil {
		return fmt.Errorf("link closed: %w", err)
	}
	wctx, cancel := context.WithTimeout(ctx, writeTimeout)
	defer cancel()
	if err := wsjson.Write(wctx, l.conn, f); err != nil {
		return fmt.Errorf("write %s: %w", f.Type, err)
	}
	return nil
}

// closeConn ends the link's context with cause and drops the connection.
func (l *wsLink) closeConn(cause error) {
	l.cancel(cause)
	_ = l.conn.CloseNow()
}

// keepAlive pings every interval until the link ends; a ping unanswered
// within the interval calls fail once and stops. Both ends of the node link
// use it, so a link that silently died (no FIN, no RST) is noticed.
func (l *wsLink) keepAlive(every time.Duration, fail func(error)) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-l.ctx.Done():
			return
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(l.ctx, every)
		err := l.conn.Ping(pctx)
		cancel()
		if err != nil && l.ctx.Err() == nil {
			fail(err)
			return
		}
	}
}
