package runner_test

import (
	"context"
	"sync"
	"time"

	"github.com/forgedev/forged/dockerops"
	"github.com/forgedev/forged/internal/host/preflight"
)

// probeCache is the tests' shared preflight.RuntimeProber: it runs each
// (runtime, image) probe once on the real engine, through a client of its
// own, and gives every later runner of the package the same answer. Only
// working answers are kept, so a runtime a test breaks or a probe that
// failed on a loaded machine is probed again.
type probeCache struct {
	mu      sync.Mutex
	client  *dockerops.Client
	answers map[[2]string]preflight.RuntimeProbe
}

var sharedProbes = &probeCache{answers: map[[2]string]preflight.RuntimeProbe{}}

// ProbeRuntime answers from the cache, or probes and keeps a working
// answer. The lock is held across the probe: two runners asking at once
// run it once.
func (c *probeCache) ProbeRuntime(ctx context.Context, runtime, image string) preflight.RuntimeProbe {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := [2]string{runtime, image}
	if p, ok := c.answers[key]; ok {
		return p
	}
	if c.client == nil {
		cctx, cancel := context.WithTimeout(ctx, time.Minute)
		client, err := dockerops.Connect(cctx, dockerops.Options{})
		cancel()
		if err != nil {
			return preflight.RuntimeProbe{Err: err}
		}
		c.client = client
	}
	p := c.client.ProbeRuntime(ctx, runtime, image)
	if p.Err == nil {
		c.answers[key] = p
	}
	return p
}
