package services

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/messages"
)

func TestContainerSpecsAreHardenedAndSplitTheMemory(t *testing.T) {
	a := Attempt{Prefix: "forge-abc", Network: "forge-abc",
		Labels: map[string]string{"dev.forge.managed": "true"}, ServiceMemoryBytes: 2 << 30, Count: 2}
	for _, s := range []string{Postgres, Redis, Browser} {
		d, ok := DefinitionFor(s)
		require.True(t, ok)
		spec := d.ContainerSpec(a, idA)
		assert.Equal(t, "forge-abc-"+s, spec.Name)
		assert.Equal(t, s, spec.Alias)
		assert.Equal(t, idA, spec.Image, "created from the pinned id, never the tag")
		assert.Equal(t, int64(1<<30), spec.MemoryBytes)
		assert.NotContains(t, []string{"", "0", "0:0", "root"}, spec.User)
		assert.Empty(t, spec.CapAdd, "no service needs a capability")
		for dir, opts := range spec.Tmpfs {
			assert.Contains(t, opts, "noexec", dir)
			assert.Contains(t, opts, "mode=0700", dir)
		}
		// Never the attempt's secrets volume (the provider credential and
		// the other services' passwords): only the service's own.
		assert.NotEqual(t, "forge-abc-secrets", spec.SecretsVolume)
		if d.SecretFile == "" {
			assert.Empty(t, spec.SecretsVolume, "the browser mounts no secret")
			continue // the browser has no credentials
		}
		assert.Equal(t, "forge-abc-secrets-"+s, spec.SecretsVolume)
		script := strings.Join(spec.Cmd, " ")
		assert.Contains(t, script, "/run/forge-secrets/"+d.SecretFile, "the password is read from its file")
		for _, env := range spec.Env {
			assert.NotContains(t, strings.ToLower(env), "password")
		}
	}
	_, ok := DefinitionFor("mysql")
	assert.False(t, ok)
}

func TestPasswordsAreFreshAndLong(t *testing.T) {
	a, err := NewPassword()
	require.NoError(t, err)
	b, err := NewPassword()
	require.NoError(t, err)
	assert.NotEqual(t, a, b)
	assert.Len(t, a, 43)
}

func TestEndpointEnvNamesTheFileNeverThePassword(t *testing.T) {
	pg, _ := DefinitionFor(Postgres)
	rd, _ := DefinitionFor(Redis)
	env := messages.ServiceEnv([]messages.ServiceEndpoint{pg.Endpoint(), rd.Endpoint()})
	assert.Contains(t, env, "PGHOST=postgres")
	assert.Contains(t, env, "PGPORT=5432")
	assert.Contains(t, env, "PGUSER=forge")
	assert.Contains(t, env, "PGDATABASE=forge")
	assert.Contains(t, env, "FORGE_POSTGRES_PASSWORD_FILE=/run/forge-secrets/postgres-password")
	assert.Contains(t, env, "REDIS_HOST=redis")
	assert.Contains(t, env, "FORGE_REDIS_PASSWORD_FILE=/run/forge-secrets/redis-password")
	for _, kv := range env {
		assert.NotContains(t, kv, "PASSWORD=")
	}
}
