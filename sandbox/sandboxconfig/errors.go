package sandboxconfig

import (
	"errors"
	"fmt"
)

// ErrInvalidConfig marks a configuration the sandbox refuses (a blocked
// bind, network host, unconfined seccomp, credential-looking env, ...).
// Nothing is created when it is returned.
var ErrInvalidConfig = errors.New("invalid sandbox configuration")

// ConfigError is an ErrInvalidConfig naming the offending setting.
type ConfigError struct {
	Field string // e.g. "sandbox.docker.binds[0]"
	Value string
	Msg   string
}

func (e *ConfigError) Error() string {
	if e.Value == "" {
		return fmt.Sprintf("%s: %s", e.Field, e.Msg)
	}
	return fmt.Sprintf("%s %q: %s", e.Field, e.Value, e.Msg)
}

// Is makes errors.Is(err, ErrInvalidConfig) true.
func (e *ConfigError) Is(target error) bool { return target == ErrInvalidConfig }
