package dockerops

import (
	"context"
	"maps"
	"path"
	"slices"
	"strings"
	"sync"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/kit/ids"
	"github.com/forgedev/forged/internal/kit/text"
	"github.com/forgedev/forged/messages"
)

// Image VOLUMEs.
//
// The engine gives every path an image declares with VOLUME an anonymous
// volume of its own, on the Docker root's filesystem: writable under a
// read-only root, outside every quota, unlabelled (so neither the teardown
// nor the reaper knows it), and kept after the container unless it is
// removed with its volumes. postgres, mysql and jenkins base images declare
// such paths, so refusing them would refuse ordinary projects; forged
// covers each one instead. Every container forged creates from the agent
// image (worker, readiness probes, the secrets writer and the credential
// loader) gets, at each declared path that none of its own mounts already
// covers, a private tmpfs: the engine creates no anonymous volume for a
// path it sees mounted. The worker's is as large as its scratch tmpfs
// (ScratchTmpfsBytes), owned by the worker user and charged, like every
// tmpfs, to the worker's memory limit; a helper's is 1 MiB (helpers never
// write there). What the image had at that path is not copied in: a VOLUME
// path starts empty. Every container is also removed with its anonymous
// volumes (RemoveVolumes), for whatever an engine still creates.

// What else a container takes from its image.
//
// Beside its VOLUMEs, an image sets defaults every container made from it
// inherits unless its create says otherwise: a HEALTHCHECK (a command of
// the image's the engine runs in the container every interval), a
// STOPSIGNAL (the signal a stop sends first, instead of the SIGTERM that
// docker-init forwards and forged's programs handle), and ENV (variables
// merged into the container's own). None is forged's choice, and the
// agent image's are the project's, so every container forged creates from
// the agent or a service image for its own work (the worker, readiness
// probes, the secrets writer, the credential loader, the netns guard and
// holder) resets them through one helper, notFromImage. A service itself
// keeps its image's ENV and STOPSIGNAL (postgres stops on SIGINT and finds
// its binaries through PATH); forged builds those images itself.

// resetImageRuntime overrides the image's HEALTHCHECK (none runs) and
// STOPSIGNAL (SIGTERM) in cfg.
func resetImageRuntime(cfg *container.Config) {
	cfg.Healthcheck = &container.HealthConfig{Test: []string{"NONE"}}
	cfg.StopSignal = "SIGTERM"
}

// notFromImage resets in cfg what the container would otherwise take from
// its image (resetImageRuntime), and unsets each of the image's variables
// (imageEnv) that cfg does not set itself, unless inherit lets it through
// (nil: none is): a bare NAME in the container's Env unsets NAME in the
// engine's merge of the image's ENV with the container's.
func notFromImage(cfg *container.Config, imageEnv []string, inherit func(name string) bool) {
	resetImageRuntime(cfg)
	set := map[string]bool{}
	for _, kv := range cfg.Env {
		name, _, _ := strings.Cut(kv, "=")
		set[name] = true
	}
	for _, kv := range imageEnv {
		name, _, _ := strings.Cut(kv, "=")
		if name == "" || set[name] || (inherit != nil && inherit(name)) {
			continue
		}
		set[name] = true
		cfg.Env = append(cfg.Env, name)
	}
}

// maxImageVolumes bounds the VOLUME paths forged covers in one image.
const maxImageVolumes = 32

// helperVolumeTmpfsOptions cover a VOLUME path in a helper container.
const helperVolumeTmpfsOptions = "rw,nosuid,nodev,noexec,size=1m,mode=0755"

// asHelper makes cfg and host, a helper container's, take nothing from
// image: no HEALTHCHECK, STOPSIGNAL or ENV of its own (notFromImage), and
// a 1 MiB tmpfs over each VOLUME. Errors carry
// failure.SandboxCreateFailed.
func (c *Client) asHelper(ctx context.Context, image string, cfg *container.Config, host *container.HostConfig) error {
	volumes, env, err := c.imageFacts(ctx, image)
	if err != nil {
		return err
	}
	coverVolumes(host, volumes, helperVolumeTmpfsOptions)
	notFromImage(cfg, env, nil)
	return nil
}

