package actors

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/internal/state/ledger"
)

func writerEntry(id string, state ledger.State) ledger.Entry {
	return ledger.Entry{
		SchemaVersion: ledger.SchemaVersion, AttemptID: id, ExecutionLeaseID: id, FencingToken: id, RunnerID: id,
		RunnerInstanceID: id, WorktreeKey: "forge/t", ExpiresAt: time.Now().Add(time.Hour).UTC(), State: state,
		Planned: []ledger.Resource{{Type: ledger.ResourceNetwork, Name: "forge-x", Role: "internal"}}, Created: []ledger.Resource{},
	}
}

// Posting never blocks the mailbox, however many writes queue (the old
// writer blocked after 32), and the writes land in order.
func TestLedgerWriterPostNeverBlocksAndKeepsOrder(t *testing.T) {
	store := ledger.Store{Root: t.TempDir()}
	w := startLedgerWriter(store)
	defer w.close()
	const id = "00000000-0000-4000-8000-000000000001"
	var last <-chan error
	posted := make(chan struct{})
	go func() {
		defer close(posted)
		for i := 0; i < 200; i++ {
			e := writerEntry(id, ledger.Active)
			e.Planned[0].Name = fmt.Sprintf("forge-%d", i)
			last = w.post(e)
		}
	}()
	select {
	case <-posted:
	case <-time.After(within):
		t.Fatal("posting 200 ledger writes blocked")
	}
	require.NoError(t, <-last)
	got, err := store.Read(id)
	require.NoError(t, err)
	assert.Equal(t, "forge-199", got.Planned[0].Name, "the last posted write is the last written")
}

// A step that posts after the attempt stopped gets an error, never a
// panic on a closed channel.
func TestLedgerWriterAfterCloseRefusesWithoutPanicking(t *testing.T) {
	store := ledger.Store{Root: t.TempDir()}
	w := startLedgerWriter(store)
	w.close()
	w.close() // idempotent
	const id = "00000000-0000-4000-8000-000000000002"
	assert.ErrorIs(t, w.Write(writerEntry(id, ledger.Starting)), errLedgerClosed)
	assert.ErrorIs(t, w.Remove(id), errLedgerClosed)
}
