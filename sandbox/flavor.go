package sandbox

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"

	"github.com/docker/go-units"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	"golang.org/x/sys/unix"

	"github.com/sandboxctl/sandboxctl/sandbox/sandboxconfig"
)

// engineFlavor is what serves an Engine's API, learnt once per Manager
// from /version: Docker, or Podman's Docker-compatible service.
type engineFlavor struct {
	mu     sync.Mutex
	known  bool
	podman bool
	// rlimit reads the limits a Podman container's nofile/nproc default
	// to: those of the process serving the Engine's socket when it is a
	// local unix socket, else this process's.
	rlimit func(resource int) (unix.Rlimit, error)
}

// isPodman reports whether the Engine is Podman (its /version lists a
// "Podman Engine" component). A failed lookup counts as Docker and is
// asked again next time.
func (m *DockerEngine) isPodman(ctx context.Context) bool {
	m.flavor.mu.Lock()
	defer m.flavor.mu.Unlock()
	if !m.flavor.known {
		v, err := m.cli.ServerVersion(ctx, client.ServerVersionOptions{})
		if err != nil {
			return false
		}
		m.flavor.known = true
		for _, c := range v.Components {
			if c.Name == "Podman Engine" {
				m.flavor.podman = true
			}
		}
		m.flavor.rlimit = ownRlimit
		if m.flavor.podman {
			if path, ok := strings.CutPrefix(m.cli.DaemonHost(), "unix://"); ok {
				if pid, err := socketPeer(ctx, path); err == nil {
					m.flavor.rlimit = func(resource int) (unix.Rlimit, error) { return pidRlimit(pid, resource) }
				} else {
					m.logf("sandbox: Podman at %s: cannot learn its resource limits (%v); using this process's", m.cli.DaemonHost(), err)
				}
			}
		}
	}
	return m.flavor.podman
}

// socketPeer returns the pid of the process serving the unix socket at
// path (SO_PEERCRED).
func socketPeer(ctx context.Context, path string) (int, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return 0, fmt.Errorf("dial %s: %w", path, err)
	}
	defer c.Close()
	raw, err := c.(*net.UnixConn).SyscallConn()
	if err != nil {
		return 0, fmt.Errorf("peer of %s: %w", path, err)
	}
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return 0, fmt.Errorf("peer of %s: %w", path, err)
	}
	if credErr != nil {
		return 0, fmt.Errorf("peer of %s: %w", path, credErr)
	}
	return int(cred.Pid), nil
}

// pidRlimit returns process pid's limit for resource.
func pidRlimit(pid, resource int) (unix.Rlimit, error) {
	var r unix.Rlimit
	if err := unix.Prlimit(pid, resource, nil, &r); err != nil {
		return r, fmt.Errorf("limits of pid %d: %w", pid, err)
	}
	return r, nil
}

// podmanRlimits are the resource limits a container on Podman gets unless
// sandbox.docker.ulimits names them.
var podmanRlimits = []struct {
	name     string
	resource int
}{{"nofile", unix.RLIMIT_NOFILE}, {"nproc", unix.RLIMIT_NPROC}}

// ownRlimit returns this process's limit for resource.
func ownRlimit(resource int) (unix.Rlimit, error) {
	var r unix.Rlimit
	err := unix.Getrlimit(resource, &r)
	return r, err
}

// adaptForPodman rewrites what Podman 4.3's compatible API refuses or gets
// wrong:
//   - the uid=/gid= options of a tmpfs (its tmpfs takes U, which gives the
//     mount to the container's user);
//   - no ulimit for nofile or nproc: Podman then sets its own default
//     (1048576), which runc fails to apply where the host's hard limit is
//     lower. Docker's containers inherit the daemon's limits; here the
//     container gets this process's (getrlimit), which fit on the machine
//     this daemon runs on. A remote Podman with lower limits needs
//     sandbox.docker.ulimits.
//
// A configured runtime is refused: Podman 4.3's compatible API ignores
// HostConfig.Runtime and runs its default OCI runtime, so a sandbox asked
// to run under gVisor would silently run under runc.
func adaptForPodman(hc *container.HostConfig, getrlimit func(resource int) (unix.Rlimit, error)) error {
	if hc.Runtime != "" {
		return &sandboxconfig.ConfigError{Field: "sandbox.docker.runtime", Value: hc.Runtime,
			Msg: "Podman's Docker-compatible API ignores the runtime (the container would run under Podman's default OCI runtime); leave it empty and set Podman's default runtime in its containers.conf"}
	}
	named := map[string]bool{}
	for _, u := range hc.Ulimits {
		named[u.Name] = true
	}
	for _, l := range podmanRlimits {
		if named[l.name] {
			continue
		}
		r, err := getrlimit(l.resource)
		if err != nil || r.Cur == unix.RLIM_INFINITY || r.Max == unix.RLIM_INFINITY {
			continue // nothing to bound it by: Podman's default stands
		}
		hc.Ulimits = append(hc.Ulimits, &units.Ulimit{Name: l.name, Soft: int64(r.Cur), Hard: int64(r.Max)})
	}
	for path, opts := range hc.Tmpfs {
		var kept []string
		owned := false
		for _, o := range strings.Split(opts, ",") {
			if strings.HasPrefix(o, "uid=") || strings.HasPrefix(o, "gid=") {
				owned = true
				continue
			}
			kept = append(kept, o)
		}
		if owned {
			kept = append(kept, "U")
		}
		hc.Tmpfs[path] = strings.Join(kept, ",")
	}
	return nil
}
