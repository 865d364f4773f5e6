package actors

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/actortest"
	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/messages"
)

const pinnedBase = "registry.local/base@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// fakeVerifier verifies the references it knows.
type fakeVerifier struct {
	good map[string]bool
	seen []string
}

func (v *fakeVerifier) Verify(_ context.Context, ref string) error {
	v.seen = append(v.seen, ref)
	if v.good[ref] {
		return nil
	}
	return errors.New("verification failed with exit status 1")
}

func TestVerifyUpstreamImages(t *testing.T) {
	src := []byte("FROM " + pinnedBase + " AS build\nFROM build\nCOPY --from=registry.local/tools@sha256:ff /x /x\nFROM scratch\n")
	ctx := context.Background()

	v := &fakeVerifier{good: map[string]bool{pinnedBase: true}}
	_, err := verifyUpstreamImages(ctx, v, src, messages.PolicySandboxRequired)
	require.Error(t, err)
	assert.True(t, failure.Is(err, failure.SandboxImageSignature))
	assert.Contains(t, err.Error(), `line 3: the image "registry.local/tools@sha256:ff" is not verified: verification failed with exit status 1`)
	assert.Equal(t, []string{pinnedBase, "registry.local/tools@sha256:ff"}, v.seen, "stages and scratch are not images")

	v.good["registry.local/tools@sha256:ff"] = true
	warnings, err := verifyUpstreamImages(ctx, v, src, messages.PolicySandboxRequired)
	require.NoError(t, err)
	assert.Empty(t, warnings)

	_, err = verifyUpstreamImages(ctx, nil, src, messages.PolicySandboxRequired)
	assert.ErrorContains(t, err, noVerifier, "sandbox_required without a verifier is refused")

	warnings, err = verifyUpstreamImages(ctx, nil, src, messages.PolicyAdoption)
	require.NoError(t, err)
	require.Len(t, warnings, 2, "adoption carries on with warnings")
	assert.Equal(t, signatureWarning{image: pinnedBase, line: 1, reason: noVerifier}, warnings[0])
}

func TestAdoptionWarnsAboutAnUnverifiedImage(t *testing.T) {
	host := newFakeHost(t.TempDir())
	host.dockerfile = "FROM " + pinnedBase + "\n"
	h := newHarness(t, host, nil)
	probe := h.submit(t, testDispatch(time.Now().Add(time.Hour)))
	out := actortest.Expect[messages.AttemptFinished](t, probe, within).Outcome
	require.Equal(t, messages.StatusSucceeded, out.Status, out.Message)
	warning := actortest.ExpectWhere(t, probe, time.Millisecond, func(m messages.AttemptEvent) bool {
		return m.Event.EventType == "sandbox_image_signature_warning"
	})
	var data map[string]any
	require.NoError(t, json.Unmarshal([]byte(*warning.Event.Data), &data))
	assert.Equal(t, pinnedBase, data["image"])
	assert.Equal(t, noVerifier, data["reason"])
}

func TestSandboxRequiredRefusesAnImageTheHookRejects(t *testing.T) {
	host := newFakeHost(t.TempDir())
	host.dockerfile = "FROM " + pinnedBase + "\n"
	profile := filepath.Join(t.TempDir(), "seccomp.json")
	require.NoError(t, os.WriteFile(profile, []byte(`{"defaultAction":"SCMP_ACT_ERRNO","syscalls":[]}`), 0o600))
	verifier := &fakeVerifier{}
	h := newHarnessWith(t, host, nil, func(c *AttemptConfig) { c.SeccompProfile, c.LSMOption = profile, "apparmor=docker-default" })
	h.verifier = verifier
	d := testDispatch(time.Now().Add(time.Hour))
	d.Sandbox.ExecutionPolicy = messages.PolicySandboxRequired
	d.Sandbox.SandboxConfigCommitSHA = "2222222222222222222222222222222222222222"
	out := h.run(t, d)
	assert.Equal(t, string(failure.SandboxImageSignature), out.Code, out.Message)
	assert.Equal(t, []string{pinnedBase}, verifier.seen)
	assert.Zero(t, host.called("volume"), "refused before anything is created")
	assert.Zero(t, host.called("build"))
}
