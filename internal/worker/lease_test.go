package worker

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"testing/iotest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/sandbox/lease"
)

func encodedUpdate(t *testing.T, at time.Time) []byte {
	t.Helper()
	u, err := lease.Sign(testAttemptID, "11111111-2222-4333-8444-555555555555", at, testLeaseKey)
	require.NoError(t, err)
	raw, err := json.Marshal(u)
	require.NoError(t, err)
	return raw
}

// dirNames lists the names in dir.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func TestWriteLeaseUpdateFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "lease-update.json")
	first := append(encodedUpdate(t, time.Now().Add(time.Minute)), '\n')
	require.NoError(t, WriteLeaseUpdateFile(bytes.NewReader(first), path))
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, first, got, "the exact bytes")
	fi, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())

	second := encodedUpdate(t, time.Now().Add(time.Hour))
	require.NoError(t, WriteLeaseUpdateFile(bytes.NewReader(second), path))
	got, err = os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, second, got, "replaced")
	assert.Equal(t, []string{"lease-update.json"}, dirNames(t, dir), "no temporary file left")

	u, err := readLeaseUpdateFile(path)
	require.NoError(t, err)
	assert.Equal(t, testAttemptID, u.DispatchAttemptID)
}

func TestWriteLeaseUpdateFileRefuses(t *testing.T) {
	valid := encodedUpdate(t, time.Now().Add(time.Minute))
	cases := map[string]struct {
		in   func() *bytes.Reader
		code failure.Code
	}{
		"empty":     {func() *bytes.Reader { return bytes.NewReader(nil) }, lease.UpdateInvalid},
		"garbage":   {func() *bytes.Reader { return bytes.NewReader([]byte("garbage")) }, lease.UpdateInvalid},
		"too large": {func() *bytes.Reader { return bytes.NewReader(append(valid, make([]byte, lease.MaxUpdateBytes)...)) }, lease.UpdateInvalid},
		"unknown field": {func() *bytes.Reader {
			return bytes.NewReader([]byte(strings.Replace(string(valid), "{", `{"x":1,`, 1)))
		}, lease.UpdateInvalid},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "lease-update.json")
			require.NoError(t, os.WriteFile(path, []byte("previous"), 0o600))
			err := WriteLeaseUpdateFile(tc.in(), path)
			require.Error(t, err)
			assert.Equal(t, tc.code, failure.CodeOf(err), "%v", err)
			got, rerr := os.ReadFile(path)
			require.NoError(t, rerr)
			assert.Equal(t, "previous", string(got), "left as it was")
			assert.Equal(t, []string{"lease-update.json"}, dirNames(t, dir))
		})
	}
	t.Run("read error", func(t *testing.T) {
		dir := t.TempDir()
		err := WriteLeaseUpdateFile(iotest.ErrReader(errors.New("boom")), filepath.Join(dir, "lease-update.json"))
		require.ErrorContains(t, err, "boom")
		assert.Empty(t, dirNames(t, dir))
	})
	t.Run("missing directory", func(t *testing.T) {
		err := WriteLeaseUpdateFile(bytes.NewReader(valid), filepath.Join(t.TempDir(), "nope", "lease-update.json"))
		require.Error(t, err)
	})
	t.Run("target is a directory", func(t *testing.T) {
		dir := t.TempDir()
		path := filepath.Join(dir, "lease-update.json")
		require.NoError(t, os.Mkdir(path, 0o700))
		require.Error(t, WriteLeaseUpdateFile(bytes.NewReader(valid), path))
		assert.Equal(t, []string{"lease-update.json"}, dirNames(t, dir), "temporary file removed")
	})
	t.Run("target symlink is replaced, not followed", func(t *testing.T) {
		dir := t.TempDir()
		outside := filepath.Join(t.TempDir(), "outside")
		require.NoError(t, os.WriteFile(outside, []byte("outside"), 0o600))
		path := filepath.Join(dir, "lease-update.json")
		require.NoError(t, os.Symlink(outside, path))
		require.NoError(t, WriteLeaseUpdateFile(bytes.NewReader(valid), path))
		got, err := os.ReadFile(outside)
		require.NoError(t, err)
		assert.Equal(t, "outside", string(got))
		fi, err := os.Lstat(path)
		require.NoError(t, err)
		assert.True(t, fi.Mode().IsRegular())
	})
}

func TestReadLeaseUpdateFile(t *testing.T) {
	dir := t.TempDir()
	valid := encodedUpdate(t, time.Now().Add(time.Minute))

	_, err := readLeaseUpdateFile(filepath.Join(dir, "missing"))
	assert.ErrorIs(t, err, os.ErrNotExist)

	link := filepath.Join(dir, "link")
	target := filepath.Join(dir, "target")
	require.NoError(t, os.WriteFile(target, valid, 0o600))
	require.NoError(t, os.Symlink(target, link))
	_, err = readLeaseUpdateFile(link)
	assert.ErrorIs(t, err, syscall.ELOOP, "symbolic links are not followed")

	fifo := filepath.Join(dir, "fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	done := make(chan error, 1)
	go func() { _, err := readLeaseUpdateFile(fifo); done <- err }()
	select {
	case err := <-done:
		assert.ErrorContains(t, err, "not a regular file")
	case <-time.After(5 * time.Second):
		t.Fatal("reading a FIFO blocked")
	}

	_, err = readLeaseUpdateFile(dir)
	assert.ErrorContains(t, err, "not a regular file")

	big := filepath.Join(dir, "big")
	require.NoError(t, os.WriteFile(big, append(valid, make([]byte, 1<<20)...), 0o600))
	_, err = readLeaseUpdateFile(big)
	assert.Equal(t, lease.UpdateInvalid, failure.CodeOf(err), "%v", err)

	u, err := readLeaseUpdateFile(target)
	require.NoError(t, err)
	assert.Equal(t, lease.UpdateSchema, u.SchemaVersion)
}
