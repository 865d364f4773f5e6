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

// The gVisor offer of a runc floor is validated at start and reaches the
// attempts' confinement, which decides per dispatch (attemptConfinement).
func TestTheGVisorOfferIsValidatedAndPassedOn(t *testing.T) {
	_, _, err := Config{StateRoot: t.TempDir(), SandboxRequiredIsolation: "kata"}.resolve()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "--sandbox-required-isolation")
	iso := isolationOf(Config{Isolation: "runc", AllowGVisorDispatch: true, SandboxRequiredIsolation: "gvisor"})
	assert.True(t, iso.OfferGVisor)
	assert.Equal(t, "gvisor", iso.RequiredIsolation)
	assert.Equal(t, "runc", iso.Isolation)
	assert.Empty(t, iso.Runtime, "the floor stays runc: only the attempts that get gVisor run under runsc")
	assert.True(t, offersGVisor(Config{AllowGVisorDispatch: true}))
	assert.True(t, offersGVisor(Config{SandboxRequiredIsolation: "gvisor"}))
	assert.False(t, offersGVisor(Config{SandboxRequiredIsolation: "runc"}), "a runc host that offers gVisor to nobody runs no probe container")
}

// The sandbox uid range is checked at start: defaulted when unset, and a
// range over system or login users, or past the top, is refused naming
// the setting.
func TestTheSandboxUIDRangeIsValidatedAtStart(t *testing.T) {
	cfg, _, err := Config{StateRoot: t.TempDir(), Slots: 3}.resolve()
	if err != nil {
		require.NotContains(t, err.Error(), "sandbox-uid-base") // a missing worker binary may end it later
	}
	assert.Equal(t, 100000, cfg.SandboxUIDBase)
	for _, base := range []int{1000, 10001, 65533, 1<<31 - 3} {
		_, _, err := Config{StateRoot: t.TempDir(), Slots: 3, SandboxUIDBase: base}.resolve()
		require.Error(t, err, base)
		assert.Contains(t, err.Error(), "--sandbox-uid-base", base)
	}
}
