package preflight

import (
	"os"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseMemAvailable(t *testing.T) {
	n, err := parseMemAvailable([]byte("MemTotal:       24683584 kB\nMemFree:        23068488 kB\nMemAvailable:   24203788 kB\n"))
	require.NoError(t, err)
	assert.Equal(t, int64(24203788*1024), n)
	_, err = parseMemAvailable([]byte("MemTotal: 1 kB\n"))
	assert.Error(t, err)
}

func TestParseCPUMax(t *testing.T) {
	for in, want := range map[string]float64{"200000 100000": 2, "150000 100000\n": 1.5, "max 100000": 0, "-1 100000": 0, "junk": 0} {
		q, ok := parseCPUMax(in)
		assert.Equal(t, want, q, in)
		assert.Equal(t, want > 0, ok, in)
	}
}

func TestParseProcStat(t *testing.T) {
	// A command name with spaces and parentheses must not shift the fields.
	line := "4242 (evil) (name 1) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 10 18446744073709551615"
	state, start, err := parseProcStat(line)
	require.NoError(t, err)
	assert.Equal(t, "S", state)
	assert.Equal(t, uint64(987654), start)
	_, _, err = parseProcStat("4242 (x) S 1 2")
	assert.Error(t, err)
}

func TestLocalHost(t *testing.T) {
	h := LocalHost()
	goos, goarch := h.Platform()
	assert.Equal(t, runtime.GOOS, goos)
	assert.Equal(t, runtime.GOARCH, goarch)
	mem, err := h.AvailableMemory()
	require.NoError(t, err)
	assert.Positive(t, mem)
	assert.Positive(t, h.CPUCores())
	assert.LessOrEqual(t, h.CPUCores(), runtime.NumCPU())
	total, free, err := h.DiskUsage(t.TempDir() + "/not/yet/created")
	require.NoError(t, err)
	assert.Positive(t, total)
	assert.LessOrEqual(t, free, total)

	alive, start, known := processIdentity(os.Getpid())
	assert.True(t, alive && known)
	assert.Positive(t, start)
	alive, _, _ = processIdentity(1 << 30)
	assert.False(t, alive)
}
