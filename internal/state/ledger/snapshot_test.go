package ledger

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/failure"
)

// withSnapshot is sampleEntry with the seed's reservation, paths and labels.
func withSnapshot() Entry {
	e := sampleEntry()
	e.Reservation = &Reservation{MemoryBytes: 2<<30 + 128<<20, CPUMillis: 2000, PIDs: 512}
	e.Paths = []Path{{Path: "/workspace", Role: "worktree"}, {Path: "/tmp", Role: "temporary"}}
	e.Labels = map[string]string{"dev.forge.managed": "true", "dev.forge.attempt-id": e.AttemptID}
	return e
}

func TestSnapshotRoundTrip(t *testing.T) {
	s := Store{Root: t.TempDir()}
	e := withSnapshot()
	require.NoError(t, s.Write(e))
	got, err := s.Read(e.AttemptID)
	require.NoError(t, err)
	assert.Equal(t, e.Reservation, got.Reservation)
	assert.Equal(t, e.Paths, got.Paths)
	assert.Equal(t, e.Labels, got.Labels)
	// A ledger without them (one written before they existed) still reads.
	old := sampleEntry()
	require.NoError(t, s.Write(old))
	got, err = s.Read(old.AttemptID)
	require.NoError(t, err)
	assert.Nil(t, got.Reservation)
	assert.Empty(t, got.Paths)
}

func TestSnapshotRefusesInvalid(t *testing.T) {
	cases := map[string]func(e *Entry){
		"zero memory":      func(e *Entry) { e.Reservation.MemoryBytes = 0 },
		"negative cpu":     func(e *Entry) { e.Reservation.CPUMillis = -1 },
		"huge pids":        func(e *Entry) { e.Reservation.PIDs = 1 << 62 },
		"relative path":    func(e *Entry) { e.Paths[0].Path = "workspace" },
		"unclean path":     func(e *Entry) { e.Paths[0].Path = "/workspace/../etc" },
		"control in path":  func(e *Entry) { e.Paths[0].Path = "/tmp\n" },
		"empty role":       func(e *Entry) { e.Paths[1].Role = "" },
		"too many paths":   func(e *Entry) { e.Paths = make([]Path, maxPaths+1) },
		"empty label key":  func(e *Entry) { e.Labels[""] = "x" },
		"control in label": func(e *Entry) { e.Labels["dev.forge.x"] = "a\x00b" },
		"long label value": func(e *Entry) { e.Labels["dev.forge.x"] = strings.Repeat("v", maxLabelValBytes+1) },
		"too many labels": func(e *Entry) {
			for i := 0; i <= maxLabels; i++ {
				e.Labels[strings.Repeat("k", i+1)] = "v"
			}
		},
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			e := withSnapshot()
			e.SchemaVersion = SchemaVersion
			require.NoError(t, e.Validate())
			mutate(&e)
			err := e.Validate()
			require.True(t, failure.Is(err, CodeLedgerInvalid), "%v", err)
		})
	}
}
