package sessions

import (
	"context"
	"fmt"
	"os"

	"github.com/sandboxctl/sandboxctl/hostexec"
	"github.com/sandboxctl/sandboxctl/workdir"
)

// *hostexec.Process is a Process.
var _ Process = (*hostexec.Process)(nil)

// gatewayHost adapts a hostexec.Runner (this machine) to Host.
type gatewayHost struct {
	r          *hostexec.Runner
	defaultCwd string
}

// NewGatewayHost returns the gateway Host: commands run on this machine
// through r. defaultCwd is the configured working directory (exec.cwd); ""
// means the daemon's own working directory at the time of this call.
func NewGatewayHost(r *hostexec.Runner, defaultCwd string) Host {
	if defaultCwd == "" {
		if wd, err := os.Getwd(); err == nil {
			defaultCwd = wd
		}
	}
	return &gatewayHost{r: r, defaultCwd: defaultCwd}
}

// ResolveWorkdir resolves requested against the default directory; a path
// that is not an existing directory falls back to the default with a
// warning. It never fails.
func (g *gatewayHost) ResolveWorkdir(_ context.Context, _, _, requested string) (string, string, error) {
	dir, warning := workdir.ResolveHost(g.defaultCwd, requested)
	return dir, warning, nil
}

// Start runs spec on this machine under a fresh random run tag, so that the
// process's Kill also finds descendants that left its process group.
func (g *gatewayHost) Start(ctx context.Context, spec StartSpec) (Started, error) {
	spec.Tag = "" // a fresh one
	p, err := g.r.Start(ctx, spec)
	if err != nil {
		return Started{}, fmt.Errorf("gateway: %w", err)
	}
	return Started{Process: p, Warnings: p.Warnings(), Signal: p.Signal}, nil
}

// Caps implements Host: the plain gateway host keeps nothing across a
// restart and cannot see input waits (the supervised one can).
func (g *gatewayHost) Caps() HostCaps { return HostCaps{} }
