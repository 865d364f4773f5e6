//go:build !fleet

package main

import (
	"errors"
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/forgedev/forged/internal/daemon/httpapi"
	"github.com/forgedev/forged/internal/daemon/runner"
)

// fleetLinked: this is the lean build (forged), which does not link the
// fleet's stack; a command given fleet settings hands itself to the fleet
// build beside it (execFleetBuild), so a daemon that runs alone does not
// carry the fleet's code in its memory (BENCHMARKS.md, B5).
const fleetLinked = false

// errFleetNotLinked is returned where the lean build would act on fleet
// settings; the commands hand themselves over before that.
var errFleetNotLinked = errors.New("fleet: this forged is the lean build, without the fleet: run forged-fleet")

func listFleet(*cobra.Command, *fleetFlags, bool) error { return errFleetNotLinked }

// fleetDaemon is nil: the lean build's daemon always runs alone.
type fleetDaemon struct{}

func (f *fleetFlags) prepareDaemon(*runner.Config, *slog.Logger) (*fleetDaemon, error) {
	if f.enabled() {
		return nil, errFleetNotLinked
	}
	return nil, nil
}

func (*fleetDaemon) join(r *runner.Runner, _ *slog.Logger) (httpapi.Runner, error) { return r, nil }
func (*fleetDaemon) setDraining(bool)                                              {}
func (*fleetDaemon) leave()                                                        {}
