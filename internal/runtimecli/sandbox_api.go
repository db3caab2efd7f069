package runtimecli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/sandboxctl/sandboxctl/sandbox"
)

// SandboxDetail is the body of GET /v1/sandboxes/{name}: the sandbox (its
// id, template, labels, state, expiry...), what `sandboxctl sandbox
// explain` shows for it (its config, limits and the hardening read back
// from the Engine) and its resource use now.
type SandboxDetail struct {
	sandbox.Info
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

// sandboxDetailHandler serves GET /v1/sandboxes/{name} for a sandbox
// visible finds (by id, id prefix or name); any other is 404.
func sandboxDetailHandler(m *sandbox.Manager, visible func(context.Context, string) (sandbox.Info, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("name")
		info, err := visible(r.Context(), name)
		switch {
		case errors.Is(err, sandbox.ErrNotFound):
			replyJSON(w, http.StatusNotFound, map[string]string{"error": err.Error()})
			return
		case cerrdefs.IsInvalidArgument(err):
			replyJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
			return
		case err != nil:
			replyJSON(w, http.StatusServiceUnavailable, map[string]string{"error": err.Error()})
			return
		}
		ex, err := m.Explain(r.Context(), sandbox.Scope{AgentID: info.AgentID, SessionKey: info.SessionKey})
		if err != nil {
			replyJSON(w, http.StatusServiceUnavailable, map[string]string{"error": err.Error()})
			return
		}
		d := SandboxDetail{Info: info, Explain: ex}
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
