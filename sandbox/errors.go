package sandbox

import (
	"errors"
	"fmt"
	"io"
	"syscall"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/sandboxctl/sandboxctl/sandbox/sandboxconfig"
)

// Sentinel errors callers branch on with errors.Is.
var (
	// ErrDockerUnreachable means the Docker Engine did not answer; the
	// message says how to start it.
	ErrDockerUnreachable = errors.New("docker is not reachable")
	// ErrImageMissing means the configured image is not present; the message
	// says how to build it.
	ErrImageMissing = errors.New("sandbox image missing")
	// ErrInvalidConfig marks a configuration the sandbox refuses (a blocked
	// bind, network host, unconfined seccomp, credential-looking env, ...).
	// Nothing is created when it is returned.
	ErrInvalidConfig = sandboxconfig.ErrInvalidConfig
	// ErrNotFound means no managed sandbox matches.
	ErrNotFound = errors.New("sandbox not found")
	// ErrEngineFailed means the Engine answered with an internal error
	// (HTTP 5xx), typically while it shuts down or restarts; it is of the
	// Unavailable class (the daemon answers 503).
	ErrEngineFailed = fmt.Errorf("%w: the Docker Engine failed", cerrdefs.ErrUnavailable)
)

// engineError hides the Engine's internal message (the daemon log keeps
// it) behind what happened and the way out.
type engineError struct {
	host string
	err  error
}

func (e *engineError) Error() string {
	return fmt.Sprintf("the Docker Engine at %s failed with an internal error (it is probably shutting down or restarting); "+
		"retry once `docker info` answers; the daemon log has the Engine's message", e.host)
}
func (e *engineError) Is(target error) bool {
	return target == ErrEngineFailed || target == cerrdefs.ErrUnavailable
}
func (e *engineError) Unwrap() error { return e.err }

// unreachableError wraps a connection failure with the way out.
type unreachableError struct {
	host string
	err  error
}

func (e *unreachableError) Error() string {
	return fmt.Sprintf("Docker is not reachable at %s (%v). Start it with `make docker-up` "+
		"(or `dockerd &` as root, or `systemctl start docker`), or point DOCKER_HOST at a running Engine", e.host, e.err)
}
func (e *unreachableError) Is(target error) bool { return target == ErrDockerUnreachable }
func (e *unreachableError) Unwrap() error        { return e.err }

type imageMissingError struct {
	image string
	err   error
}

func (e *imageMissingError) Error() string {
	return fmt.Sprintf("image %s is not present in the Docker Engine: build it with `make images` "+
		"(or `images/build.sh all`); sandboxctl never pulls from a registry", e.image)
}
func (e *imageMissingError) Is(target error) bool { return target == ErrImageMissing }
func (e *imageMissingError) Unwrap() error        { return e.err }

// classify turns Engine client errors into the sentinels above; op names
// the operation for the message.
func (m *DockerEngine) classify(op string, err error) error {
	if err == nil {
		return nil
	}
	if m.obs != nil {
		m.obs.EngineError(engineErrorClass(err))
	}
	switch {
	case client.IsErrConnectionFailed(err), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ENOENT):
		// Not there, or it went away in the middle of the request.
		return fmt.Errorf("%s: %w", op, &unreachableError{host: m.engineHost(), err: err})
	case cerrdefs.IsInternal(err), cerrdefs.IsUnavailable(err), cerrdefs.IsUnknown(err):
		m.logf("%s: Engine error: %v", op, err)
		return fmt.Errorf("%s: %w", op, &engineError{host: m.engineHost(), err: err})
	}
	return fmt.Errorf("%s: %w", op, err)
}

// engineErrorClass is err's class among EngineErrorClasses.
func engineErrorClass(err error) string {
	switch {
	case client.IsErrConnectionFailed(err), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ENOENT):
		return "unreachable"
	case cerrdefs.IsInternal(err), cerrdefs.IsUnknown(err):
		return "internal"
	case cerrdefs.IsUnavailable(err):
		return "unavailable"
	case cerrdefs.IsNotFound(err):
		return "not_found"
	case cerrdefs.IsConflict(err), cerrdefs.IsAlreadyExists(err):
		return "conflict"
	case cerrdefs.IsInvalidArgument(err):
		return "invalid"
	}
	return "other"
}

func isNotFound(err error) bool { return cerrdefs.IsNotFound(err) }
func isConflict(err error) bool { return cerrdefs.IsConflict(err) }
