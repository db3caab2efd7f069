package daemon

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"

	cerrdefs "github.com/containerd/errdefs"

	"github.com/sandboxctl/sandboxctl/internal/apiclient"
)

// TestErrorClassesCrossHTTP: an error of each errdefs class the daemon
// answers with comes back out of the Go client as the same class, so a
// caller branches with cerrdefs.IsNotFound and the like on either side.
func TestErrorClassesCrossHTTP(t *testing.T) {
	for _, class := range []error{
		cerrdefs.ErrInvalidArgument, cerrdefs.ErrNotFound, cerrdefs.ErrConflict, cerrdefs.ErrPermissionDenied,
		cerrdefs.ErrUnauthenticated, cerrdefs.ErrResourceExhausted, cerrdefs.ErrUnavailable, cerrdefs.ErrFailedPrecondition,
		cerrdefs.ErrNotImplemented, cerrdefs.ErrInternal,
	} {
		err := fmt.Errorf("files: stat /x: %w", class)
		code := httpStatus(err, nil)
		got := &apiclient.APIError{StatusCode: code, Message: err.Error()}
		if !errors.Is(got, class) {
			t.Errorf("%v: answered %d, which the client reads as another class", class, code)
		}
	}
	// What errhttp leaves to 500.
	for _, tc := range []struct {
		err  error
		want int
	}{
		{fmt.Errorf("sandbox: %w", cerrdefs.ErrAlreadyExists), http.StatusConflict},
		{fmt.Errorf("exec: %w", context.Canceled), http.StatusServiceUnavailable},
		{errors.New("plain"), http.StatusInternalServerError},
	} {
		if got := httpStatus(tc.err, nil); got != tc.want {
			t.Errorf("httpStatus(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
	down := errors.New("engine down")
	if got := httpStatus(fmt.Errorf("start: %w", down), func(err error) bool { return errors.Is(err, down) }); got != http.StatusServiceUnavailable {
		t.Errorf("a backend's own unavailable error: %d, want 503", got)
	}
	// A status the daemon does not use is no class a caller branches on.
	if err := (&apiclient.APIError{StatusCode: 418}); cerrdefs.IsNotFound(err) || cerrdefs.IsInvalidArgument(err) || !cerrdefs.IsUnknown(err) {
		t.Errorf("418 reads as %v", err.Unwrap())
	}
}
