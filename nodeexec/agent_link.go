package nodeexec

import (
	"fmt"
	"time"
)

// agentLink is the node's end of one link.
type agentLink struct{ wsLink }

func (l *agentLink) close(cause error) { l.closeConn(cause) }

func (l *agentLink) pinger(every time.Duration) {
	l.keepAlive(every, func(err error) { l.close(fmt.Errorf("ping: %w", err)) })
}
