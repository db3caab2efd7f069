package runtimecli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/sandboxctl/sandboxctl/sandbox"
)

// SandboxDetail is the body of GET /v1/sandboxes/{name}: what `sandboxctl
// sandbox explain` shows for the sandbox (its config, limits and the
// hardening read back from the Engine) and its resource use now.
type SandboxDetail struct {
	Explain sandbox.Explanation `json:"explain"`
	Usage   *SandboxUsage       `json:"usage,omitempty"`
	// UsageError says why there is no Usage (e.g. the container is stopped).
	UsageError string `json:"usageError,omitempty"`
}

// SandboxUsage is one sample of a sandbox's resource use.
type SandboxUsage struct {
	CPUPercent       float64 `json:"cpuPercent"`
	MemoryBytes      uint64  `json:"memoryBytes"`
	MemoryLimitBytes uint64  `json:"memoryLimitBytes"`
	Pids             uint64  `json:"pids"`
	PidsLimit        uint64  `json:"pidsLimit,omitempty"`
}

// sandboxDetailHandler serves GET /v1/sandboxes/{name} for a sandbox the
// manager lists (by name or id); any other name is 404.
func sandboxDetailHandler(m *sandbox.Manager) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("name")
		list, err := m.List(r.Context())
		if err != nil {
			replyJSON(w, http.StatusServiceUnavailable, map[string]string{"error": err.Error()})
			return
		}
		var info *sandbox.Info
		for i := range list {
			if list[i].Name == name || list[i].ID == name {
				info = &list[i]
			}
		}
		if info == nil {
			replyJSON(w, http.StatusNotFound, map[string]string{"error": fmt.Sprintf("no sandbox named %q (sandboxctl sandbox list shows them)", name)})
			return
		}
		ex, err := m.Explain(r.Context(), sandbox.Scope{AgentID: info.AgentID, SessionKey: info.SessionKey})
		if err != nil {
			replyJSON(w, http.StatusServiceUnavailable, map[string]string{"error": err.Error()})
			return
		}
		d := SandboxDetail{Explain: ex}
		if info.State != string(container.StateRunning) {
			d.UsageError = "the sandbox is " + info.State
		} else if u, err := sandboxUsage(r.Context(), m.Client(), info.ID); err != nil {
			d.UsageError = err.Error()
		} else {
			d.Usage = &u
		}
		replyJSON(w, http.StatusOK, d)
	})
}

// sandboxUsage takes one sample (with the Engine's previous one, for the
// CPU share) of a running container.
func sandboxUsage(ctx context.Context, cli *client.Client, id string) (SandboxUsage, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	res, err := cli.ContainerStats(ctx, id, client.ContainerStatsOptions{IncludePreviousSample: true})
	if err != nil {
		return SandboxUsage{}, fmt.Errorf("stats of %s: %w", id, err)
	}
	defer res.Body.Close()
	var s container.StatsResponse
	if err := json.NewDecoder(res.Body).Decode(&s); err != nil {
		return SandboxUsage{}, fmt.Errorf("stats of %s: %w", id, err)
	}
	u := SandboxUsage{MemoryBytes: s.MemoryStats.Usage, MemoryLimitBytes: s.MemoryStats.Limit,
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
