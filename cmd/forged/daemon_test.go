package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMetricsListenerIsOffByDefaultAndNeedsAToken(t *testing.T) {
	l, _, err := (&metricsListenFlags{}).listen()
	require.NoError(t, err)
	assert.Nil(t, l, "no TCP listener unless asked for")

	token := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(token, []byte("0123456789abcdef0123\n"), 0o600))
	for name, flags := range map[string]metricsListenFlags{
		"no token file":          {address: "127.0.0.1:0"},
		"token without listener": {tokenFile: token},
		"no host":                {address: ":0", tokenFile: token},
		"not host:port":          {address: "127.0.0.1", tokenFile: token},
	} {
		_, _, err := flags.listen()
		assert.ErrorContains(t, err, "config: metrics", name)
	}

	l, got, err := (&metricsListenFlags{address: "127.0.0.1:0", tokenFile: token}).listen()
	require.NoError(t, err)
	defer l.Close()
	assert.Equal(t, "0123456789abcdef0123", got)
	assert.Equal(t, "tcp", l.Addr().Network())
}
