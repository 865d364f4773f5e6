package actors

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/dockerops"
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

// The provider's credentials never reach a service: no service container
// mounts the attempt's secrets volume (where they are loaded), only its
// own password's volume, and none carries them in its environment or
// arguments. Each service's container config is checked as dockerops
// builds it.
func TestProviderCredentialsAreNeverMountedIntoServices(t *testing.T) {
	host := newFakeHost(t.TempDir())
	h := serviceHarness(t, host, nil)
	h.auth = &fakeAuth{}
	d := serviceDispatch()
	d.Execution.Provider, d.Execution.AuthKind = "anthropic", "api_key"
	out := h.run(t, d)
	require.Equal(t, messages.StatusSucceeded, out.Status, out.Message)
	require.Len(t, host.loaded, 1)
	credentials := host.loaded[0].volume
	host.mu.Lock()
	defer host.mu.Unlock()
	services := sidecarsOf[dockerops.ServiceSpec](host)
	require.Len(t, services, 2)
	for _, s := range services {
		spec, err := s.Sidecar()
		require.NoError(t, err)
		_, hostCfg, _ := dockerops.SidecarContainerConfig(spec)
		for _, m := range hostCfg.Mounts {
			assert.NotEqual(t, credentials, m.Source, "service %s mounts the volume holding the provider's credentials", spec.Name)
		}
		assert.NotEqual(t, credentials, spec.SecretsVolume)
		for _, v := range append(append([]string{}, spec.Env...), append(spec.Entrypoint, spec.Cmd...)...) {
			assert.NotContains(t, v, "sk-fake", "service %s carries the credential", spec.Name)
		}
	}
}

// A dispatch that chooses the credentials' mount gets them in the
// attempt's own credentials volume at that path: writable ones as 0600
// files in a volume the sandbox user owns, mounted read-write; the
// secrets volume keeps its read-only place.
func TestProviderCredentialsAtTheChosenMount(t *testing.T) {
	for _, writable := range []bool{false, true} {
		host := newFakeHost(t.TempDir())
		h := newHarness(t, host, nil)
		h.auth = &fakeAuth{}
		d := providerDispatch("anthropic")
		d.Execution.CredentialMount = &messages.CredentialMount{Path: "/home/forge/.codex", Writable: writable}
		out := h.run(t, d)
		require.Equal(t, messages.StatusSucceeded, out.Status, out.Message)
		names, err := dockerops.NamesFor(d.AttemptID())
		require.NoError(t, err)
		require.Len(t, host.loaded, 1)
		assert.Equal(t, names.CredentialsVolume, host.loaded[0].volume)
		assert.Equal(t, writable, host.loaded[0].files[0].Writable)
		spec := host.workerSpec()
		assert.Equal(t, &dockerops.CredentialsMount{Volume: names.CredentialsVolume, Target: "/home/forge/.codex", Writable: writable}, spec.Credentials)
		assert.Equal(t, names.SecretsVolume, spec.SecretsVolume)
		var owned []string
		for _, o := range host.owned {
			for _, v := range o.volumes {
				owned = append(owned, v.Volume)
			}
		}
		if writable {
			assert.Contains(t, owned, names.CredentialsVolume, "the sandbox user owns its writable credentials volume")
		} else {
			assert.NotContains(t, owned, names.CredentialsVolume)
		}
	}
}