// imageFacts returns what a container inherits from image that forged
// overrides: its VOLUME paths (cleaned, sorted) and its ENV. Errors carry
// failure.SandboxCreateFailed.
func (c *Client) imageFacts(ctx context.Context, ref string) (volumes, env []string, err error) {
	if f, ok := c.facts.get(ref); ok {
		return slices.Clone(f.volumes), slices.Clone(f.env), nil
	}
	resp, err := call(ctx, c, c.opts.Timeouts.Inspect, readCall, func(ctx context.Context) (image.InspectResponse, error) {
		return c.creator.ImageInspect(ctx, ref)
	})
	if cerrdefs.IsNotFound(err) {
		return nil, nil, nil // the create that follows names the missing image
	}
	if err != nil {
		return nil, nil, opError(ctx, failure.SandboxCreateFailed, err, "image inspect %s", text.Clip(ref, 80))
	}
	if resp.Config == nil {
		return nil, nil, nil
	}
	volumes, err = declaredVolumes(ref, resp.Config.Volumes)
	if err != nil {
		return nil, nil, err
	}
	env = slices.Clone(resp.Config.Env)
	c.facts.put(ref, imageFactsEntry{volumes: slices.Clone(volumes), env: slices.Clone(env)})
	return volumes, env, nil
}

// maxCachedImageFacts bounds imageFactsCache: a daemon runs few images.
const maxCachedImageFacts = 64

// imageFactsCache keeps the VOLUMEs and ENV of images named by their ID
// ("sha256:" and 64 hex digits), which is the digest of the very
// configuration they come from: they cannot change, and every worker
// create of a burst would otherwise ask the engine again. A reference by
// name is never cached (a tag moves). A nil cache keeps nothing.
type imageFactsCache struct {
	mu      sync.Mutex
	entries map[string]imageFactsEntry
}

type imageFactsEntry struct{ volumes, env []string }

func (f *imageFactsCache) get(ref string) (imageFactsEntry, bool) {
	if f == nil || !ids.IsImageID(ref) {
		return imageFactsEntry{}, false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	e, ok := f.entries[ref]
	return e, ok
}

func (f *imageFactsCache) put(ref string, e imageFactsEntry) {
	if f == nil || !ids.IsImageID(ref) {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.entries == nil || len(f.entries) >= maxCachedImageFacts {
		f.entries = make(map[string]imageFactsEntry)
	}
	f.entries[ref] = e
}

// declaredVolumes checks and cleans an image's VOLUME paths.
func declaredVolumes(ref string, declared map[string]struct{}) ([]string, error) {
	if len(declared) == 0 {
		return nil, nil
	}
	if len(declared) > maxImageVolumes {
		return nil, failure.New(failure.SandboxCreateFailed, "the image %s declares %d VOLUME paths, more than the %d forged covers with a bounded tmpfs; declare fewer VOLUMEs in .forge/Dockerfile",
			text.Clip(ref, 80), len(declared), maxImageVolumes)
	}
	out := make([]string, 0, len(declared))
	for _, p := range slices.Sorted(maps.Keys(declared)) {
		clean := path.Clean(p)
		if !path.IsAbs(clean) || clean == "/" {
			return nil, failure.New(failure.SandboxCreateFailed, "the image %s declares the VOLUME %q, which is not an absolute path below /; remove it from .forge/Dockerfile",
				text.Clip(ref, 80), text.Ellipsis(p, 120))
		}
		out = append(out, clean)
	}
	return slices.Compact(out), nil
}

// coverVolumes puts a tmpfs with options at every path of volumes that
// host does not mount already.
func coverVolumes(host *container.HostConfig, volumes []string, options string) {
	mounted := map[string]bool{}
	for target := range host.Tmpfs {
		mounted[path.Clean(target)] = true
	}
	for _, m := range host.Mounts {
		mounted[path.Clean(m.Target)] = true
	}
	for _, v := range volumes {
		if mounted[v] {
			continue
		}
		if host.Tmpfs == nil {
			host.Tmpfs = map[string]string{}
		}
		host.Tmpfs[v] = options
	}
}

// workerVolumeTmpfsOptions cover a VOLUME path in the worker: its scratch
// size, owned by the sandbox user.
func workerVolumeTmpfsOptions(workerMemoryBytes int64, user messages.SandboxUser) string {
	return scratchTmpfsOptions(ScratchTmpfsBytes(workerMemoryBytes), "0755", user)
}
