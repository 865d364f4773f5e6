package dockerctx

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func writeContext(t *testing.T, dir, name, host string, tls bool) {
	t.Helper()
	meta := filepath.Join(dir, "contexts", "meta", contextID(name))
	require.NoError(t, os.MkdirAll(meta, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(meta, "meta.json"),
		[]byte(`{"Name":"`+name+`","Metadata":{},"Endpoints":{"docker":{"Host":"`+host+`","SkipTLSVerify":false}}}`), 0o600))
	if tls {
		d := filepath.Join(dir, "contexts", "tls", contextID(name), "docker")
		require.NoError(t, os.MkdirAll(d, 0o700))
		require.NoError(t, os.WriteFile(filepath.Join(d, "ca.pem"), []byte("x"), 0o600))
	}
}

func env(vars map[string]string) func(string) string { return func(k string) string { return vars[k] } }

func TestResolveFollowsTheCLIsPrecedence(t *testing.T) {
	dir := t.TempDir()
	writeContext(t, dir, "remote", "tcp://10.0.0.5:2376", true)
	writeContext(t, dir, "rootless", "unix:///run/user/1000/docker.sock", false)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"currentContext":"rootless"}`), 0o600))

	ep, err := ResolveFrom(env(map[string]string{"DOCKER_CONFIG": dir}))
	require.NoError(t, err)
	assert.Equal(t, Endpoint{Context: "rootless", Host: "unix:///run/user/1000/docker.sock"}, ep, "config.json's current context")

	ep, err = ResolveFrom(env(map[string]string{"DOCKER_CONFIG": dir, "DOCKER_CONTEXT": "remote", "DOCKER_HOST": "unix:///x.sock"}))
	require.NoError(t, err)
	assert.Equal(t, "remote", ep.Context, "DOCKER_CONTEXT wins over DOCKER_HOST")
	assert.Equal(t, "tcp://10.0.0.5:2376", ep.Host)
	assert.Equal(t, filepath.Join(dir, "contexts", "tls", contextID("remote"), "docker"), ep.TLSDir)
	assert.Len(t, ep.ClientOpts(), 2)

	ep, err = ResolveFrom(env(map[string]string{"DOCKER_CONFIG": dir, "DOCKER_HOST": "unix:///x.sock"}))
	require.NoError(t, err)
	assert.Equal(t, Endpoint{Context: DefaultContext}, ep, "DOCKER_HOST wins over the current context")
	assert.Empty(t, ep.ClientOpts())

	ep, err = ResolveFrom(env(map[string]string{"DOCKER_CONFIG": dir, "DOCKER_CONTEXT": "default"}))
	require.NoError(t, err)
	assert.Equal(t, DefaultContext, ep.Context)

	ep, err = ResolveFrom(env(map[string]string{"HOME": t.TempDir()}))
	require.NoError(t, err)
	assert.Equal(t, DefaultContext, ep.Context, "no configuration: the default context")

	_, err = ResolveFrom(env(map[string]string{"DOCKER_CONFIG": dir, "DOCKER_CONTEXT": "missing"}))
	assert.ErrorContains(t, err, `docker context "missing" not found`)

}
