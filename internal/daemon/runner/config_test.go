package runner

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDefaultBuildPermits(t *testing.T) {
	const gib = 1 << 30
	for _, c := range []struct {
		cpus   int
		memory uint64
		want   int
	}{
		{1, 2 * gib, 1},    // never below one
		{2, 24 * gib, 1},   // this project's CI machine: one build at a time, as before the pool
		{4, 8 * gib, 2},    // cores and memory agree
		{8, 8 * gib, 2},    // memory bounds it
		{4, 64 * gib, 2},   // cores bound it
		{64, 512 * gib, 4}, // never above four
		{8, 0, 1},          // memory unknown
	} {
		assert.Equal(t, c.want, DefaultBuildPermits(c.cpus, c.memory), "%d cores, %d GiB", c.cpus, c.memory/gib)
	}
}

func TestASampleIntervalPastTheTelemetrysBoundIsRefused(t *testing.T) {
	_, _, err := Config{StateRoot: t.TempDir(), SampleInterval: 31 * time.Second}.resolve()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "above 30s")
}

func TestAnUnknownIsolationIsRefused(t *testing.T) {
	_, _, err := Config{StateRoot: t.TempDir(), Isolation: "gVisor"}.resolve()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "--isolation")
	assert.Equal(t, "", isolationOf(Config{Isolation: "runc"}).Runtime, "runc workers use the engine's default runtime")
	assert.Equal(t, "runsc", isolationOf(Config{Isolation: "gvisor"}).Runtime)
	assert.Equal(t, "runsc-custom", isolationOf(Config{Isolation: "gvisor", GVisorRuntime: "runsc-custom"}).Runtime)
}
