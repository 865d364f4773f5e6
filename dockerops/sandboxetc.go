package dockerops

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"

	"github.com/docker/docker/api/types/mount"

	"github.com/forgedev/forged/internal/kit/atomicfile"
)

// sandboxEtcFiles are the files the engine writes for a container on
// network "none" with SandboxNameserver as its only DNS server (Docker
// 20.10): localhost on the loopback, and the loopback nameserver.
var sandboxEtcFiles = []struct{ name, content string }{
	{"hosts", "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\nfe00::0\tip6-localnet\nff00::0\tip6-mcastprefix\nff02::1\tip6-allnodes\nff02::2\tip6-allrouters\n"},
	{"resolv.conf", "nameserver " + SandboxNameserver + "\n"},
}

// WithSandboxEtc returns a client sharing c's engine connection whose
// workers on network none get no network sandbox from the engine: the
// container is created with NetworkDisabled, so runc gives it a network
// namespace of its own and brings its loopback up, as the engine's "none"
// sandbox has, and the engine spends nothing on a sandbox (a libnetwork
// sandbox and its namespace, the files below, and the libnetwork-setkey
// prestart hook, a re-executed dockerd: about 125 ms of CPU per container
// on the benchmark host, Docker 20.10). The engine then writes no
// /etc/hosts and no /etc/resolv.conf for the container, so the same two
// files, written here into dir (made 0755, the files 0644), are mounted
// read-only in their place.
//
// They are host paths: call it only when the engine is known to run on
// this host (the bounded volume store's loop devices are attached here and
// mounted by the engine). Workers under gVisor, on an attempt network or
// in another container's namespace keep the engine's sandbox.
func (c *Client) WithSandboxEtc(dir string) (*Client, error) {
	if !filepath.IsAbs(dir) {
		return nil, fmt.Errorf("sandbox /etc directory %q is not absolute", dir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, err
	}
	for _, f := range sandboxEtcFiles {
		if err := writeIfChanged(filepath.Join(dir, f.name), []byte(f.content)); err != nil {
			return nil, err
		}
	}
	cp := *c
	cp.sandboxEtc = dir
	return &cp, nil
}

// writeIfChanged replaces path with content (0644, atomicfile), unless it
// already holds exactly that: a running worker's mount keeps the file it
// was given.
func writeIfChanged(path string, content []byte) error {
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, content) {
		if info, err := os.Lstat(path); err == nil && info.Mode() == 0o644 {
			return nil
		}
	}
	return atomicfile.Write(path, content, 0o644)
}

// withoutNetworkSandbox says whether the worker's network none is left to
// the runtime (WithSandboxEtc). A worker given host aliases keeps the
// engine's sandbox: only the engine writes them into its /etc/hosts.
func (c *Client) withoutNetworkSandbox(spec WorkerSpec) bool {
	return c.sandboxEtc != "" && spec.Network == "" && spec.NetnsContainer == "" && !spec.GVisor && len(spec.Hosts) == 0
}

// sandboxEtcMounts mounts the files of WithSandboxEtc read-only over the
// image's.
func (c *Client) sandboxEtcMounts() []mount.Mount {
	mounts := make([]mount.Mount, 0, len(sandboxEtcFiles))
	for _, f := range sandboxEtcFiles {
		mounts = append(mounts, mount.Mount{Type: mount.TypeBind, Source: filepath.Join(c.sandboxEtc, f.name), Target: "/etc/" + f.name, ReadOnly: true})
	}
	return mounts
}
