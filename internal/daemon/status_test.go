package daemon

import (
	"fmt"
	"net/http"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
)

// A quota refusal (errdefs resource-exhausted: sessions, approvals,
// sandboxes) answers 429, the other classes keep theirs.
func TestStatusForQuota(t *testing.T) {
	s := &Server{}
	for _, c := range []struct {
		err  error
		want int
	}{
		{fmt.Errorf("exec: %w", fmt.Errorf("%w: too many running sessions", cerrdefs.ErrResourceExhausted)), http.StatusTooManyRequests},
		{fmt.Errorf("x: %w", cerrdefs.ErrNotFound), http.StatusNotFound},
		{fmt.Errorf("x: %w", cerrdefs.ErrConflict), http.StatusConflict},
		{fmt.Errorf("plain"), http.StatusInternalServerError},
	} {
		if got := s.statusFor(c.err); got != c.want {
			t.Errorf("statusFor(%v) = %d, want %d", c.err, got, c.want)
		}
	}
}
