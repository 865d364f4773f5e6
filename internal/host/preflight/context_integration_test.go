package preflight_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/internal/host/preflight"
	"github.com/forgedev/forged/internal/testkit/enginetest"
)

// writeCLIContext writes a docker CLI context named name for host into a
// fresh configuration directory, as `docker context create` does.
func writeCLIContext(t *testing.T, name, host string) string {
	t.Helper()
	dir := t.TempDir()
	sum := sha256.Sum256([]byte(name))
	meta := filepath.Join(dir, "contexts", "meta", hex.EncodeToString(sum[:]))
	require.NoError(t, os.MkdirAll(meta, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(meta, "meta.json"),
		[]byte(`{"Name":"`+name+`","Metadata":{},"Endpoints":{"docker":{"Host":"`+host+`","SkipTLSVerify":false}}}`), 0o600))
	return dir
}

func TestEngineClientHonoursDockerContext(t *testing.T) {
	real := enginetest.Client(t)
	host := real.DaemonHost()

	t.Setenv("DOCKER_HOST", "")
	t.Setenv("DOCKER_CONFIG", writeCLIContext(t, "forged-test", host))
	t.Setenv("DOCKER_CONTEXT", "forged-test")
	cli, err := preflight.NewEngineClient("")
	require.NoError(t, err)
	defer cli.Close()
	assert.Equal(t, host, cli.DaemonHost(), "the context's endpoint")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = cli.Ping(ctx)
	require.NoError(t, err)

	// A context naming another endpoint is followed, not the default socket.
	missing := "unix://" + filepath.Join(t.TempDir(), "no-engine.sock")
	t.Setenv("DOCKER_CONFIG", writeCLIContext(t, "elsewhere", missing))
	t.Setenv("DOCKER_CONTEXT", "elsewhere")
	cli2, err := preflight.NewEngineClient("")
	require.NoError(t, err)
	defer cli2.Close()
	assert.Equal(t, missing, cli2.DaemonHost())
	_, err = cli2.Ping(ctx)
	assert.Error(t, err)

	t.Setenv("DOCKER_CONTEXT", "not-there")
	_, err = preflight.NewEngineClient("")
	assert.ErrorContains(t, err, `docker context "not-there" not found`)
}
