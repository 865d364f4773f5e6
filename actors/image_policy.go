package actors

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/forgedev/forged/dockerops"
	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/images/buildlog"
	"github.com/forgedev/forged/internal/images/dockerfile"
	"github.com/forgedev/forged/internal/images/imagepolicy"
	"github.com/forgedev/forged/messages"
)

// policyHit applies the image policy to a cache hit on image id of key.
// Under an enforced policy the hit needs a valid record: stale names why
// there is none (the hit is refused, and the build that follows removes
// the image's tags first). Without enforcement the record, when there is
// one for this image, only names the attestations.
func (b *imageBuilder) policyHit(ctx context.Context, key, id string) (att *messages.ImageAttestations, stale string) {
	p := b.policy
	if p == nil {
		return nil, ""
	}
	if p.Enforced() {
		rec, err := p.Valid(ctx, b.stateRoot, key, id)
		if err != nil {
			return nil, err.Error()
		}
		return attestations(rec), ""
	}
	rec, err := imagepolicy.LoadRecord(b.stateRoot, key)
	if err != nil || rec.ImageID != id || rec.PolicyDigest != p.Digest() {
		return nil, ""
	}
	return attestations(rec), ""
}

// removeStale removes the tags of key's images and its record, before a
// rebuild under an enforced policy replaces an image without a valid
// record. An image a running attempt still uses keeps its tag (the
// engine refuses); the build moves the tag anyway.
func (b *imageBuilder) removeStale(ctx context.Context, key string) {
	if b.archiver == nil {
		return
	}
	project, agent := dockerops.SandboxImageTags(key)
	for _, tag := range []string{agent, project} {
		_ = b.archiver.RemoveImage(ctx, tag)
	}
	_ = imagepolicy.RemoveRecord(b.stateRoot, key)
}

// attest applies the image policy to a freshly built image: SBOM from the
// exported image, the vulnerability gate, signed provenance, and the
// record. An image the policy refuses (or could not evaluate) loses its
// agent tag, so that no later attempt takes it as a cache hit.
func (b *imageBuilder) attest(ctx context.Context, job sandboxImageJob, built builtImage, started time.Time) (*imagepolicy.Record, error) {
	p := b.policy
	if p == nil {
		return nil, nil
	}
	_, agentTag := dockerops.SandboxImageTags(job.key)
	subject := imagepolicy.Subject{
		Key: job.key, AttemptID: job.attemptID, ImageID: built.id,
		Dir: buildlog.Dir(b.stateRoot, job.key), Name: logName(job.attemptID),
		Export: func(ctx context.Context, dst string) error {
			if b.archiver == nil {
				return errors.New("the engine client cannot export images")
			}
			return b.archiver.SaveImage(ctx, built.id, dst)
		},
		Provenance: b.provenanceInputs(ctx, job, built, agentTag, started),
		Required:   job.policy == messages.PolicySandboxRequired,
	}
	rec, err := p.Evaluate(ctx, b.stateRoot, subject)
	if err != nil {
		if b.archiver != nil {
			cleanup, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			_ = b.archiver.RemoveImage(cleanup, agentTag)
			cancel()
		}
		if failure.CodeOf(err) == "" {
			err = failure.Wrap(failure.SandboxImagePolicy, err, "image policy")
		}
		return nil, err
	}
	return &rec, nil
}

// provenanceInputs gathers what the provenance lists: the config commit,
// the context, contract and Dockerfile digests, the upstream images' local
// ids, the worker's digest, forged's version and the build limits.
func (b *imageBuilder) provenanceInputs(ctx context.Context, job sandboxImageJob, built builtImage, ref string, started time.Time) imagepolicy.Inputs {
	sum := sha256.Sum256(job.dockerfile)
	in := imagepolicy.Inputs{
		ImageRef: ref, Key: job.key, AttemptID: job.attemptID, Project: job.project,
		ExecutionPolicy: job.policy, ConfigCommit: job.configCommit, ContextDigest: job.contextDigest,
		ContractDigest: job.contractDigest, DockerfileDigest: "sha256:" + hex.EncodeToString(sum[:]),
		WorkerDigest: b.workerDigest, BuilderVersion: b.builderVersion, ProjectImageID: built.projectID,
		BaseImages: map[string]string{}, Started: started, Finished: time.Now(),
		Byproducts: []imagepolicy.ResourceDescriptor{{Name: "build.log", Digest: imagepolicy.Digest{"sha256": strings.TrimPrefix(built.log.Digest, "sha256:")}}},
	}
	limits := b.limits
	in.Limits = map[string]any{
		"network": orDefault(limits.Network, dockerops.DefaultBuildNetwork), "memoryBytes": orDefaultInt(limits.MemoryBytes, dockerops.DefaultBuildMemory),
		"cpuMillis": orDefaultInt(limits.CPUMillis, dockerops.DefaultBuildCPUMillis), "nofile": orDefaultInt(limits.NoFile, dockerops.DefaultBuildNoFile),
		"allowPulls": b.allowPulls,
	}
	if file, err := dockerfile.Parse(job.dockerfile); err == nil {
		for _, img := range file.UpstreamImages() {
			if id, found, err := b.docker.ImageID(ctx, img.Ref); err == nil && found {
				in.BaseImages[img.Ref] = id
			}
		}
	}
	return in
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

func orDefaultInt(v, def int64) int64 {
	if v <= 0 {
		return def
	}
	return v
}

// attestations is what the attempt's metadata names of a record.
func attestations(r imagepolicy.Record) *messages.ImageAttestations {
	return &messages.ImageAttestations{
		PolicyDigest: r.PolicyDigest, Status: r.Status, Verdict: string(r.Verdict),
		SBOMPath: r.SBOMPath, SBOMDigest: r.SBOMDigest, ProvenancePath: r.ProvenancePath, ProvenanceDigest: r.ProvenanceDigest,
	}
}

// policyEventData is the data of sandbox_image_policy_passed and _warning:
// the seed's policyDigest, and what forged knows beside it.
func policyEventData(r *imagepolicy.Record) (eventType, content string, data map[string]any) {
	data = map[string]any{
		"policyDigest": r.PolicyDigest, "imageDigest": r.ImageID, "cacheKey": r.Key,
		"sbomDigest": r.SBOMDigest, "provenanceDigest": r.ProvenanceDigest,
	}
	if r.Verdict != "" {
		data["verdict"] = string(r.Verdict)
	}
	if r.Evaluation != nil {
		data["findings"] = r.Evaluation.Counts
		data["allowlisted"] = r.Evaluation.Allowed
	}
	if len(r.Missing) > 0 {
		data["missing"] = r.Missing
	}
	if r.Status == imagepolicy.StatusPassed {
		return "sandbox_image_policy_passed", fmt.Sprintf("Image policy passed for %s.", r.ImageID), data
	}
	why := "its scan warned"
	if len(r.Missing) > 0 {
		why = "its attestations are incomplete (no " + strings.Join(r.Missing, ", ") + ")"
	}
	return "sandbox_image_policy_warning", fmt.Sprintf("Image policy warning for %s: %s.", r.ImageID, why), data
}
