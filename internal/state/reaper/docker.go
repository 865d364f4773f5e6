package reaper

import (
	"context"

	"github.com/forgedev/forged/dockerops"
	"github.com/forgedev/forged/messages"
)

// Object kinds, removed in this order.
const (
	KindContainer = dockerops.ResourceContainer
	KindNetwork   = dockerops.ResourceNetwork
	KindVolume    = dockerops.ResourceVolume
)

// kindOrder ranks kinds: containers before networks before volumes.
var kindOrder = map[string]int{KindContainer: 0, KindNetwork: 1, KindVolume: 2}

// Object is one managed Docker object as listed by the engine.
type Object = dockerops.ManagedObject

// Docker is what a round needs from the engine; *dockerops.Client
// implements it.
type Docker interface {
	// Teardown removes every object owned exactly by owner and reports
	// what it did (see dockerops.Client.Teardown).
	Teardown(ctx context.Context, owner dockerops.Ownership, source string) (messages.CleanupReport, error)
	// ListManaged lists every container (running or not), network and
	// volume labelled dev.forge.managed=true, of any runner.
	ListManaged(ctx context.Context) ([]Object, error)
	// RemoveManaged removes one object (a container is stopped first); an
	// object that no longer exists counts as removed.
	RemoveManaged(ctx context.Context, obj Object) error
}
