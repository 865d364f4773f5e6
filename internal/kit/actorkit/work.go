package actorkit

import (
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/extensions"
)

// workExtension is the id under which an actor system holds its Work.
var workExtension = extensions.NextExtensionID()

// Work counts the goroutines Go runs for the actors of one actor system,
// by step. Stopping an actor does not stop the work it started: a
// teardown runs on a context that survives cancellation, and its result
// merely arrives as a dead letter. The owner of the system waits on Idle
// after stopping the tree, before it closes what that work uses (the
// runner closes its Docker clients and releases the context lock only
// then).
type Work struct {
	mu    sync.Mutex
	steps map[string]int
	idle  chan struct{} // closed while nothing runs
}

// TrackWork registers a Work with system, so that every Go of its actors
// is counted. Call it before the first actor is spawned.
func TrackWork(system *actor.ActorSystem) *Work {
	w := &Work{steps: map[string]int{}, idle: make(chan struct{})}
	close(w.idle)
	system.Extensions.Register(w)
	return w
}

// ExtensionID makes Work an actor system extension.
func (w *Work) ExtensionID() extensions.ExtensionID { return workExtension }

// workOf returns the system's Work, or nil when none is registered.
func workOf(system *actor.ActorSystem) *Work {
	w, _ := system.Extensions.Get(workExtension).(*Work)
	return w
}

func (w *Work) enter(step string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.steps) == 0 {
		w.idle = make(chan struct{})
	}
	w.steps[step]++
}

func (w *Work) exit(step string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.steps[step]--; w.steps[step] == 0 {
		delete(w.steps, step)
	}
	if len(w.steps) == 0 {
		close(w.idle)
	}
}

// Idle is closed once no work runs (at once when none does). Work started
// later makes a new channel: call Idle again after starting more.
func (w *Work) Idle() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.idle
}

// Running describes the work still running, by step ("teardown ×2,
// worker"), or "" when none runs.
func (w *Work) Running() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	parts := make([]string, 0, len(w.steps))
	for step, n := range w.steps {
		if n > 1 {
			step = fmt.Sprintf("%s ×%d", step, n)
		}
		parts = append(parts, step)
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}
