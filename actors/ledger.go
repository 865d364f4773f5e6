package actors

import (
	"time"

	"github.com/forgedev/forged/ledger"
	"github.com/forgedev/forged/messages"
)

// ledgerWriter writes one attempt's ledger in order, off the attempt's
// mailbox. Its goroutine is owned by the attempt: it starts with the
// attempt and ends when the attempt closes it (after teardown).
type ledgerWriter struct {
	store ledger.Store
	reqs  chan ledgerOp
}

type ledgerOp struct {
	entry  *ledger.Entry // write this entry, or
	remove string        // remove this attempt's ledger
	done   chan error
}

func startLedgerWriter(store ledger.Store) *ledgerWriter {
	w := &ledgerWriter{store: store, reqs: make(chan ledgerOp, 32)}
	go w.loop()
	return w
}

func (w *ledgerWriter) loop() {
	for op := range w.reqs {
		var err error
		if op.entry != nil {
			err = w.store.Write(*op.entry)
		} else {
			err = w.store.Remove(op.remove)
		}
		op.done <- err
	}
}

// write queues e and returns a channel that yields the write's result. The
// caller may wait on it (off the mailbox) or ignore it.
func (w *ledgerWriter) write(e ledger.Entry) <-chan error {
	done := make(chan error, 1)
	w.reqs <- ledgerOp{entry: &e, done: done}
	return done
}

func (w *ledgerWriter) remove(attemptID string) <-chan error {
	done := make(chan error, 1)
	w.reqs <- ledgerOp{remove: attemptID, done: done}
	return done
}

func (w *ledgerWriter) close() { close(w.reqs) }

// ledgerEntry is the attempt's ledger record in the given state. Planned
// lists every resource the attempt will create; created those that exist.
func (a *attemptActor) ledgerEntry(state ledger.State) ledger.Entry {
	e := ledger.Entry{
		SchemaVersion:    ledger.SchemaVersion,
		AttemptID:        a.d.AttemptID(),
		ExecutionLeaseID: a.d.Sandbox.ExecutionLeaseID,
		FencingToken:     a.d.Lease.FencingToken,
		RunnerID:         a.d.Execution.RunnerID,
		RunnerInstanceID: a.d.Sandbox.RunnerInstanceID,
		WorktreeKey:      a.d.Lease.WorktreeKey,
		ExpiresAt:        a.fence.expiry(),
		State:            state,
		Planned: []ledger.Resource{
			{Type: ledger.ResourceContainer, Name: a.names.Container, Role: "agent"},
			{Type: ledger.ResourceVolume, Name: a.names.WorkspaceVolume, Role: "workspace"},
			{Type: ledger.ResourceVolume, Name: a.names.ControlVolume, Role: "control"},
			{Type: ledger.ResourceVolume, Name: a.names.SecretsVolume, Role: "secrets"},
		},
		Created: []ledger.Resource{},
	}
	if a.provisioned {
		e.Created = append(e.Created,
			ledger.Resource{Type: ledger.ResourceVolume, Name: a.names.WorkspaceVolume, Role: "workspace"},
			ledger.Resource{Type: ledger.ResourceVolume, Name: a.names.ControlVolume, Role: "control"},
			ledger.Resource{Type: ledger.ResourceVolume, Name: a.names.SecretsVolume, Role: "secrets"})
	}
	if a.containerID != "" {
		e.Created = append(e.Created, ledger.Resource{Type: ledger.ResourceContainer, Name: a.names.Container, ID: a.containerID, Role: "agent"})
	}
	if a.peak.Samples > 0 || a.peak.FailedSamples > 0 {
		e.PeakMemory = &ledger.PeakMemory{PeakBytes: a.peak.PeakBytes, Samples: a.peak.Samples, FailedSamples: a.peak.FailedSamples, RecordedAt: time.Now().UTC()}
	}
	return e
}

// ledgerStateFor maps the teardown's result to the ledger's final state.
func ledgerStateFor(report messages.CleanupReport, err error) ledger.State {
	if err != nil || report.Remaining > 0 {
		return ledger.Degraded
	}
	return ledger.Released
}

// writeLedger queues the attempt's ledger in state without waiting: the
// write that must precede resource creation is awaited in the provision
// step instead.
func (a *attemptActor) writeLedger(state ledger.State) {
	a.ledgerState = state
	a.ledger.write(a.ledgerEntry(state))
}
