package runner_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/dockerops"
	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/daemon/runner"
	"github.com/forgedev/forged/internal/example"
	"github.com/forgedev/forged/internal/images/imagepolicy"
	"github.com/forgedev/forged/internal/testkit/enginetest"
	"github.com/forgedev/forged/messages"
)

// flaggedModule is a Go module of the forged-worker baked into every agent
// image: syft finds it in the binary's build info.
const flaggedModule = "github.com/go-git/go-git/v5"

// syftPath is the syft CLI scripts/ensure-syft.sh built (FORGED_SYFT, or
// bin/syft at the repository's root). Without it the test skips, and
// fails under CI.
func syftPath(t *testing.T) string {
	t.Helper()
	path := os.Getenv("FORGED_SYFT")
	if path == "" {
		path, _ = filepath.Abs("../../../bin/syft")
	}
	if resolved, err := filepath.EvalSymlinks(path); err == nil {
		if info, err := os.Stat(resolved); err == nil && info.Mode().IsRegular() && info.Mode()&0o111 != 0 {
			return resolved
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("no syft CLI at %s: run scripts/ensure-syft.sh", path)
	}
	t.Skipf("no syft CLI at %s: run scripts/ensure-syft.sh", path)
	return ""
}

// policyFixture is an operator's image policy: syft, the test tree's scan
// script (flagging what its conf names) and an ed25519 key from openssl.
type policyFixture struct {
	dir, conf, key, pub string
}

func newPolicyFixture(t *testing.T) policyFixture {
	t.Helper()
	dir := t.TempDir()
	script, err := os.ReadFile("testdata/flag-package.sh")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "flag-package.sh"), script, 0o755))
	f := policyFixture{dir: dir, conf: filepath.Join(dir, "flag-package.conf"), key: filepath.Join(dir, "key.pem"), pub: filepath.Join(dir, "pub.pem")}
	for _, args := range [][]string{
		{"genpkey", "-algorithm", "ed25519", "-out", f.key},
		{"pkey", "-in", f.key, "-pubout", "-out", f.pub},
	} {
		out, err := exec.Command("openssl", args...).CombinedOutput()
		require.NoError(t, err, "openssl %v: %s", args, out)
	}
	require.NoError(t, os.Chmod(f.key, 0o600))
	return f
}

func (f policyFixture) flag(t *testing.T, pkg, id, severity string) {
	t.Helper()
	require.NoError(t, os.WriteFile(f.conf, fmt.Appendf(nil, "FLAG_PACKAGE='%s'\nFLAG_ID='%s'\nFLAG_SEVERITY='%s'\n", pkg, id, severity), 0o644))
}

func (f policyFixture) policy(t *testing.T, syft string) *imagepolicy.Policy {
	t.Helper()
	thresholds, err := imagepolicy.NewThresholds("high", "low", []string{"FORGED-ALLOWED-1"})
	require.NoError(t, err)
	signer, err := imagepolicy.LoadSigner(f.key)
	require.NoError(t, err)
	p, err := imagepolicy.New(imagepolicy.Config{Enforced: true, SBOMCommand: syft, ScanCommand: filepath.Join(f.dir, "flag-package.sh"),
		Thresholds: thresholds, Signer: signer})
	require.NoError(t, err)
	require.True(t, p.Complete())
	return p
}

// verifyWithOpenSSL checks a DSSE envelope with nothing of forged's: jq
// takes it apart, the shell builds DSSE's PAE, and openssl verifies the
// ed25519 signature over it with the public key. It is the command
// docs/image-policy.md shows.
func verifyWithOpenSSL(t *testing.T, envelope, pub string) error {
	t.Helper()
	work := t.TempDir()
	script := `set -eu
env="$1"; pub="$2"; cd "$3"
type=$(jq -r .payloadType "$env")
jq -r .payload "$env" | base64 -d > payload.json
jq -r '.signatures[0].sig' "$env" | base64 -d > sig.bin
{ printf 'DSSEv1 %d %s %d ' "${#type}" "$type" "$(wc -c < payload.json)"; cat payload.json; } > pae.bin
openssl pkeyutl -verify -pubin -inkey "$pub" -rawin -in pae.bin -sigfile sig.bin`
	out, err := exec.Command("bash", "-c", script, "verify", envelope, pub, work).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%w: %s", err, out)
	}
	if !strings.Contains(string(out), "Signature Verified Successfully") {
		return fmt.Errorf("openssl said %s", out)
	}
	return nil
}

