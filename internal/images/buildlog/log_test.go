package buildlog

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLogStoresRedactedRestricted(t *testing.T) {
	root := t.TempDir()
	l := New(NewRedactor("attempt-secret-xyz"))
	l.Line("Step 1/2 : RUN echo attempt-secret-xyz")
	l.Line("attempt-secret-xyz")
	l.Line("PASSWORD=hunter2hunter2")
	rec, err := l.Save(root, "abc123", "project")
	require.NoError(t, err)

	data, err := os.ReadFile(rec.Path)
	require.NoError(t, err)
	assert.Equal(t, "Step 1/2 : RUN echo [REDACTED]\n[REDACTED]\nPASSWORD=[REDACTED]\n", string(data))
	sum := sha256.Sum256(data)
	assert.Equal(t, "sha256:"+hex.EncodeToString(sum[:]), rec.Digest)
	assert.Equal(t, len(data), rec.Bytes)
	assert.False(t, rec.Truncated)

	info, err := os.Stat(rec.Path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), info.Mode().Perm())
	dir, err := os.Stat(filepath.Dir(rec.Path))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), dir.Mode().Perm())
	assert.NotContains(t, l.Tail(), "attempt-secret-xyz")
}

func TestLogBounded(t *testing.T) {
	l := New(nil)
	line := strings.Repeat("x", 1023)
	for range 5000 { // 5000 KiB of output
		l.Line(line)
	}
	l.Line("the last line")
	assert.True(t, l.Truncated())
	content := l.Content()
	assert.LessOrEqual(t, len(content), MaxBytes+100)
	assert.Contains(t, string(content), "[build log truncated at 4194304 bytes")
	tail := l.Tail()
	assert.LessOrEqual(t, len(tail), TailBytes)
	assert.True(t, strings.HasSuffix(tail, "the last line"), tail)
	assert.True(t, strings.HasPrefix(tail, "x"), "the tail starts at a line")
}

func TestLogSaveRefusesUnsafeNames(t *testing.T) {
	l := New(nil)
	for _, bad := range [][2]string{{"../x", "a"}, {"k", "../../etc/passwd"}, {"", "a"}, {"k", "a/b"}, {"..", "a"}} {
		_, err := l.Save(t.TempDir(), bad[0], bad[1])
		assert.Error(t, err, bad)
	}
}
