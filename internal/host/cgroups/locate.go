package cgroups

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/forgedev/forged/internal/kit/ids"
	"github.com/forgedev/forged/internal/kit/text"
)

// Version is the cgroup hierarchy a Cgroup was found in.
type Version int

// The cgroup versions.
const (
	V1 Version = 1
	V2 Version = 2
)

// ErrNotContainer means the cgroup found for a pid does not name the
// container it was asked for: the pid was reused, or the engine runs in
// another pid namespace than this process.
var ErrNotContainer = errors.New("the process's cgroup does not name the container")

// Locator finds cgroups. The zero value reads the real /proc and the
// host's mount points; tests point ProcRoot and Root at fixtures.
type Locator struct {
	// ProcRoot is where procfs is mounted; "" means "/proc".
	ProcRoot string
	// Root is prepended to the mount points read from
	// <ProcRoot>/self/mountinfo; "" means none.
	Root string
}

// Cgroup is one container's cgroup: the directories of the controllers
// the readings come from ("" when a controller is not mounted).
type Cgroup struct {
	Version Version
	// Path is the cgroup's path within its hierarchy (memory's on v1), as
	// /proc/<pid>/cgroup names it.
	Path string
	// Memory, Pids, CPU and CPUAcct are directories; on v2 they are all
	// the one unified directory.
	Memory, Pids, CPU, CPUAcct string
}

// Bounds of the files the locator reads.
const (
	maxProcCgroupBytes = 64 << 10
	maxMountinfoBytes  = 1 << 20
	maxCounterBytes    = 64 << 10
)

// Find returns the cgroup of pid (a container's init process) and checks
// that its path names containerID (a full engine id); pass "" to skip the
// check. It fails when no usable hierarchy is mounted here.
func (l Locator) Find(pid int, containerID string) (Cgroup, error) {
	if pid <= 0 {
		return Cgroup{}, fmt.Errorf("cgroup of pid %d: not a process", pid)
	}
	raw, err := readBounded(filepath.Join(l.procRoot(), strconv.Itoa(pid), "cgroup"), maxProcCgroupBytes)
	if err != nil {
		return Cgroup{}, fmt.Errorf("cgroup of pid %d: %w", pid, err)
	}
	memberships, err := ParseProcCgroup(raw)
	if err != nil {
		return Cgroup{}, fmt.Errorf("cgroup of pid %d: %w", pid, err)
	}
	info, err := readBounded(filepath.Join(l.procRoot(), "self", "mountinfo"), maxMountinfoBytes)
	if err != nil {
		return Cgroup{}, fmt.Errorf("cgroup mounts: %w", err)
	}
	mounts, err := ParseMountinfo(info)
	if err != nil {
		return Cgroup{}, fmt.Errorf("cgroup mounts: %w", err)
	}
	cg, err := l.resolve(memberships, mounts)
	if err != nil {
		return Cgroup{}, fmt.Errorf("cgroup of pid %d: %w", pid, err)
	}
	if containerID != "" && !NamesContainer(cg.Path, containerID) {
		return Cgroup{}, fmt.Errorf("cgroup of pid %d is %q: %w %s", pid, text.ClipMark(cg.Path, 256, "..."), ErrNotContainer, text.ClipMark(containerID, 64, "..."))
	}
	return cg, nil
}

func (l Locator) procRoot() string {
	if l.ProcRoot == "" {
		return "/proc"
	}
	return l.ProcRoot
}

// resolve maps memberships to directories through the mounts: v1 when
// the memory controller has a v1 hierarchy, v2 otherwise.
func (l Locator) resolve(memberships []Membership, mounts []Mount) (Cgroup, error) {
	v1 := map[string]string{} // controller -> path
	unified, haveUnified := "", false
	for _, m := range memberships {
		if m.ID == 0 && len(m.Controllers) == 0 {
			unified, haveUnified = m.Path, true
			continue
		}
		for _, c := range m.Controllers {
			v1[c] = m.Path
		}
	}
	if p, ok := v1["memory"]; ok {
		dir := func(controller string) string {
			cp, ok := v1[controller]
			if !ok {
				return ""
			}
			for _, mt := range mounts {
				if mt.Version == V1 && mt.has(controller) {
					if d, ok := l.dirFor(mt, cp); ok {
						return d
					}
				}
			}
			return ""
		}
		cg := Cgroup{Version: V1, Path: p, Memory: dir("memory"), Pids: dir("pids"), CPU: dir("cpu"), CPUAcct: dir("cpuacct")}
		if cg.Memory == "" {
			return Cgroup{}, errors.New("the v1 memory hierarchy is not mounted here")
		}
		return cg, nil
	}
	if !haveUnified {
		return Cgroup{}, errors.New("the process is in no memory cgroup")
	}
	for _, mt := range mounts {
		if mt.Version == V2 {
			if d, ok := l.dirFor(mt, unified); ok {
				return Cgroup{Version: V2, Path: unified, Memory: d, Pids: d, CPU: d, CPUAcct: d}, nil
			}
		}
	}
	return Cgroup{}, errors.New("the cgroup v2 hierarchy is not mounted here")
}

// dirFor is the directory of cgroup path p under mount mt, when the mount
// exposes it (a mount of a sub-tree, as in a cgroup namespace, only
// exposes what lies below its root).
func (l Locator) dirFor(mt Mount, p string) (string, bool) {
	rel, ok := within(mt.Root, p)
	if !ok {
		return "", false
	}
	return filepath.Join(l.Root, mt.Point, filepath.FromSlash(rel)), true
}

// within returns p relative to root when p lies at or below root.
func within(root, p string) (string, bool) {
	root, p = path.Clean("/"+root), path.Clean("/"+p)
	if root == "/" {
		return p, true
	}
	if p == root {
		return "/", true
	}
	if strings.HasPrefix(p, root+"/") {
		return p[len(root):], true
	}
	return "", false
}

// NamesContainer reports whether the cgroup path's last element names the
// container: "<id>" (cgroupfs driver), "docker-<id>.scope" (systemd
// driver) or "libpod-<id>.scope". containerID must be an engine id (12 to
// 64 lowercase hex digits).
func NamesContainer(cgroupPath, containerID string) bool {
	if !ids.IsEngineID(containerID) {
		return false
	}
	base := path.Base(path.Clean("/" + cgroupPath))
	if base == containerID {
		return true
	}
	for _, prefix := range []string{"docker-", "libpod-", "cri-containerd-"} {
		if base == prefix+containerID+".scope" {
			return true
		}
	}
	return false
}

// readBounded reads a whole file of at most max bytes.
func readBounded(name string, max int) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	buf, err := io.ReadAll(io.LimitReader(f, int64(max)+1))
	if err != nil {
		return nil, err
	}
	if len(buf) > max {
		return nil, fmt.Errorf("%s is larger than %d bytes", name, max)
	}
	return buf, nil
}
