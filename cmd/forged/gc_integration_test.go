package main

import (
	"encoding/json"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/imagegc"
	"github.com/forgedev/forged/internal/enginetest"
	"github.com/forgedev/forged/internal/ids"
)

// forged gc prints its collection as JSON; scoped to a project nothing
// has built, a dry run lists nothing to remove.
func TestGCDryRunPrintsJSON(t *testing.T) {
	enginetest.Client(t)
	forged := enginetest.ForgedBinary(t)
	out, err := exec.Command(forged, "gc", "--dry-run", "--lock-root", t.TempDir(), "--project", "gc-none-"+ids.NewUUID()[:8]).Output()
	require.NoError(t, err, "%s", out)
	var report imagegc.Report
	require.NoError(t, json.Unmarshal(out, &report), "%s", out)
	assert.True(t, report.DryRun)
	assert.Empty(t, report.Removed)
	assert.Empty(t, report.Kept)
}
