package cgroups

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/forgedev/forged/internal/kit/ids"
)

// A runner's build cgroups are named forged-build-<runner>-<build>, both
// ids as 32 lowercase hex digits, at the root of every hierarchy: the
// name says which runner created it, so a round reaps only its own
// runner's. Without a runner id a build cgroup is forged-build-<build>,
// which no round reaps.
const buildPrefix = "forged-build-"

var hex32 = regexp.MustCompile(`^[0-9a-f]{32}$`)

// BuildCgroups creates one runner's build cgroups (BuildParent) and reaps
// those a dead process left behind. It knows which ones the builds of this
// process hold: a name is registered before its cgroup is created and
// released once it has been removed, so a round never removes the parent
// of a build in progress, even between two RUN steps, when it holds no
// process. Safe for concurrent use.
type BuildCgroups struct {
	locator Locator
	prefix  string
	reaps   bool

	mu   sync.Mutex
	live map[string]bool
}

// NewBuildCgroups returns the build cgroups of the runner runnerID (a
// full UUID; "" for none, whose cgroups are never reaped) under the
// hierarchies l finds.
func NewBuildCgroups(l Locator, runnerID string) *BuildCgroups {
	b := &BuildCgroups{locator: l, prefix: buildPrefix, live: map[string]bool{}}
	if hex := strings.ReplaceAll(runnerID, "-", ""); hex32.MatchString(hex) {
		b.prefix, b.reaps = buildPrefix+hex+"-", true
	}
	return b
}

// New creates a build's cgroup parent with its PIDs limit
// (Locator.NewBuildParent), registered as live until it is removed.
func (b *BuildCgroups) New(pids int64) (*BuildParent, error) {
	name := b.prefix + strings.ReplaceAll(ids.NewUUID(), "-", "")
	b.mu.Lock()
	b.live[name] = true
	b.mu.Unlock()
	release := func() {
		b.mu.Lock()
		delete(b.live, name)
		b.mu.Unlock()
	}
	p, err := b.locator.NewBuildParent(name, pids)
	if err != nil {
		release()
		return nil, err
	}
	p.release = release
	return p, nil
}

func (b *BuildCgroups) isLive(name string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.live[name]
}

// BuildCgroupReap is what one reaping did with the runner's build
// cgroups, by name ("/forged-build-…", the engine's CgroupParent).
type BuildCgroupReap struct {
	// Removed were removed from every hierarchy; WouldRemove, what a dry
	// run would remove.
	Removed     []string `json:"removed,omitempty"`
	WouldRemove []string `json:"wouldRemove,omitempty"`
	// Live are held by a build of this process; Busy still hold a
	// process or a child cgroup (a container of the build) in some
	// hierarchy. Both are left alone.
	Live []string `json:"live,omitempty"`
	Busy []string `json:"busy,omitempty"`
}

// Reap removes the runner's build cgroups that no build of this process
// holds and that are empty (no process, no child cgroup) in every
// hierarchy mounted here at its root. Cgroups of other runners, and any
// other cgroup, are never touched. A cgroup that cannot be removed is an
// error and stays for the next round.
func (b *BuildCgroups) Reap(dryRun bool) (BuildCgroupReap, error) {
	var out BuildCgroupReap
	if b == nil || !b.reaps {
		return out, nil
	}
	raw, err := readBounded(filepath.Join(b.locator.procRoot(), "self", "mountinfo"), maxMountinfoBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return out, nil // no procfs (not Linux): no cgroups either
	}
	if err != nil {
		return out, fmt.Errorf("cgroup mounts: %w", err)
	}
	mounts, err := ParseMountinfo(raw)
	if err != nil {
		return out, fmt.Errorf("cgroup mounts: %w", err)
	}
	// Every hierarchy's directories of each of the runner's names.
	dirs := map[string][]string{}
	var errs []error
	for _, h := range b.locator.hierarchies(mounts) {
		entries, err := os.ReadDir(h)
		if errors.Is(err, fs.ErrNotExist) {
			continue // unmounted since
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("list the cgroup hierarchy %s: %w", h, err))
			continue
		}
		for _, e := range entries {
			if e.IsDir() && hex32.MatchString(strings.TrimPrefix(e.Name(), b.prefix)) && strings.HasPrefix(e.Name(), b.prefix) {
				dirs[e.Name()] = append(dirs[e.Name()], filepath.Join(h, e.Name()))
			}
		}
	}
	names := make([]string, 0, len(dirs))
	for name := range dirs {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		switch {
		case b.isLive(name):
			out.Live = append(out.Live, "/"+name)
			continue
		case !allEmpty(dirs[name]):
			out.Busy = append(out.Busy, "/"+name)
			continue
		case dryRun:
			out.WouldRemove = append(out.WouldRemove, "/"+name)
			continue
		}
		var failed []error
		for _, d := range dirs[name] {
			if err := os.Remove(d); err != nil && !errors.Is(err, fs.ErrNotExist) {
				failed = append(failed, fmt.Errorf("remove the build cgroup %s: %w", d, err))
			}
		}
		if len(failed) > 0 {
			errs = append(errs, failed...)
			continue
		}
		out.Removed = append(out.Removed, "/"+name)
	}
	return out, errors.Join(errs...)
}

// allEmpty reports whether none of the cgroup directories holds a process
// or a child cgroup. An unreadable process list counts as not empty.
func allEmpty(dirs []string) bool {
	for _, d := range dirs {
		entries, err := os.ReadDir(d)
		if err != nil {
			return false
		}
		for _, e := range entries {
			if e.IsDir() {
				return false
			}
		}
		procs, err := readBounded(filepath.Join(d, "cgroup.procs"), maxCounterBytes)
		if err != nil || strings.TrimSpace(string(procs)) != "" {
			return false
		}
	}
	return true
}
