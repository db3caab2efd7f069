package runtimecli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/sandboxctl/sandboxctl/api"
)

// sandboxUsage takes one sample (with the Engine's previous one, for the
// CPU share) of a running container.
func sandboxUsage(ctx context.Context, cli *client.Client, id string) (api.SandboxUsage, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	res, err := cli.ContainerStats(ctx, id, client.ContainerStatsOptions{IncludePreviousSample: true})
	if err != nil {
		return api.SandboxUsage{}, fmt.Errorf("stats of %s: %w", id, err)
	}
	defer res.Body.Close()
	var s container.StatsResponse
	if err := json.NewDecoder(res.Body).Decode(&s); err != nil {
		return api.SandboxUsage{}, fmt.Errorf("stats of %s: %w", id, err)
	}
	u := api.SandboxUsage{MemoryBytes: s.MemoryStats.Usage, MemoryLimitBytes: s.MemoryStats.Limit,
		Pids: s.PidsStats.Current, PidsLimit: s.PidsStats.Limit}
	// The page cache counts in usage; docker stats leaves it out too.
	if inactive, ok := s.MemoryStats.Stats["inactive_file"]; ok && inactive < u.MemoryBytes {
		u.MemoryBytes -= inactive
	}
	cpu := float64(s.CPUStats.CPUUsage.TotalUsage) - float64(s.PreCPUStats.CPUUsage.TotalUsage)
	sys := float64(s.CPUStats.SystemUsage) - float64(s.PreCPUStats.SystemUsage)
	if cpu > 0 && sys > 0 {
		u.CPUPercent = cpu / sys * float64(max(s.CPUStats.OnlineCPUs, 1)) * 100
	}
	if s.Read.IsZero() {
		return u, errors.New("the Engine sent an empty sample")
	}
	return u, nil
}
