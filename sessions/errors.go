package sessions

import (
	"errors"
	"fmt"

	"github.com/sandboxctl/sandboxctl/sessions/toolapi"
)

// ErrHostUnavailable is returned when the selected host has no
// implementation configured (Options.Hosts lacks it).
var ErrHostUnavailable = errors.New("exec host not available")

// ErrClosed is returned by Exec and Process after Close.
var ErrClosed = errors.New("sessions manager is closed")

func inputErr(field, format string, args ...any) *toolapi.InputError {
	return &toolapi.InputError{Field: field, Msg: fmt.Sprintf(format, args...)}
}
