package cgroups

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// The classic builder (Engine API 1.41) takes no PIDs limit for the
// containers of its RUN steps, only a cgroup parent. A BuildParent is that
// parent: a cgroup forged creates at the top of the engine's hierarchy
// (the cgroupfs driver places a container at <parent>/<id>), whose
// pids.max bounds every process of the build together. It needs the
// engine's cgroup hierarchy mounted here with its root visible (a local,
// rootful engine), and the cgroupfs driver: under the systemd driver the
// engine only takes a slice as a parent.

// BuildParent is one build's cgroup parent with its PIDs limit.
type BuildParent struct {
	// Name is the cgroup's path under the hierarchy's root ("/forged-…"),
	// the value of the build's CgroupParent.
	Name string
	dir  string
	// others are the cgroup's directories in the other hierarchies
	// mounted at their root: the cgroupfs driver creates the parent in
	// every one (memory, cpu, ... on v1), and leaves it there.
	others []string
	// release, when set, ends the cgroup's registration as a live build
	// (BuildCgroups) once it has been removed.
	release func()
}

var parentName = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,99}$`)

// NewBuildParent creates the cgroup name at the root of the pids
// hierarchy (v1) or of the unified one (v2, with the root's controllers
// enabled for its children), writes pids.max and reads it back: a limit
// the kernel did not take is an error, and the cgroup is removed.
func (l Locator) NewBuildParent(name string, pids int64) (*BuildParent, error) {
	if !parentName.MatchString(name) || pids <= 0 {
		return nil, fmt.Errorf("build cgroup %q with pids.max %d: invalid", name, pids)
	}
	raw, err := readBounded(filepath.Join(l.procRoot(), "self", "mountinfo"), maxMountinfoBytes)
	if err != nil {
		return nil, fmt.Errorf("cgroup mounts: %w", err)
	}
	mounts, err := ParseMountinfo(raw)
	if err != nil {
		return nil, fmt.Errorf("cgroup mounts: %w", err)
	}
	root, v2, err := l.pidsRoot(mounts)
	if err != nil {
		return nil, err
	}
	p := &BuildParent{Name: "/" + name, dir: filepath.Join(root, name)}
	for _, h := range l.hierarchies(mounts) {
		if d := filepath.Join(h, name); d != p.dir {
			p.others = append(p.others, d)
		}
	}
	if err := os.Mkdir(p.dir, 0o755); err != nil {
		return nil, fmt.Errorf("create the build cgroup: %w", err)
	}
	fail := func(err error) (*BuildParent, error) {
		_ = p.Remove()
		return nil, err
	}
	if v2 {
		// The engine sets memory and CPU limits on the build's containers:
		// the parent passes the root's controllers down.
		ctl, err := readBounded(filepath.Join(root, "cgroup.subtree_control"), maxCounterBytes)
		if err != nil {
			return fail(fmt.Errorf("the v2 root's controllers: %w", err))
		}
		fields := strings.Fields(string(ctl))
		if !containsString(fields, "pids") {
			return fail(errors.New("the pids controller is not enabled at the v2 root"))
		}
		var enable []string
		for _, c := range fields {
			enable = append(enable, "+"+c)
		}
		if err := os.WriteFile(filepath.Join(p.dir, "cgroup.subtree_control"), []byte(strings.Join(enable, " ")), 0o644); err != nil {
			return fail(fmt.Errorf("enable the build cgroup's controllers: %w", err))
		}
	}
	max := filepath.Join(p.dir, "pids.max")
	if err := os.WriteFile(max, []byte(strconv.FormatInt(pids, 10)), 0o644); err != nil {
		return fail(fmt.Errorf("write pids.max: %w", err))
	}
	got, err := readBounded(max, maxCounterBytes)
	if err != nil {
		return fail(fmt.Errorf("read pids.max back: %w", err))
	}
	if strings.TrimSpace(string(got)) != strconv.FormatInt(pids, 10) {
		return fail(fmt.Errorf("pids.max reads %q after writing %d", strings.TrimSpace(string(got)), pids))
	}
	return p, nil
}

// pidsRoot is the directory of the root of the hierarchy holding the pids
// controller, as mounted here: a v1 pids hierarchy, else the unified one.
// A mount of a sub-tree (a cgroup namespace) does not expose the engine's
// root and is not used.
func (l Locator) pidsRoot(mounts []Mount) (string, bool, error) {
	for _, mt := range mounts {
		if mt.Version == V1 && mt.has("pids") && mt.Root == "/" {
			return filepath.Join(l.Root, mt.Point), false, nil
		}
	}
	for _, mt := range mounts {
		if mt.Version == V2 && mt.Root == "/" {
			return filepath.Join(l.Root, mt.Point), true, nil
		}
	}
	return "", false, errors.New("no cgroup hierarchy with the pids controller is mounted here at its root")
}

// hierarchies are the directories of every cgroup hierarchy mounted here
// at its root (a sub-tree mount does not hold the engine's parents).
func (l Locator) hierarchies(mounts []Mount) []string {
	var out []string
	for _, mt := range mounts {
		if mt.Root == "/" {
			out = append(out, filepath.Join(l.Root, mt.Point))
		}
	}
	return out
}

// Remove removes the cgroup, in every hierarchy the engine created it in,
// once the build's containers are gone; a cgroup already gone is no
// error. The build is then no longer live: a cgroup Remove could not
// remove (still busy) is left to the reaper.
func (p *BuildParent) Remove() error {
	var errs []error
	for _, d := range append(slices.Clone(p.others), p.dir) {
		if err := os.Remove(d); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if p.release != nil {
		p.release()
	}
	return errors.Join(errs...)
}

func containsString(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
