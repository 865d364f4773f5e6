package imagesig

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func command(t *testing.T, script string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "verify")
	require.NoError(t, os.WriteFile(path, []byte("#!/bin/sh\n"+script), 0o700))
	return path
}

func TestVerifyPassesTheReferenceAndReadsTheExitStatus(t *testing.T) {
	seen := filepath.Join(t.TempDir(), "seen")
	v, err := New(command(t, `echo "$#:$1:$2" > `+seen+`; test "$2" = "registry.local/base@sha256:abc"`), 0)
	require.NoError(t, err)
	require.NoError(t, v.Verify(context.Background(), "registry.local/base@sha256:abc"))
	raw, err := os.ReadFile(seen)
	require.NoError(t, err)
	assert.Equal(t, "2:--:registry.local/base@sha256:abc\n", string(raw), "the reference follows --, unexpanded by any shell")
	err = v.Verify(context.Background(), "other; rm -rf /")
	assert.ErrorContains(t, err, "exit status 1")
}

// A reference starting with "-" reaches the command after "--": an
// option parser (getopts here, cobra in cosign) takes it as the operand,
// never as an option.
func TestVerifyReferenceStartingWithADashIsNeverAnOption(t *testing.T) {
	seen := filepath.Join(t.TempDir(), "seen")
	v, err := New(command(t, `while getopts k: o; do echo "option $o" >> `+seen+`; done; shift $((OPTIND-1)); echo "operand $1" >> `+seen), 0)
	require.NoError(t, err)
	require.NoError(t, v.Verify(context.Background(), "-kevil"))
	raw, err := os.ReadFile(seen)
	require.NoError(t, err)
	assert.Equal(t, "operand -kevil\n", string(raw))
}

func TestVerifyRefusals(t *testing.T) {
	var none *Verifier
	assert.ErrorIs(t, none.Verify(context.Background(), "x"), ErrNotConfigured)
	v, err := New(command(t, "sleep 30"), 200*time.Millisecond)
	require.NoError(t, err)
	assert.ErrorContains(t, v.Verify(context.Background(), "x"), "timed out after 200ms")
	v, err = New(command(t, "kill -9 $$"), 0)
	require.NoError(t, err)
	assert.ErrorContains(t, v.Verify(context.Background(), "x"), "killed by signal")
	_, err = New("relative/cmd", 0)
	assert.Error(t, err)
	_, err = New(t.TempDir(), 0)
	assert.Error(t, err)
}
