package actors

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/messages"
)

func providerDispatch(provider string) *messages.Dispatch {
	d := testDispatch(time.Now().Add(time.Hour))
	d.Execution.Provider, d.Execution.AuthKind = provider, "api_key"
	return d
}

func TestProviderCredentialsFillTheSecretsVolume(t *testing.T) {
	host := newFakeHost(t.TempDir())
	auth := &fakeAuth{}
	h := newHarness(t, host, nil)
	h.auth = auth
	d := providerDispatch("anthropic")
	out := h.run(t, d)
	require.Equal(t, messages.StatusSucceeded, out.Status, out.Message)
	require.Len(t, auth.reqs, 1)
	assert.Equal(t, "anthropic", auth.reqs[0].Provider)
	assert.Equal(t, "api_key", auth.reqs[0].AuthKind)
	assert.Equal(t, d.AttemptID(), auth.reqs[0].DispatchAttemptID)
	assert.Contains(t, auth.dirs[0], h.state, "the helper writes under the attempt's private work directory")
	require.Len(t, host.loaded, 1)
	l := host.loaded[0]
	assert.Equal(t, "sha256:cached", l.image)
	assert.Contains(t, l.volume, "-secrets")
	assert.Equal(t, messages.WorkerUID, l.uid)
	assert.Equal(t, "api-key", l.files[0].Name)
	assert.Greater(t, host.index("loadvolume"), host.index("volume"), "loaded once the volumes exist")
	assert.Less(t, host.index("loadvolume"), host.index("create"), "and before the worker exists")
}

func TestProviderWithoutAdapterIsRefusedBeforeAnythingExists(t *testing.T) {
	for name, auth := range map[string]ProviderAuth{"no adapters": nil, "another provider": &fakeAuth{}} {
		t.Run(name, func(t *testing.T) {
			host := newFakeHost(t.TempDir())
			h := newHarness(t, host, nil)
			h.auth = auth
			out := h.run(t, providerDispatch("openai"))
			assert.Equal(t, string(failure.SandboxAuthUnavailable), out.Code)
			assert.Zero(t, host.called("prepare"))
			assert.Zero(t, host.called("volume"))
		})
	}
}

func TestHelperFailureIsAuthUnavailableAndTearsDown(t *testing.T) {
	host := newFakeHost(t.TempDir())
	h := newHarness(t, host, nil)
	h.auth = &fakeAuth{err: failure.WrapWithheld(failure.SandboxAuthUnavailable, errors.New("boom"), "provider auth helper failed: exit status 1")}
	out := h.run(t, providerDispatch("anthropic"))
	assert.Equal(t, string(failure.SandboxAuthUnavailable), out.Code)
	assert.Zero(t, host.called("loadvolume"))
	assert.Zero(t, host.called("create"))
	assert.Equal(t, 1, host.teardowns)
}
