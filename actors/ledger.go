package actors

import (
	"errors"
	"sync"

	"github.com/forgedev/forged/internal/state/ledger"
	"github.com/forgedev/forged/messages"
)

// ledgerWriter writes one attempt's ledger in order, off the attempt's
// mailbox. post never blocks: requests queue without bound (an attempt
// makes a handful). Its goroutine is owned by the attempt: it starts with
// the attempt and ends once close is called and the queue is drained. A
// request made after close fails with errLedgerClosed instead of panicking.
//
// Write, Remove and PersistReport make it a teardown.Store for the
// teardown step: they wait for their turn, so the teardown's ledger writes
// land after every write the attempt posted before it.
type ledgerWriter struct {
	store ledger.Store
	wake  chan struct{} // capacity 1: "the queue is not empty"

	mu     sync.Mutex
	queue  []ledgerOp
	closed bool
}

type ledgerOp struct {
	entry  *ledger.Entry // write this entry, or
	remove string        // remove this attempt's ledger
	done   chan error    // capacity 1
}

var errLedgerClosed = errors.New("the attempt's ledger writer is closed")

func startLedgerWriter(store ledger.Store) *ledgerWriter {
	w := &ledgerWriter{store: store, wake: make(chan struct{}, 1)}
	go w.loop()
	return w
}

func (w *ledgerWriter) loop() {
	for range w.wake {
		for {
			w.mu.Lock()
			if len(w.queue) == 0 {
				closed := w.closed
				w.mu.Unlock()
				if closed {
					return
				}
				break
			}
			op := w.queue[0]
			w.queue = w.queue[1:]
			w.mu.Unlock()
			if op.entry != nil {
				op.done <- w.store.Write(*op.entry)
			} else {
				op.done <- w.store.Remove(op.remove)
			}
		}
	}
}

func (w *ledgerWriter) enqueue(op ledgerOp) <-chan error {
	op.done = make(chan error, 1)
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		op.done <- errLedgerClosed
		return op.done
	}
	w.queue = append(w.queue, op)
	w.mu.Unlock()
	w.signal()
	return op.done
}

func (w *ledgerWriter) signal() {
	select {
	case w.wake <- struct{}{}:
	default: // already signalled
	}
}

// post queues e and returns at once; the result arrives on the channel
// for whoever wants it.
func (w *ledgerWriter) post(e ledger.Entry) <-chan error { return w.enqueue(ledgerOp{entry: &e}) }

// Write writes e after everything queued before it, and waits.
func (w *ledgerWriter) Write(e ledger.Entry) error { return <-w.post(e) }

// Remove removes the attempt's ledger after everything queued before it,
// and waits.
func (w *ledgerWriter) Remove(attemptID string) error {
	return <-w.enqueue(ledgerOp{remove: attemptID})
}

// PersistReport stores a cleanup report (reports are not ordered with the
// ledger).
func (w *ledgerWriter) PersistReport(r messages.CleanupReport) error { return w.store.PersistReport(r) }

// close lets the goroutine end once the queue is drained. It is idempotent.
func (w *ledgerWriter) close() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	w.signal()
}

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
			{Type: ledger.ResourceContainer, Name: a.in.names.Container, Role: "agent"},
			{Type: ledger.ResourceVolume, Name: a.in.names.WorkspaceVolume, Role: "workspace"},
			{Type: ledger.ResourceVolume, Name: a.in.names.ControlVolume, Role: "control"},
			{Type: ledger.ResourceVolume, Name: a.in.names.SecretsVolume, Role: "secrets"},
		},
		Created: []ledger.Resource{},
	}
	if a.in.provisioned {
		e.Created = append(e.Created,
			ledger.Resource{Type: ledger.ResourceVolume, Name: a.in.names.WorkspaceVolume, Role: "workspace"},
			ledger.Resource{Type: ledger.ResourceVolume, Name: a.in.names.ControlVolume, Role: "control"},
			ledger.Resource{Type: ledger.ResourceVolume, Name: a.in.names.SecretsVolume, Role: "secrets"})
	}
	if a.credentialsMount() != nil {
		r := ledger.Resource{Type: ledger.ResourceVolume, Name: a.in.names.CredentialsVolume, Role: "credentials"}
		e.Planned = append(e.Planned, r)
		if a.in.provisioned {
			e.Created = append(e.Created, r)
		}
	}
	if a.worker.containerID != "" {
		e.Created = append(e.Created, ledger.Resource{Type: ledger.ResourceContainer, Name: a.in.names.Container, ID: a.worker.containerID, Role: "agent"})
	}
	for _, c := range a.perAttemptCaches() {
		r := ledger.Resource{Type: ledger.ResourceVolume, Name: a.in.names.CacheVolume(c), Role: "cache:" + c}
		e.Planned = append(e.Planned, r)
		if a.in.provisioned {
			e.Created = append(e.Created, r)
		}
	}
	planned, created := a.serviceLedger()
	e.Planned = append(e.Planned, planned...)
	e.Created = append(e.Created, created...)
	e.Isolation, e.WorkerRuntime = a.in.isolation, a.createdRuntime()
	e.PeakMemory = a.worker.telemetry.Telemetry
	e.Reservation, e.Paths, e.Labels = a.ledgerSnapshot()
	if state == ledger.Active {
		e.Adoption = a.adoptionRecord()
	}
	return e
}

// writeLedger posts the attempt's ledger in state without waiting: the
// write that must precede resource creation is awaited in the provision
// step instead.
func (a *attemptActor) writeLedger(state ledger.State) {
	a.ledger.post(state, a.ledgerEntry(state))
}
