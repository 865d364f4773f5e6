package providerauth

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/failure"
)

const secret = "sk-test-0123456789abcdefghijklmnopqrstuvwxyz"

// helper writes an executable shell script and returns its path.
func helper(t *testing.T, script string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "helper")
	require.NoError(t, os.WriteFile(path, []byte("#!/bin/sh\n"+script), 0o700))
	return path
}

func adapters(t *testing.T, script string, timeout time.Duration) *Adapters {
	t.Helper()
	a, err := Parse([]string{"anthropic=" + helper(t, script)}, timeout)
	require.NoError(t, err)
	return a
}

var req = Request{Provider: "anthropic", AuthKind: "api_key", DispatchAttemptID: "00000000-0000-4000-8000-000000000001", RunnerInstanceID: "00000000-0000-4000-8000-000000000002"}

func TestPrepareReadsTheHelpersFilesAndRemovesTheDirectory(t *testing.T) {
	env := filepath.Join(t.TempDir(), "env")
	stdin := filepath.Join(t.TempDir(), "stdin")
	t.Setenv("FORGED_PUBLISH_TOKEN_FILE", "/should/not/leak")
	a := adapters(t, `cat > `+stdin+`; env > `+env+`; printf '`+secret+`' > api-key; printf '{}' > .config.json; echo "`+secret+`"; echo "`+secret+`" >&2`, 0)
	dir := filepath.Join(t.TempDir(), "creds")
	files, err := a.Prepare(context.Background(), dir, req)
	require.NoError(t, err)
	require.Len(t, files, 2)
	byName := map[string]string{}
	for _, f := range files {
		byName[f.Name] = string(f.Content)
	}
	assert.Equal(t, secret, byName["api-key"])
	assert.Equal(t, "{}", byName[".config.json"])
	assert.NoDirExists(t, dir, "the host copy is removed at once")

	raw, err := os.ReadFile(env)
	require.NoError(t, err)
	assert.NotContains(t, string(raw), "FORGED_", "none of forged's own variables reaches the helper")
	assert.Contains(t, string(raw), "FORGE_CREDENTIALS_DIR="+dir)
	in, err := os.ReadFile(stdin)
	require.NoError(t, err)
	assert.JSONEq(t, `{"provider":"anthropic","authKind":"api_key","dispatchAttemptId":"00000000-0000-4000-8000-000000000001","runnerInstanceId":"00000000-0000-4000-8000-000000000002"}`, string(in))
}

func TestPrepareRefusals(t *testing.T) {
	cases := map[string]struct {
		script  string
		timeout time.Duration
		want    string
	}{
		"exit status":   {script: `printf '` + secret + `' > key; echo ` + secret + `; exit 3`, want: "exit status 3"},
		"timeout":       {script: `sleep 30`, timeout: 300 * time.Millisecond, want: "timed out after 300ms"},
		"nothing":       {script: `true`, want: "no credential file"},
		"symlink":       {script: `ln -s /etc/passwd key`, want: "not a regular file"},
		"directory":     {script: `mkdir nested`, want: "not a regular file"},
		"fifo":          {script: `mkfifo pipe`, want: "not a regular file"},
		"bad name":      {script: `printf x > 'a b'`, want: "name is not"},
		"too large":     {script: `head -c 2000000 /dev/zero > big`, want: "read big"},
		"too many":      {script: `for i in $(seq 1 40); do printf x > f$i; done`, want: "more than 32"},
		"background":    {script: `(sleep 30 &) ; printf ` + secret + ` > key`, want: ""},
		"killed":        {script: `kill -9 $$`, want: "killed by signal"},
		"secret in err": {script: `echo ` + secret + ` >&2; exit 1`, want: "exit status 1"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			a := adapters(t, c.script, c.timeout)
			dir := filepath.Join(t.TempDir(), "creds")
			started := time.Now()
			files, err := a.Prepare(context.Background(), dir, req)
			assert.Less(t, time.Since(started), 10*time.Second)
			assert.NoDirExists(t, dir)
			if c.want == "" {
				require.NoError(t, err)
				require.Len(t, files, 1)
				return
			}
			require.Error(t, err)
			assert.True(t, failure.Is(err, failure.SandboxAuthUnavailable), "%v", err)
			assert.Contains(t, err.Error(), c.want)
			assert.NotContains(t, err.Error(), secret)
			assert.Nil(t, files)
		})
	}
}

func TestUnconfiguredProviderIsUnavailable(t *testing.T) {
	var none *Adapters
	err := none.Check("anthropic", "api_key")
	assert.True(t, failure.Is(err, failure.SandboxAuthUnavailable))
	a := adapters(t, "true", 0)
	assert.NoError(t, a.Check("anthropic", "api_key"))
	err = a.Check("openai", "api_key")
	assert.True(t, failure.Is(err, failure.SandboxAuthUnavailable))
	assert.Contains(t, err.Error(), `"openai"`)
}

func TestParseRefusesBadSpecs(t *testing.T) {
	good := helper(t, "true")
	for _, spec := range []string{"anthropic", "=" + good, "Anthropic=" + good, "a=relative/helper", "a=/no/such/helper", "a=" + filepath.Dir(good)} {
		_, err := Parse([]string{spec}, 0)
		assert.Error(t, err, spec)
	}
	_, err := Parse([]string{"a=" + good, "a=" + good}, 0)
	assert.ErrorContains(t, err, "twice")
	notExec := filepath.Join(t.TempDir(), "plain")
	require.NoError(t, os.WriteFile(notExec, nil, 0o600))
	_, err = Parse([]string{"a=" + notExec}, 0)
	assert.True(t, strings.Contains(err.Error(), "not an executable"))
}
