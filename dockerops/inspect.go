package dockerops

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/docker/docker/api/types/container"
)

// inspectAPI is the part of the engine API that reads container state.
type inspectAPI interface {
	ContainerInspect(ctx context.Context, container string) (container.InspectResponse, error)
	ContainerStatsOneShot(ctx context.Context, container string) (container.StatsResponseReader, error)
}

// ContainerState is the trusted, engine-reported state of a container.
type ContainerState struct {
	OOMKilled bool
	ExitCode  int
	Error     string
	Running   bool
	Status    string
	// Pid is the container's init process on the engine's host (0 when
	// it is not running).
	Pid int
}

// InspectState returns the container's state as the engine reports it.
func (c *Client) InspectState(ctx context.Context, id string) (ContainerState, error) {
	resp, err := call(ctx, c, c.opts.Timeouts.Inspect, readCall, func(ctx context.Context) (container.InspectResponse, error) {
		return c.inspector.ContainerInspect(ctx, id)
	})
	if err != nil {
		return ContainerState{}, opError(ctx, "", err, "container inspect %s", shortID(id))
	}
	if resp.ContainerJSONBase == nil || resp.State == nil {
		return ContainerState{}, fmt.Errorf("container inspect %s: no state in the engine's answer", shortID(id))
	}
	s := resp.State
	return ContainerState{
		OOMKilled: s.OOMKilled,
		ExitCode:  s.ExitCode,
		Error:     s.Error,
		Running:   s.Running,
		Status:    string(s.Status),
		Pid:       s.Pid,
	}, nil
}

// maxStatsBytes bounds one stats document.
const maxStatsBytes = 1 << 20

// MemoryUsage samples the container's memory use once (one-shot stats),
// the way `docker stats` reports it: usage minus the reclaimable page
// cache. On cgroup v1 that is total_inactive_file (falling back to cache
// on engines that report only that), on cgroup v2 inactive_file. A
// container that is not running reports 0.
func (c *Client) MemoryUsage(ctx context.Context, id string) (uint64, error) {
	stats, err := call(ctx, c, c.opts.Timeouts.Stats, readCall, func(ctx context.Context) (container.StatsResponse, error) {
		reader, err := c.inspector.ContainerStatsOneShot(ctx, id)
		if err != nil {
			return container.StatsResponse{}, err
		}
		defer func() { _ = reader.Body.Close() }()
		var s container.StatsResponse
		if err := json.NewDecoder(io.LimitReader(reader.Body, maxStatsBytes)).Decode(&s); err != nil {
			return container.StatsResponse{}, fmt.Errorf("decode stats: %w", err)
		}
		return s, nil
	})
	if err != nil {
		return 0, opError(ctx, "", err, "container stats %s", shortID(id))
	}
	return memoryWithoutCache(stats.MemoryStats), nil
}

func memoryWithoutCache(m container.MemoryStats) uint64 {
	for _, key := range []string{"total_inactive_file", "inactive_file", "cache"} {
		if v, ok := m.Stats[key]; ok {
			if v < m.Usage {
				return m.Usage - v
			}
			return m.Usage
		}
	}
	return m.Usage
}
