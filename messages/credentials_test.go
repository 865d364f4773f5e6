package messages

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/failure"
)

func TestValidateCredentialMountPath(t *testing.T) {
	for _, p := range []string{"/home/forge/.codex", "/home/forge/.config/claude", "/run/forge-credentials", "/run/forge-credentials/codex"} {
		assert.NoError(t, ValidateCredentialMountPath(p), p)
	}
	for _, p := range []string{
		"", "home/forge/.codex", "/home/forge/../etc", "/home/forge/./x", "/home/forge/x/", "/home/forge//x",
		"/home/forge", "/home", "/home/forgery/x", "/run/forge-credentialsx", "/run/forge-secrets", "/run/forge-secrets/x",
		"/workspace", "/workspace/.codex", "/control/output", "/etc/passwd", "/usr/bin", "/", "/tmp/x", "/proc/self",
		"/home/forge/a b", "/home/forge/\x00", "/home/forge/" + strings.Repeat("a", 256),
	} {
		err := ValidateCredentialMountPath(p)
		require.Error(t, err, "%q", p)
		assert.Equal(t, failure.DispatchInvalid, failure.CodeOf(err), "%q", p)
		assert.Contains(t, err.Error(), "execution.credentialMount.path", "%q", p)
	}
}

func TestDecodeDispatchCredentialMount(t *testing.T) {
	withProvider := func(mount map[string]any) func(m map[string]any) {
		return func(m map[string]any) {
			e := sub(m, "execution")
			e["provider"], e["authKind"] = "openai", "chatgpt"
			e["credentialMount"] = mount
		}
	}
	d, err := DecodeDispatch(strings.NewReader(mutate(t, withProvider(map[string]any{"path": "/home/forge/.codex", "writable": true}))))
	require.NoError(t, err)
	require.NotNil(t, d.Execution.CredentialMount)
	assert.Equal(t, CredentialMount{Path: "/home/forge/.codex", Writable: true}, *d.Execution.CredentialMount)

	for name, doc := range map[string]string{
		"over the workspace": mutate(t, withProvider(map[string]any{"path": "/workspace/.codex", "writable": true})),
		"over control":       mutate(t, withProvider(map[string]any{"path": "/control"})),
		"system directory":   mutate(t, withProvider(map[string]any{"path": "/etc"})),
		"no path":            mutate(t, withProvider(map[string]any{"writable": true})),
		"without a provider": mutate(t, func(m map[string]any) {
			sub(m, "execution")["credentialMount"] = map[string]any{"path": "/home/forge/.codex"}
		}),
	} {
		_, err := DecodeDispatch(strings.NewReader(doc))
		require.Error(t, err, name)
		assert.Equal(t, failure.DispatchInvalid, failure.CodeOf(err), name)
		assert.Contains(t, err.Error(), "credentialMount", name)
	}
}
