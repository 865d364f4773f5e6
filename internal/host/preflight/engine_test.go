package preflight

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/testkit/enginetest"
)

// TestRealEngineReport checks this machine's engine: it runs whenever an
// engine answers, fails under CI=true when none does, and skips otherwise.
func TestRealEngineReport(t *testing.T) {
	cli := enginetest.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	opts := Options{AllowRootful: true, Endpoint: cli.DaemonHost(), StateRoot: t.TempDir()}
	r := NewChecker(cli, nil, opts).Check(ctx)
	js, err := json.MarshalIndent(r, "", "  ")
	require.NoError(t, err)
	t.Logf("report on this machine:\n%s", js)

	assert.True(t, r.Platform.Supported)
	require.True(t, r.Engine.Reachable, r.Reason)
	assert.True(t, r.Engine.Linux)
	assert.NotEmpty(t, r.Engine.APIVersion)
	assert.NotEmpty(t, r.Engine.ServerVersion)
	assert.NotEmpty(t, r.Features.StorageDriver)
	assert.Contains(t, []string{"1", "2"}, r.Features.CgroupVersion)
	assert.True(t, r.Features.ClassicBuilder)
	assert.Positive(t, r.Disk.TotalBytes)
	assert.Positive(t, r.Memory.AvailableBytes)
	assert.Positive(t, r.CPU.Cores)
	// With rootful allowed, only the host's resources may refuse.
	assert.Contains(t, []failure.Code{"", DockerDiskLow, DockerMemoryLow, DockerCPULow}, r.Code, r.Reason)
	assert.Equal(t, r.Code == "", r.Slots() > 0)
	assert.True(t, r.MaintenanceAllowed())

	// Without the opt-in, a rootful engine is refused.
	opts.AllowRootful = false
	strict := NewChecker(cli, nil, opts).Check(ctx)
	if r.Features.Rootless {
		assert.Equal(t, r.Code, strict.Code)
	} else {
		assert.Equal(t, DockerRootlessRequired, strict.Code)
		assert.Zero(t, strict.Slots())
	}
}
