package runner_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/internal/daemon/runner"
	"github.com/forgedev/forged/internal/example"
	"github.com/forgedev/forged/messages"
)

// A RUN step that prints the attempt's own secret (its fencing token) and
// an environment-style token: both are redacted in the stored build log
// (0600, under the state root, with its digest) and in every event, which
// carry the digest and a bounded tail, never the log line by line.
func TestEndToEndBuildLogIsRedactedAndStored(t *testing.T) {
	stateRoot := t.TempDir()
	e := newE2E(t, runner.Config{StateRoot: stateRoot})
	secret := example.NewUUID()
	token := "tok" + strings.ReplaceAll(secret[:13], "-", "")
	repo := filepath.Join(t.TempDir(), "repo-leak")
	require.NoError(t, example.CreateRepo(t.Context(), repo, example.RepoOptions{
		Dockerfile: "FROM " + example.BaseImage + "\n" +
			"RUN echo leaking $(echo " + secret + ") && echo API_TOKEN=tok" + secret[6:18] + " >&2\n" +
			"LABEL leak=" + example.NewUUID() + "\n",
	}))
	e.repo = repo
	d := e.dispatch([]string{"/bin/sh", "-c", "true"}, 0)
	d.Lease.FencingToken = secret
	log := e.submit(d)
	out := e.wait(log)
	assert.Equal(t, messages.StatusSucceeded, out.Status, "%+v %v", out, eventSummary(log))

	types := map[string]bool{}
	var completed messages.Event
	for _, ev := range log.Events() {
		types[ev.EventType] = true
		raw, err := json.Marshal(ev)
		require.NoError(t, err)
		// The fencing token travels in cleanup reports by design; no build
		// or image event carries it.
		if strings.Contains(ev.EventType, "build") || strings.Contains(ev.EventType, "image") {
			assert.NotContains(t, string(raw), secret, ev.EventType)
		}
		assert.NotContains(t, string(raw), token, ev.EventType)
		if ev.EventType == "sandbox_build_completed" {
			completed = ev
		}
	}
	for _, want := range []string{"sandbox_image_cache_miss", "sandbox_build_started", "sandbox_build_completed"} {
		assert.True(t, types[want], "missing %s: %v", want, eventSummary(log))
	}
	assert.False(t, types["sandbox_build_log"], "no line-by-line build events")
	require.NotNil(t, completed.Data)
	var data struct {
		CacheKey   string `json:"cacheKey"`
		DurationMs int64  `json:"durationMs"`
		BuildLog   struct {
			Digest string `json:"digest"`
			Bytes  int    `json:"bytes"`
			Tail   string `json:"tail"`
		} `json:"buildLog"`
	}
	require.NoError(t, json.Unmarshal([]byte(*completed.Data), &data))
	assert.Positive(t, data.DurationMs)
	assert.Contains(t, data.BuildLog.Tail, "Successfully tagged")
	assert.LessOrEqual(t, len(data.BuildLog.Tail), 2048)

	stored, err := filepath.Glob(filepath.Join(stateRoot, "build-logs", data.CacheKey, "*.log"))
	require.NoError(t, err)
	require.Len(t, stored, 1)
	info, err := os.Stat(stored[0])
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), info.Mode().Perm())
	content, err := os.ReadFile(stored[0])
	require.NoError(t, err)
	assert.NotContains(t, string(content), secret)
	assert.NotContains(t, string(content), token)
	assert.Contains(t, string(content), "leaking [REDACTED]")
	assert.Contains(t, string(content), "API_TOKEN=[REDACTED]")
	sum := sha256.Sum256(content)
	assert.Equal(t, "sha256:"+hex.EncodeToString(sum[:]), data.BuildLog.Digest)
	assert.Equal(t, len(content), data.BuildLog.Bytes)
	assert.True(t, strings.HasSuffix(string(content), "\n"))
}
