package sandbox

import (
	"errors"
	"fmt"
	"strings"

	"github.com/sandboxctl/sandboxctl/sandbox/sandboxconfig"
)

// ErrNoCapacity means no healthy Engine can take another sandbox (all at
// their maxSandboxes or memory cap, or without the image or the configured
// runtime). It is of the
// Unavailable class, through ErrEngineDown's parent.
var ErrNoCapacity = errors.New("no Engine can take another sandbox")

// sandboxMemory is the memory limit of one sandbox (0: none configured).
func (m *DockerEngine) sandboxMemory() int64 {
	r, _ := sandboxconfig.ParseResources(m.cfg.Docker) // validated in NewManager
	return r.Memory
}

// place picks the Engine for a new sandbox: among the healthy Engines that
// have the image, the configured runtime (sandbox.docker.runtime) and room
// under maxSandboxes and their memory cap (the
// configured one, else the Engine's own memory), the one with the most
// memory left, then the fewest sandboxes, then the first configured.
func (f *fleet) place(sandboxMem int64) (*member, error) {
	var best *member
	var bestFree int64
	bestCount := 0
	var why []string
	healthyN, runtimeMissingN, missing := 0, 0, ""
	for _, mb := range f.members {
		mb.mu.Lock()
		healthy, imageOK, noRuntime, count, memTotal := mb.healthy, mb.imageOK, mb.noRuntime, mb.count, mb.memTotal
		lastErr := mb.lastErr
		mb.mu.Unlock()
		memCap := mb.eng.MemoryBytes
		if memCap == 0 {
			memCap = memTotal
		}
		free := memCap - int64(count)*sandboxMem
		if healthy {
			healthyN++
		}
		switch {
		case !healthy:
			why = append(why, fmt.Sprintf("%s: down (%v)", mb.eng.Name, lastErr))
			continue
		case !imageOK:
			why = append(why, fmt.Sprintf("%s: image missing", mb.eng.Name))
			continue
		case noRuntime != "":
			runtimeMissingN, missing = runtimeMissingN+1, noRuntime
			why = append(why, fmt.Sprintf("%s: no runtime %q", mb.eng.Name, noRuntime))
			continue
		case mb.eng.MaxSandboxes > 0 && count >= mb.eng.MaxSandboxes:
			why = append(why, fmt.Sprintf("%s: at maxSandboxes %d", mb.eng.Name, mb.eng.MaxSandboxes))
			continue
		case memCap > 0 && sandboxMem > 0 && free < sandboxMem:
			why = append(why, fmt.Sprintf("%s: memory cap reached", mb.eng.Name))
			continue
		}
		if best == nil || free > bestFree || (free == bestFree && count < bestCount) {
			best, bestFree, bestCount = mb, free, count
		}
	}
	if best == nil && healthyN > 0 && runtimeMissingN == healthyN {
		// Not a matter of waiting: no Engine that answers has the runtime.
		return nil, &sandboxconfig.ConfigError{Field: "sandbox.docker.runtime", Value: missing,
			Msg: fmt.Sprintf("no Engine that answers has this runtime (%s)", strings.Join(why, "; "))}
	}
	if best == nil {
		return nil, fmt.Errorf("%w: %w (%s)", ErrEngineDown, ErrNoCapacity, strings.Join(why, "; "))
	}
	return best, nil
}
