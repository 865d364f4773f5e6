package fakeengine

import (
	"os"
	"path/filepath"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/volume"
)

// The seeding helpers put objects in the engine's state directly, as if a
// previous process had created them (a test of teardown or reaping starts
// from them). Each returns the object's id (a volume's is its name).

// AddNetwork adds a network.
func (e *Engine) AddNetwork(name string, labels map[string]string) string {
	id := e.nextID()
	e.mu.Lock()
	defer e.mu.Unlock()
	e.networks[id] = &network.Inspect{
		ID: id, Name: name, Created: e.now().UTC(), Scope: "local", Driver: "bridge", Internal: true,
		Labels: labels, Containers: map[string]network.EndpointResource{},
	}
	return id
}

// AddVolume adds a volume.
func (e *Engine) AddVolume(name string, labels map[string]string) string {
	dir := filepath.Join(e.dir, "volumes", name)
	_ = mkdirAll(dir)
	e.mu.Lock()
	defer e.mu.Unlock()
	e.volumes[name] = &volumeEntry{dir: dir, Volume: volume.Volume{
		Name: name, Driver: "local", Labels: labels, Scope: "local", Mountpoint: dir,
		CreatedAt: e.now().UTC().Format(time.RFC3339),
	}}
	return name
}

// AddContainer adds a created (not started) container of no image in
// particular, running program if it is started.
func (e *Engine) AddContainer(name string, labels map[string]string, program Program) string {
	id := e.nextID()
	root := filepath.Join(e.dir, "containers", id)
	_ = mkdirAll(root)
	if program == nil {
		program = Exit(0)
	}
	c := &Container{
		engine: e, id: id, name: name, created: e.now().UTC(), root: root, program: program,
		config: &container.Config{Image: "fake", Labels: labels}, host: &container.HostConfig{},
		state: container.State{Status: container.StateCreated},
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.containers[id] = c
	return id
}

// Forget removes the object named or identified by ref from the engine's
// state at once (as another party removing it would), whatever its kind.
func (e *Engine) Forget(ref string) {
	var gone *Container
	e.mu.Lock()
	if c, err := e.containerLocked(ref); err == nil {
		delete(e.containers, c.id)
		gone = c
	}
	if n, err := e.findNetwork(ref); err == nil {
		delete(e.networks, n.ID)
	}
	if v, ok := e.volumes[ref]; ok {
		delete(e.volumes, ref)
		_ = os.RemoveAll(v.dir)
	}
	e.mu.Unlock()
	if gone != nil {
		gone.kill(137, "")
		gone.detach()
		_ = os.RemoveAll(gone.root)
	}
}
