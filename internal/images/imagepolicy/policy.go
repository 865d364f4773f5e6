package imagepolicy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/images/buildlog"
	"github.com/forgedev/forged/internal/kit/atomicfile"
	"github.com/forgedev/forged/internal/kit/procgroup"
)

// Config is the operator's image policy.
type Config struct {
	// Enforced: a cache hit needs a valid record (under every execution
	// policy), and a sandbox_required attempt needs the whole policy
	// (SBOM, scan and provenance).
	Enforced bool
	// SBOMCommand is a syft-compatible SBOM generator's absolute path.
	SBOMCommand string
	// ScanCommand is the vulnerability scan command's absolute path.
	ScanCommand string
	Thresholds  Thresholds
	// Signer signs provenance; nil signs none.
	Signer  *Signer
	Timeout time.Duration
}

// Policy is a checked Config with its digest. A nil *Policy is no image
// policy: nothing is evaluated and every cache hit stands.
type Policy struct {
	cfg    Config
	digest string
}

// New checks cfg. It returns nil (no policy) when nothing is configured
// and the policy is not enforced.
func New(cfg Config) (*Policy, error) {
	if !cfg.Enforced && cfg.SBOMCommand == "" && cfg.ScanCommand == "" && cfg.Signer == nil {
		return nil, nil
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	desc := map[string]any{
		"schema": 1, "enforced": cfg.Enforced,
		"failSeverity": cfg.Thresholds.Fail.String(), "warnSeverity": cfg.Thresholds.Warn.String(),
		"allowlist": cfg.Thresholds.Allowlist,
	}
	for _, c := range []struct{ flag, key, path string }{
		{"--image-sbom-command", "sbomCommand", cfg.SBOMCommand},
		{"--image-scan-command", "scanCommand", cfg.ScanCommand},
	} {
		if c.path == "" {
			continue
		}
		if err := procgroup.CheckExecutable(c.flag, c.path); err != nil {
			return nil, err
		}
		digest, err := fileDigest(c.path)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c.flag, err)
		}
		desc[c.key] = map[string]string{"path": c.path, "digest": digest}
	}
	if cfg.ScanCommand != "" && cfg.SBOMCommand == "" {
		return nil, errors.New("--image-scan-command needs --image-sbom-command: the scan reads the SBOM")
	}
	if cfg.Signer != nil {
		desc["provenanceKeyId"] = cfg.Signer.keyID
	}
	data, _ := json.Marshal(desc) // map keys are sorted: a stable encoding
	return &Policy{cfg: cfg, digest: DigestBytes(data)}, nil
}

// Digest is the policy's own digest: its settings, the commands' content
// digests (taken when the daemon started) and the signing key's id.
func (p *Policy) Digest() string {
	if p == nil {
		return ""
	}
	return p.digest
}

// Enforced reports whether cache hits need a record.
func (p *Policy) Enforced() bool { return p != nil && p.cfg.Enforced }

// Missing names the parts the policy lacks: "sbom", "scan", "provenance".
func (p *Policy) Missing() []string {
	var missing []string
	if p == nil || p.cfg.SBOMCommand == "" {
		missing = append(missing, "sbom")
	}
	if p == nil || p.cfg.ScanCommand == "" {
		missing = append(missing, "scan")
	}
	if p == nil || p.cfg.Signer == nil {
		missing = append(missing, "provenance")
	}
	return missing
}

// Complete reports an enforced policy with every part: the preflight
// feature imagePolicy (the caller adds the build's egress).
func (p *Policy) Complete() bool { return p.Enforced() && len(p.Missing()) == 0 }

// CheckRequired refuses, before anything is built, a sandbox_required
// attempt under an enforced policy that lacks a part.
func (p *Policy) CheckRequired(required bool) error {
	if !required || !p.Enforced() {
		return nil
	}
	if missing := p.Missing(); len(missing) > 0 {
		return failure.New(failure.SandboxImagePolicy, "the enforced image policy lacks %s (--image-sbom-command, --image-scan-command, --image-provenance-key), which sandbox_required demands; configure them or run the attempt under adoption", strings.Join(missing, ", "))
	}
	return nil
}

