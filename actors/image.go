package actors

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/forgedev/forged/dockerops"
	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/images/buildlog"
	"github.com/forgedev/forged/internal/images/dockerfile"
	"github.com/forgedev/forged/internal/images/imagegc"
	"github.com/forgedev/forged/internal/images/imagepolicy"
	"github.com/forgedev/forged/internal/kit/text"
	"github.com/forgedev/forged/internal/sandbox/contract"
	"github.com/forgedev/forged/messages"
)

// sandboxImageJob describes one attempt's sandbox image.
type sandboxImageJob struct {
	attemptID string
	key       string
	project   string
	// openContext writes the build context into a new unlinked file in
	// dir and returns it at its start (Git.OpenContext): only a build
	// calls it.
	openContext func(ctx context.Context, dir string) (*os.File, error)
	labels      map[string]string
	policy      string   // the execution policy
	dockerfile  []byte   // .forge/Dockerfile, as in the build context
	secrets     []string // the attempt's secret values, redacted from the build log
	// The provenance's inputs beside the Dockerfile.
	configCommit, contextDigest, contractDigest string
}

// imageBuilder builds the two-stage sandbox image: the project image from
// the config commit's build context and .forge/Dockerfile, then the agent
// overlay that adds the static worker binary. Images are tagged by the
// content key, so a tag that exists is a cache hit. Both stages run
// confined by limits, and their redacted log is stored under stateRoot.
type imageBuilder struct {
	docker       ImageDocker
	workerBinary string
	stateRoot    string
	limits       dockerops.BuildLimits
	// allowPulls lets a build start with an upstream image absent, which
	// the engine then pulls (PullParent false only prefers local images);
	// never under sandbox_required.
	allowPulls bool
	// policy is the image policy (nil: none); archiver exports and
	// removes images for it. workerDigest and builderVersion are named by
	// the provenance.
	policy         *imagepolicy.Policy
	archiver       ImageArchiver
	workerDigest   string
	builderVersion string
}

// checkPolicy applies the Dockerfile policy before anything is built:
// under every policy no ADD fetches a URL; under sandbox_required every
// upstream image is pinned by digest. Every upstream image must be present
// locally, since the engine pulls a missing one (PullParent false only
// prefers local images): unless the operator allows pulls, and always
// under sandbox_required, an absent image (or one named through a build
// argument, which cannot be looked up) refuses the build before it starts.
// Violations are failure.SandboxBuildPolicy naming the line.
func (b *imageBuilder) checkPolicy(ctx context.Context, job sandboxImageJob) error {
	required := job.policy == messages.PolicySandboxRequired
	if err := b.policy.CheckRequired(required); err != nil {
		return err
	}
	file, err := dockerfile.CheckSource(job.dockerfile, required)
	if err != nil || (b.allowPulls && !required) {
		return err
	}
	for _, img := range file.UpstreamImages() {
		if strings.Contains(img.Ref, "$") {
			return failure.New(failure.SandboxBuildPolicy, "Dockerfile line %d: the image %q depends on a build argument, so forged cannot check that it is present locally; name the image literally, or let builds pull with --allow-build-pulls",
				img.Line, text.Ellipsis(img.Ref, 120))
		}
		_, found, err := b.docker.ImageID(ctx, img.Ref)
		if err != nil {
			return failure.Wrap(failure.SandboxBuildFailed, err, "look up upstream image %s", img.Ref)
		}
		switch {
		case !found && required:
			return failure.New(failure.SandboxBuildPolicy, "Dockerfile line %d: the image %q is not present locally; sandbox_required builds never pull", img.Line, img.Ref)
		case !found:
			return failure.New(failure.SandboxBuildPolicy, "Dockerfile line %d: the image %q is not present locally and builds do not pull; load it into the engine, or let builds pull with --allow-build-pulls", img.Line, text.Ellipsis(img.Ref, 120))
		}
	}
	return nil
}

// builtImage is a finished build: the agent image, the project image
// beneath it and its stored log.
type builtImage struct {
	id, projectID string
	log           buildlog.Record
}

