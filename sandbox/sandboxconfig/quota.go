package sandboxconfig

import (
	"cmp"

	"github.com/docker/go-units"
)

// EffectiveMaxPerAgent is sandbox.maxPerAgent with its default applied.
func (c Config) EffectiveMaxPerAgent() int {
	return cmp.Or(c.MaxPerAgent, DefaultMaxPerAgent)
}

// EffectiveMax is sandbox.max, or when 0 the number of sandboxes whose
// memory limit (sandbox.docker.memory, 512 MiB when unset) fits in
// machineMemory bytes, never below EffectiveMaxPerAgent.
func (c Config) EffectiveMax(machineMemory uint64) int {
	if c.Max > 0 {
		return c.Max
	}
	per := int64(512 << 20)
	if n, err := units.RAMInBytes(c.Docker.Memory); err == nil && n > 0 {
		per = n
	}
	return max(int(machineMemory/uint64(per)), c.EffectiveMaxPerAgent())
}

// MinWorkspaceQuota is the smallest sandbox.workspaceQuota (ext4 needs room
// for its own metadata).
const MinWorkspaceQuota = 16 << 20

// WorkspaceQuotaBytes parses sandbox.workspaceQuota; 0 means none.
func (c Config) WorkspaceQuotaBytes() (int64, error) {
	if c.WorkspaceQuota == "" {
		return 0, nil
	}
	n, err := units.RAMInBytes(c.WorkspaceQuota)
	if err != nil || n < MinWorkspaceQuota {
		return 0, &ConfigError{Field: "sandbox.workspaceQuota", Value: c.WorkspaceQuota, Msg: "must be a size of at least 16m, such as 512m or 2g"}
	}
	return n, nil
}
