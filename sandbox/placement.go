package sandbox

import (
	"errors"
	"fmt"
	"strings"

	"github.com/sandboxctl/sandboxctl/sandbox/sandboxconfig"
)

// ErrNoCapacity means no healthy Engine can take another sandbox (all at
// their maxSandboxes or memory cap, or without the image). It is of the
// Unavailable class, through ErrEngineDown's parent.
var ErrNoCapacity = errors.New("no Engine can take another sandbox")

// sandboxMemory is the memory limit of one sandbox (0: none configured).
func (m *Manager) sandboxMemory() int64 {
	r, _ := sandboxconfig.ParseResources(m.cfg.Docker) // validated in NewManager
	return r.Memory
}

// place picks the Engine for a new sandbox: among the healthy Engines that
// have the image and room under maxSandboxes and their memory cap (the
// configured one, else the Engine's own memory), the one with the most
// memory left, then the fewest sandboxes, then the first configured.
func (f *fleet) place(sandboxMem int64) (*member, error) {
	var best *member
	var bestFree int64
	bestCount := 0
	var why []string
	for _, mb := range f.members {
		mb.mu.Lock()
		healthy, imageOK, count, memTotal := mb.healthy, mb.imageOK, mb.count, mb.memTotal
		lastErr := mb.lastErr
		mb.mu.Unlock()
		memCap := mb.eng.MemoryBytes
		if memCap == 0 {
			memCap = memTotal
		}
		free := memCap - int64(count)*sandboxMem
		switch {
		case !healthy:
			why = append(why, fmt.Sprintf("%s: down (%v)", mb.eng.Name, lastErr))
			continue
		case !imageOK:
			why = append(why, fmt.Sprintf("%s: image missing", mb.eng.Name))
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
	if best == nil {
		return nil, fmt.Errorf("%w: %w (%s)", ErrEngineDown, ErrNoCapacity, strings.Join(why, "; "))
	}
	return best, nil
}