// buildLogged builds the image and stores its redacted log, whether or not
// the build succeeded. The log is named for the attempt that built it.
func (b *imageBuilder) buildLogged(ctx context.Context, job sandboxImageJob) (builtImage, string, error) {
	log := buildlog.New(buildlog.NewRedactor(job.secrets...))
	id, projectID, buildErr := b.build(ctx, job, log)
	rec, err := log.Save(b.stateRoot, job.key, logName(job.attemptID))
	if err != nil {
		err = failure.Wrap(failure.SandboxBuildFailed, err, "store the build log")
		return builtImage{}, log.Tail(), errors.Join(buildErr, err)
	}
	return builtImage{id: id, projectID: projectID, log: rec}, log.Tail(), buildErr
}

func logName(attemptID string) string {
	name := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			return r
		}
		return '_'
	}, attemptID)
	if name == "" || name[0] == '-' || name[0] == '_' || len(name) > 100 {
		sum := sha256.Sum256([]byte(attemptID))
		name = "attempt-" + hex.EncodeToString(sum[:8])
	}
	return name
}

// lookup finds the agent image of key: a cache hit needs the tag and, under
// every policy, the image's own labels naming it forged's agent image of
// that key. A tag on any other image is foreign: the attempt builds, and
// the build moves the tag to the image it built.
func (b *imageBuilder) lookup(ctx context.Context, key string) (id string, found, foreign bool, err error) {
	_, agent := dockerops.SandboxImageTags(key)
	id, labels, found, err := b.docker.ImageLabels(ctx, agent)
	if err != nil || !found {
		return "", false, false, err
	}
	if labels[imagegc.LabelManaged] != "true" || labels[imagegc.LabelKey] != key || labels[imagegc.LabelKind] != "agent" {
		return "", false, true, nil
	}
	return id, true, false, nil
}

func (b *imageBuilder) build(ctx context.Context, job sandboxImageJob, log *buildlog.Log) (id, projectID string, err error) {
	projectTag, agentTag := dockerops.SandboxImageTags(job.key)
	redact := buildlog.NewRedactor(job.secrets...).Redact
	projectID, err = b.buildProject(ctx, job, projectTag, log, redact)
	if err != nil {
		return "", "", err
	}
	worker, err := os.Open(b.workerBinary)
	if err != nil {
		return "", "", failure.Wrap(failure.SandboxBuildFailed, err, "open worker binary")
	}
	defer worker.Close()
	info, err := worker.Stat()
	if err != nil {
		return "", "", failure.Wrap(failure.SandboxBuildFailed, err, "stat worker binary")
	}
	overlay, err := dockerops.OverlayContext(projectID, worker, info.Size())
	if err != nil {
		return "", "", failure.Wrap(failure.SandboxBuildFailed, err, "prepare agent overlay")
	}
	id, err = b.docker.BuildImage(ctx, dockerops.BuildRequest{
		ContextTar: overlay,
		Dockerfile: "Dockerfile",
		Tags:       []string{agentTag},
		Labels:     withLabel(job.labels, "dev.forge.image-kind", "agent"),
		Limits:     b.limits,
		OnLog:      log.Line,
		Redact:     redact,
	})
	if err != nil {
		return "", "", asBuildFailure(err, "agent overlay")
	}
	return id, projectID, nil
}

func (b *imageBuilder) buildProject(ctx context.Context, job sandboxImageJob, tag string, log *buildlog.Log, redact func(string) string) (string, error) {
	tar, err := job.openContext(ctx, contextDir(b.stateRoot))
	switch {
	case err != nil && ctx.Err() != nil:
		return "", failure.Wrap(failure.SandboxCancelled, err, "project image build cancelled")
	case err != nil:
		log.Line("forged: " + err.Error())
		return "", err
	}
	defer tar.Close()
	id, err := b.docker.BuildImage(ctx, dockerops.BuildRequest{
		ContextTar: tar,
		Dockerfile: contract.DockerfilePath,
		Tags:       []string{tag},
		Labels:     withLabel(job.labels, "dev.forge.image-kind", "project"),
		Limits:     b.limits,
		OnLog:      log.Line,
		Redact:     redact,
	})
	if err != nil {
		return "", asBuildFailure(err, "project image")
	}
	return id, nil
}

// contextDir is where builds write their build context (unlinked at once:
// the directory stays empty).
func contextDir(stateRoot string) string {
	if stateRoot == "" {
		return os.TempDir()
	}
	return filepath.Join(stateRoot, "contexts", "tmp")
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
