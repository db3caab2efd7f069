package sandbox

import (
	"context"
	"strings"
	"sync"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
)

// engineFlavor is what serves an Engine's API, learnt once per Manager
// from /version: Docker, or Podman's Docker-compatible service.
type engineFlavor struct {
	mu     sync.Mutex
	known  bool
	podman bool
}

// isPodman reports whether the Engine is Podman (its /version lists a
// "Podman Engine" component). A failed lookup counts as Docker and is
// asked again next time.
func (m *Manager) isPodman(ctx context.Context) bool {
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
	}
	return m.flavor.podman
}

// adaptForPodman rewrites what Podman 4.3's compatible API refuses: the
// uid=/gid= options of a tmpfs (its tmpfs takes U, which gives the mount
// to the container's user).
func adaptForPodman(hc *container.HostConfig) {
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
}
