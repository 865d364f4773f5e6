package procgroup

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCheckExecutable(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "helper")
	require.NoError(t, os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755))
	plain := filepath.Join(dir, "plain")
	require.NoError(t, os.WriteFile(plain, nil, 0o644))

	assert.NoError(t, CheckExecutable("test helper", exe))
	for path, want := range map[string]string{
		"helper":                     `test helper "helper": must be a clean absolute path`,
		dir + "/./helper":            "must be a clean absolute path",
		filepath.Join(dir, "absent"): "test helper: stat ",
		plain:                        "test helper " + plain + ": not an executable regular file",
		dir:                          "not an executable regular file",
	} {
		assert.ErrorContains(t, CheckExecutable("test helper", path), want, "%s", path)
	}
}
