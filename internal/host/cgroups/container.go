package cgroups

import (
	"path/filepath"
	"strconv"
)

// Container is a running container seen from the host: its cgroup, and
// its file systems through its init process's root (/proc/<pid>/root).
type Container struct {
	Cgroup
	root string
}

// Open finds the cgroup of the container whose init process is pid (see
// Find) and keeps the way to its file systems.
func (l Locator) Open(pid int, containerID string) (*Container, error) {
	cg, err := l.Find(pid, containerID)
	if err != nil {
		return nil, err
	}
	return &Container{Cgroup: cg, root: filepath.Join(l.procRoot(), strconv.Itoa(pid), "root")}, nil
}

// FSUsage is one file system's sizes in bytes; Free is what an
// unprivileged writer may still use.
type FSUsage struct {
	Total, Free, Used uint64
	Tmpfs             bool
}

// StatFS reads the sizes of the file system mounted at path inside the
// container (through /proc/<pid>/root: it needs the privilege to enter
// the container's root, as root on the engine's host has).
func (c *Container) StatFS(path string) (FSUsage, error) {
	return statFS(filepath.Join(c.root, filepath.Clean("/"+path)))
}
