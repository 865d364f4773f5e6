package cgroups

import (
	"context"
	"errors"
	"time"
)

// eventsPoll is how often WatchEvents reads pids.events. Under gVisor a
// sandbox that meets its pids limit dies whole, and its cgroup with the
// counter goes about 70 to 80 ms after the first refused fork (measured
// on this project's 2-core host, runsc on ptrace, cgroup v1); the
// sampler's ticks are 250 ms apart. cgroup v1 sends no inotify event for
// the file, so it is polled: a hundred small reads a second.
const eventsPoll = 10 * time.Millisecond

var errNoPidsController = errors.New("the cgroup has no pids controller to watch")

// WatchEvents calls changed with the cgroup's count of forks refused at
// pids.max when it first reads a count above zero and each time it grows,
// until ctx ends or the cgroup is gone (then it returns nil). It returns
// an error at once when the cgroup has no pids controller to read.
func (c *Container) WatchEvents(ctx context.Context, changed func(pidsMaxEvents uint64)) error {
	if c.Pids == "" {
		return errNoPidsController
	}
	read := func() (uint64, bool) {
		ev, err := readKeyed(c.Pids, "pids.events")
		if err != nil {
			return 0, false
		}
		return ev["max"], true
	}
	t := time.NewTicker(eventsPoll)
	defer t.Stop()
	var last uint64
	for first := true; ; first = false {
		if !first {
			select {
			case <-ctx.Done():
				return nil
			case <-t.C:
			}
		}
		n, ok := read()
		if !ok {
			return nil // the cgroup is gone
		}
		if n > last {
			last = n
			changed(n)
		}
	}
}
