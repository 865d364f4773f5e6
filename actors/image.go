package actors

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/forgedev/forged/contract"
	"github.com/forgedev/forged/dockerops"
	"github.com/forgedev/forged/failure"
)

// sandboxImageJob describes one attempt's sandbox image.
type sandboxImageJob struct {
	attemptID      string
	key            string
	project        string
	contextTarPath string
	labels         map[string]string
}

// imageBuilder builds the two-stage sandbox image: the project image from
// the config commit's build context and .forge/Dockerfile, then the agent
// overlay that adds the static worker binary. Images are tagged by the
// content key, so a tag that exists is a cache hit.
type imageBuilder struct {
	docker       ImageDocker
	workerBinary string
}

func (b *imageBuilder) lookup(ctx context.Context, key string) (string, bool, error) {
	_, agent := dockerops.SandboxImageTags(key)
	return b.docker.ImageID(ctx, agent)
}

func (b *imageBuilder) build(ctx context.Context, job sandboxImageJob, onLog func(string)) (string, error) {
	projectTag, agentTag := dockerops.SandboxImageTags(job.key)
	projectID, err := b.buildProject(ctx, job, projectTag, onLog)
	if err != nil {
		return "", err
	}
	worker, err := os.Open(b.workerBinary)
	if err != nil {
		return "", failure.Wrap(failure.SandboxBuildFailed, err, "open worker binary")
	}
	defer worker.Close()
	info, err := worker.Stat()
	if err != nil {
		return "", failure.Wrap(failure.SandboxBuildFailed, err, "stat worker binary")
	}
	overlay, err := dockerops.OverlayContext(projectID, worker, info.Size())
	if err != nil {
		return "", failure.Wrap(failure.SandboxBuildFailed, err, "prepare agent overlay")
	}
	id, err := b.docker.BuildImage(ctx, dockerops.BuildRequest{
		ContextTar: overlay,
		Dockerfile: "Dockerfile",
		Tags:       []string{agentTag},
		Labels:     withLabel(job.labels, "dev.forge.image-kind", "agent"),
		OnLog:      onLog,
	})
	if err != nil {
		return "", asBuildFailure(err, "agent overlay")
	}
	return id, nil
}

func (b *imageBuilder) buildProject(ctx context.Context, job sandboxImageJob, tag string, onLog func(string)) (string, error) {
	tar, err := os.Open(job.contextTarPath)
	if err != nil {
		return "", failure.Wrap(failure.SandboxBuildFailed, err, "open build context")
	}
	defer tar.Close()
	id, err := b.docker.BuildImage(ctx, dockerops.BuildRequest{
		ContextTar: tar,
		Dockerfile: contract.DockerfilePath,
		Tags:       []string{tag},
		Labels:     withLabel(job.labels, "dev.forge.image-kind", "project"),
		OnLog:      onLog,
	})
	if err != nil {
		return "", asBuildFailure(err, "project image")
	}
	return id, nil
}

func asBuildFailure(err error, stage string) error {
	if errors.Is(err, context.Canceled) {
		return failure.Wrap(failure.SandboxCancelled, err, "%s build cancelled", stage)
	}
	if failure.CodeOf(err) != "" {
		return fmt.Errorf("%s: %w", stage, err)
	}
	return failure.Wrap(failure.SandboxBuildFailed, err, "build %s", stage)
}

func withLabel(labels map[string]string, key, value string) map[string]string {
	out := make(map[string]string, len(labels)+1)
	for k, v := range labels {
		out[k] = v
	}
	out[key] = value
	return out
}
