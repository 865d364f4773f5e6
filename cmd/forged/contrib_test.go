package main_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/internal/testkit/enginetest"
)

// contribFile returns the path of a file of contrib/.
func contribFile(t *testing.T, name string) string {
	t.Helper()
	path, err := filepath.Abs(filepath.Join("..", "..", "contrib", name))
	require.NoError(t, err)
	require.FileExists(t, path)
	return path
}

// TestServiceUnitPassesSystemdAnalyzeVerify verifies contrib/forged.service
// with its ExecStart pointed at a freshly built forged. It fails on any
// complaint (systemd-analyze verify exits 0 on unknown keys, so its output
// must be empty too), and skips only where systemd-analyze is absent.
func TestServiceUnitPassesSystemdAnalyzeVerify(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed: the unit file is not verified")
	}
	unit, err := os.ReadFile(contribFile(t, "forged.service"))
	require.NoError(t, err)
	require.Contains(t, string(unit), "ExecStart=/usr/local/bin/forged daemon --config /etc/forged/forged.yaml")
	forged := enginetest.ForgedBinary(t)
	path := filepath.Join(t.TempDir(), "forged.service")
	require.NoError(t, os.WriteFile(path, []byte(strings.ReplaceAll(string(unit), "/usr/local/bin/forged", forged)), 0o644))

	out, err := exec.Command(analyze, "verify", "--man=no", path).CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Empty(t, strings.TrimSpace(string(out)), "systemd-analyze verify complained")

	// The hardening that matters is there (and no capability is kept).
	for _, line := range []string{"NoNewPrivileges=yes", "ProtectSystem=strict", "CapabilityBoundingSet=\n", "PrivateTmp=yes",
		"SupplementaryGroups=docker disk", "DeviceAllow=block-loop rw", "DevicePolicy=closed", "RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6", "SystemCallFilter=@system-service"} {
		assert.Contains(t, string(unit), line)
	}
	security, err := exec.Command(analyze, "security", "--offline=yes", "--threshold=30", path).CombinedOutput()
	assert.NoError(t, err, "exposure above 3.0:\n%s", security)

	// A broken unit is caught: the check can fail.
	broken := filepath.Join(t.TempDir(), "forged.service")
	require.NoError(t, os.WriteFile(broken, []byte(strings.ReplaceAll(strings.ReplaceAll(string(unit), "/usr/local/bin/forged", forged),
		"ProtectSystem=", "ProtectSystm=")), 0o644))
	out, _ = exec.Command(analyze, "verify", "--man=no", broken).CombinedOutput()
	assert.Contains(t, string(out), "ProtectSystm")
}

// TestTmpfilesCreateTheLockAndStateDirectories applies
// contrib/forged.tmpfiles.conf under a scratch root that knows the forged
// user, and checks what it creates.
func TestTmpfilesCreateTheLockAndStateDirectories(t *testing.T) {
	tmpfiles, err := exec.LookPath("systemd-tmpfiles")
	if err != nil {
		t.Skip("systemd-tmpfiles is not installed: the tmpfiles configuration is not applied")
	}
	root := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(root, "etc"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "etc", "passwd"), []byte("forged:x:64999:64999::/var/lib/forged:/usr/sbin/nologin\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(root, "etc", "group"), []byte("forged:x:64999:\n"), 0o644))
	out, err := exec.Command(tmpfiles, "--create", "--root="+root, contribFile(t, "forged.tmpfiles.conf")).CombinedOutput()
	require.NoError(t, err, "%s", out)
	for _, dir := range []string{"run/lock/forged", "var/lib/forged"} {
		info, err := os.Stat(filepath.Join(root, dir))
		require.NoError(t, err, dir)
		assert.True(t, info.IsDir())
		assert.Equal(t, os.FileMode(0o700), info.Mode().Perm(), dir)
	}
}