func dataOf(t *testing.T, ev messages.Event) map[string]any {
	t.Helper()
	var data map[string]any
	require.NoError(t, json.Unmarshal([]byte(*ev.Data), &data))
	return data
}

// The image policy end to end on the real engine: a built image's SBOM
// generated offline by syft from the image exported through the Engine
// API, the gate applied by a real command reading it, the provenance
// signed and verified by openssl (and a tampered copy refused), a cache hit
// that stands on a valid record, one refused without a record (rebuilt),
// and an image the gate fails.
func TestEndToEndImagePolicy(t *testing.T) {
	enginetest.Client(t)
	syft := syftPath(t)
	fx := newPolicyFixture(t)
	fx.flag(t, "no-such-package", "FORGED-TEST-0", "critical")
	policy := fx.policy(t, syft)
	e := newE2E(t, runner.Config{ImagePolicy: policy, Version: "test-1.2.3"})
	assert.True(t, e.runner.Preflight(t.Context()).Features.ImagePolicy, "the preflight report's feature imagePolicy")
	repo := filepath.Join(t.TempDir(), "repo-policy")
	require.NoError(t, example.CreateRepo(t.Context(), repo, example.RepoOptions{
		Dockerfile: "FROM " + example.BaseImage + "\nLABEL policy=" + example.NewUUID() + "\n",
	}))
	e.repo = repo

	// 1. A build: SBOM, a clean scan, signed provenance, the record.
	first := e.submit(e.dispatch([]string{"/bin/sh", "-c", "true"}, 0))
	out := e.wait(first)
	require.Equal(t, messages.StatusSucceeded, out.Status, "%+v %v", out, eventSummary(first))
	passed := dataOf(t, waitForEvent(t, first, "sandbox_image_policy_passed"))
	assert.Equal(t, policy.Digest(), passed["policyDigest"])
	assert.Equal(t, "pass", passed["verdict"])
	meta := dataOf(t, waitForEvent(t, first, "sandbox_metadata"))
	key := dataOf(t, waitForEvent(t, first, "sandbox_image_cache_miss"))["cacheKey"].(string)
	imageID := meta["imageDigest"].(string)
	sbomPath, envelope := meta["sbomPath"].(string), meta["provenancePath"].(string)
	assert.Equal(t, filepath.Join(e.stateRoot, "build-logs", key), filepath.Dir(sbomPath), "the SBOM is stored beside the build log")
	assert.Equal(t, policy.Digest(), meta["imagePolicyDigest"])

	sbom, err := os.ReadFile(sbomPath)
	require.NoError(t, err)
	assert.Equal(t, meta["sbomDigest"], imagepolicy.DigestBytes(sbom))
	var doc struct {
		BOMFormat  string `json:"bomFormat"`
		Components []struct {
			Name string `json:"name"`
		} `json:"components"`
	}
	require.NoError(t, json.Unmarshal(sbom, &doc))
	assert.Equal(t, "CycloneDX", doc.BOMFormat)
	var names []string
	for _, c := range doc.Components {
		names = append(names, c.Name)
	}
	assert.Contains(t, names, flaggedModule, "the worker's Go build info is in the SBOM")

	// The provenance verifies with openssl alone, and names the image and
	// its inputs; a tampered statement does not verify.
	require.NoError(t, verifyWithOpenSSL(t, envelope, fx.pub))
	raw, err := os.ReadFile(envelope)
	require.NoError(t, err)
	var env struct {
		PayloadType string `json:"payloadType"`
		Payload     string `json:"payload"`
		Signatures  []struct {
			KeyID string `json:"keyid"`
			Sig   string `json:"sig"`
		} `json:"signatures"`
	}
	require.NoError(t, json.Unmarshal(raw, &env))
	payload, err := base64.StdEncoding.DecodeString(env.Payload)
	require.NoError(t, err)
	var st imagepolicy.Statement
	require.NoError(t, json.Unmarshal(payload, &st))
	assert.Equal(t, "https://in-toto.io/Statement/v1", st.Type)
	assert.Equal(t, "https://slsa.dev/provenance/v1", st.PredicateType)
	assert.Equal(t, "sha256:"+st.Subject[0].Digest["sha256"], imageID)
	deps := map[string]imagepolicy.Digest{}
	for _, d := range st.Predicate.BuildDefinition.ResolvedDependencies {
		deps[d.Name] = d.Digest
	}
	assert.Equal(t, meta["sandboxConfigCommitSha"], deps["sandbox-config-commit"]["gitCommit"])
	assert.Equal(t, meta["contractDigest"], "sha256:"+deps["sandbox-contract"]["sha256"])
	for _, name := range []string{"build-context", ".forge/Dockerfile", "forged-worker", "project-image", example.BaseImage} {
		assert.Len(t, deps[name]["sha256"], 64, "the provenance lists %s", name)
	}
	assert.Equal(t, "test-1.2.3", st.Predicate.RunDetails.Builder.Version["forged"])
	assert.Equal(t, "none", st.Predicate.BuildDefinition.InternalParameters["limits"].(map[string]any)["network"])
	tampered := bytes.Replace(payload, []byte(st.Subject[0].Digest["sha256"]), []byte(strings.Repeat("0", 64)), 1)
	require.NotEqual(t, payload, tampered)
	env.Payload = base64.StdEncoding.EncodeToString(tampered)
	forged, err := json.Marshal(env)
	require.NoError(t, err)
	tamperedPath := filepath.Join(t.TempDir(), "tampered.dsse.json")
	require.NoError(t, os.WriteFile(tamperedPath, forged, 0o600))
	assert.Error(t, verifyWithOpenSSL(t, tamperedPath, fx.pub), "a tampered statement must not verify")

	// 2. The same key again: a cache hit, on the valid record.
	second := e.submit(e.dispatch([]string{"/bin/sh", "-c", "true"}, 0))
	out = e.wait(second)
	require.Equal(t, messages.StatusSucceeded, out.Status, "%+v %v", out, eventSummary(second))
	hit := dataOf(t, waitForEvent(t, second, "sandbox_image_cache_hit"))
	assert.Equal(t, imageID, hit["imageDigest"])
	assert.Equal(t, meta["sbomDigest"], dataOf(t, waitForEvent(t, second, "sandbox_metadata"))["sbomDigest"])

	// 3. Without its record the cached image is no hit: the attempt
	// rebuilds (removing the stale tags first), and the scan, now flagging
	// a low finding, warns.
	require.NoError(t, os.Remove(imagepolicy.RecordPath(e.stateRoot, key)))
	fx.flag(t, flaggedModule, "FORGED-TEST-LOW", "low")
	third := e.submit(e.dispatch([]string{"/bin/sh", "-c", "true"}, 0))
	out = e.wait(third)
	require.Equal(t, messages.StatusSucceeded, out.Status, "%+v %v", out, eventSummary(third))
	miss := dataOf(t, waitForEvent(t, third, "sandbox_image_cache_miss"))
	assert.Contains(t, miss["policyRecord"], "no image policy record")
	warning := dataOf(t, waitForEvent(t, third, "sandbox_image_policy_warning"))
	assert.Equal(t, policy.Digest(), warning["policyDigest"])
	assert.Equal(t, "warn", warning["verdict"])
	waitForEvent(t, third, "sandbox_build_completed")
	rec, err := imagepolicy.LoadRecord(e.stateRoot, key)
	require.NoError(t, err)
	assert.Equal(t, imagepolicy.VerdictWarn, rec.Verdict)

	// 4. A finding at the fail severity (and one allowlisted) in another
	// image: the attempt fails with sandbox_image_vulnerable, and the image
	// keeps no agent tag to be taken as a cache hit.
	fx.flag(t, flaggedModule, "FORGED-TEST-CRIT", "critical")
	repo2 := filepath.Join(t.TempDir(), "repo-policy-fail")
	require.NoError(t, example.CreateRepo(t.Context(), repo2, example.RepoOptions{
		Dockerfile: "FROM " + example.BaseImage + "\nLABEL policy=" + example.NewUUID() + "\n",
	}))
	e.repo = repo2
	fourth := e.submit(e.dispatch([]string{"/bin/sh", "-c", "true"}, 0))
	out = e.wait(fourth)
	require.Equal(t, messages.StatusFailed, out.Status, "%+v", out)
	assert.Equal(t, string(failure.SandboxImageVulnerable), out.Code, "%+v", out)
	assert.Contains(t, out.Message, "FORGED-TEST-CRIT")
	key2 := dataOf(t, waitForEvent(t, fourth, "sandbox_image_cache_miss"))["cacheKey"].(string)
	_, agentTag := dockerops.SandboxImageTags(key2)
	_, err = e.engine.ImageInspect(t.Context(), agentTag)
	assert.Error(t, err, "the refused image's agent tag is removed")
}