// Subject is the image being evaluated and where its attestations go.
type Subject struct {
	Key, AttemptID, ImageID string
	// Dir is where the SBOM and the provenance are stored (the build log's
	// directory); Name is their file name's stem (the build log's).
	Dir, Name string
	// Export writes the image as a docker-archive tar (docker save) to
	// dst.
	Export func(ctx context.Context, dst string) error
	// Provenance are the build's inputs; Evaluate adds the byproducts.
	Provenance Inputs
	// Required is a sandbox_required attempt.
	Required bool
}

// Evaluate applies the policy to a built image and saves its record under
// stateRoot. A failing scan is failure.SandboxImageVulnerable (the record
// is saved, with its verdict, and is never valid); anything else that goes
// wrong is failure.SandboxImagePolicy.
func (p *Policy) Evaluate(ctx context.Context, stateRoot string, s Subject) (Record, error) {
	if p == nil {
		return Record{}, errors.New("no image policy")
	}
	if err := p.CheckRequired(s.Required); err != nil {
		return Record{}, err
	}
	r := Record{Key: s.Key, ImageID: s.ImageID, PolicyDigest: p.digest, AttemptID: s.AttemptID, Missing: p.Missing()}
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return Record{}, policyError(err, "image policy: create %s", s.Dir)
	}
	if p.cfg.SBOMCommand != "" {
		path, digest, err := p.sbom(ctx, s)
		if err != nil {
			return Record{}, err
		}
		r.SBOMPath, r.SBOMDigest = path, digest
		s.Provenance.Byproducts = append(s.Provenance.Byproducts, ResourceDescriptor{
			Name: "sbom.cdx.json", Digest: Digest{"sha256": strings.TrimPrefix(digest, "sha256:")},
			Annotations: map[string]any{"mediaType": "application/vnd.cyclonedx+json"},
		})
	}
	var vulnerable error
	if p.cfg.ScanCommand != "" {
		findings, err := Scan(ctx, p.cfg.ScanCommand, p.cfg.Timeout, r.SBOMPath)
		if err != nil {
			return Record{}, policyError(err, "image policy")
		}
		ev := p.cfg.Thresholds.Evaluate(findings)
		r.Verdict, r.Evaluation = ev.Verdict, &ev
		if ev.Verdict == VerdictFail {
			vulnerable = failure.New(failure.SandboxImageVulnerable, "the image %s has findings at or above %s that are not allowlisted: %s",
				s.ImageID, p.cfg.Thresholds.Fail, ev.Summary())
		}
	}
	if p.cfg.Signer != nil {
		s.Provenance.ImageID = s.ImageID
		envelope, err := p.cfg.Signer.SignStatement(ctx, NewStatement(s.Provenance))
		if err != nil {
			return Record{}, policyError(err, "image policy: sign the provenance")
		}
		path := filepath.Join(s.Dir, s.Name+".provenance.dsse.json")
		if err := writeFile(path, envelope); err != nil {
			return Record{}, policyError(err, "image policy: store the provenance")
		}
		r.ProvenancePath, r.ProvenanceDigest = path, DigestBytes(envelope)
	}
	r.Status = StatusPassed
	if len(r.Missing) > 0 || r.Verdict == VerdictWarn || r.Verdict == VerdictFail {
		r.Status = StatusWarning
	}
	if err := SaveRecord(stateRoot, r); err != nil {
		return Record{}, policyError(err, "image policy: store the record")
	}
	return r, vulnerable
}

// sbom exports the image into a private temporary directory beside the
// stored attestations, runs the SBOM command on it and checks what it
// wrote is a CycloneDX JSON document.
func (p *Policy) sbom(ctx context.Context, s Subject) (path, digest string, err error) {
	tmp, err := os.MkdirTemp(s.Dir, ".tmp-export-")
	if err != nil {
		return "", "", policyError(err, "image policy: export directory")
	}
	defer os.RemoveAll(tmp)
	archive := filepath.Join(tmp, "image.tar")
	if err := s.Export(ctx, archive); err != nil {
		return "", "", policyError(err, "image policy: export the image %s", s.ImageID)
	}
	out := filepath.Join(tmp, "sbom.cdx.json")
	if err := GenerateSBOM(ctx, p.cfg.SBOMCommand, p.cfg.Timeout, archive, out); err != nil {
		return "", "", policyError(err, "image policy")
	}
	data, err := readRegular(out, MaxSBOMBytes)
	if err != nil {
		return "", "", policyError(err, "image policy: the SBOM command's output")
	}
	var head struct {
		BOMFormat string `json:"bomFormat"`
	}
	if err := json.Unmarshal(data, &head); err != nil || head.BOMFormat != "CycloneDX" {
		return "", "", failure.New(failure.SandboxImagePolicy, "image policy: the SBOM command %s did not write a CycloneDX JSON document", p.cfg.SBOMCommand)
	}
	path = filepath.Join(s.Dir, s.Name+".sbom.cdx.json")
	if err := writeFile(path, data); err != nil {
		return "", "", policyError(err, "image policy: store the SBOM")
	}
	return path, DigestBytes(data), nil
}

// MaxSBOMBytes bounds a stored SBOM.
const MaxSBOMBytes = 64 << 20

// Valid reports whether key's record lets a cache hit on imageID stand:
// it was made under this very policy for this image, its scan did not
// fail, and its SBOM and signed provenance are on disk as recorded (the
// provenance's signature verifies and names the image). The error says
// why not.
func (p *Policy) Valid(ctx context.Context, stateRoot, key, imageID string) (Record, error) {
	r, err := LoadRecord(stateRoot, key)
	if err != nil {
		return Record{}, err
	}
	switch {
	case r.PolicyDigest != p.Digest():
		return Record{}, fmt.Errorf("the record was made under policy %s, not the current %s", r.PolicyDigest, p.Digest())
	case r.ImageID != imageID:
		return Record{}, fmt.Errorf("the record is about image %s, not %s", r.ImageID, imageID)
	case r.Verdict == VerdictFail:
		return Record{}, errors.New("the image's scan failed")
	}
	if p.cfg.SBOMCommand != "" {
		if err := checkStored(r.SBOMPath, r.SBOMDigest, buildlog.Dir(stateRoot, key)); err != nil {
			return Record{}, fmt.Errorf("SBOM: %w", err)
		}
	}
	if p.cfg.Signer != nil {
		if err := checkStored(r.ProvenancePath, r.ProvenanceDigest, buildlog.Dir(stateRoot, key)); err != nil {
			return Record{}, fmt.Errorf("provenance: %w", err)
		}
		data, err := readRegular(r.ProvenancePath, maxRecordBytes)
		if err != nil {
			return Record{}, fmt.Errorf("provenance: %w", err)
		}
		st, err := p.cfg.Signer.VerifyEnvelope(ctx, data)
		if err != nil {
			return Record{}, err
		}
		if len(st.Subject) != 1 || "sha256:"+st.Subject[0].Digest["sha256"] != imageID {
			return Record{}, fmt.Errorf("the provenance's subject is not image %s", imageID)
		}
	}
	return r, nil
}

// checkStored checks that path lies in dir (the build-log directory of
// the record's key) and holds content of digest.
func checkStored(path, digest, dir string) error {
	if path == "" || digest == "" {
		return errors.New("not recorded")
	}
	if filepath.Dir(path) != filepath.Clean(dir) {
		return fmt.Errorf("%s is not stored in %s", path, dir)
	}
	got, err := fileDigest(path)
	if err != nil {
		return err
	}
	if got != digest {
		return fmt.Errorf("%s has digest %s, not the recorded %s", path, got, digest)
	}
	return nil
}

func writeFile(path string, data []byte) error {
	return atomicfile.Write(path, data, 0o600)
}

func policyError(err error, format string, args ...any) error {
	if failure.CodeOf(err) != "" {
		return err
	}
	return failure.Wrap(failure.SandboxImagePolicy, err, format, args...)
}
