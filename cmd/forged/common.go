package main

import (
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"github.com/forgedev/forged/messages"
	"github.com/forgedev/forged/preflight"
	"github.com/forgedev/forged/runner"
	"github.com/forgedev/forged/services"
)

// runnerFlags are the flags shared by the commands that embed forged.
type runnerFlags struct {
	stateRoot      string
	workerBinary   string
	slots          int
	queue          int
	seccompProfile string
	lsmOption      string
	managedNS      string
	verbose        bool
	preflight      preflightFlags
	publish        publishFlags
}

// preflightFlags are the admission settings shared with `forged preflight`.
type preflightFlags struct {
	allowRootful      bool
	hostReservedCores int
	cpuMillis         int64
	serviceCatalogue  string
	serviceMemory     int64
}

func (p *preflightFlags) register(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&p.allowRootful, "allow-rootful", false, "accept a Docker engine that does not run rootless")
	cmd.Flags().IntVar(&p.hostReservedCores, "host-reserved-cores", 1, "CPU cores kept for the host (0 keeps none)")
	cmd.Flags().Int64Var(&p.cpuMillis, "cpu-millis-per-attempt", 2000, "CPU share one attempt needs for admission")
	cmd.Flags().StringVar(&p.serviceCatalogue, "service-catalogue", os.Getenv("FORGED_SERVICE_CATALOGUE"), "the service catalogue (scripts/service-images.sh writes bin/services.tsv); without one, contracts declaring services are refused")
	cmd.Flags().Int64Var(&p.serviceMemory, "service-memory-per-attempt", 0, "service memory each slot is sized with, in bytes (default 2 GiB with a catalogue, 0 without)")
}

// services loads the service catalogue, when one is configured.
func (p *preflightFlags) services() (*services.Catalogue, error) {
	if p.serviceCatalogue == "" {
		return nil, nil
	}
	return services.Load(p.serviceCatalogue)
}

func (p *preflightFlags) policy(maxSlots int) preflight.CapacityPolicy {
	reserved := p.hostReservedCores
	if reserved == 0 {
		reserved = -1 // the policy's zero value means the default of one core
	}
	serviceMemory := p.serviceMemory
	if serviceMemory <= 0 && p.serviceCatalogue != "" {
		serviceMemory = 2 << 30
	}
	return preflight.CapacityPolicy{MaxSlots: maxSlots, HostReservedCores: reserved, CPUMillisPerAttempt: p.cpuMillis, ServiceMemoryBytes: serviceMemory}
}

func (f *runnerFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.stateRoot, "state-root", defaultStateRoot(), "forged's private state directory")
	cmd.Flags().StringVar(&f.workerBinary, "worker-binary", "", "static forged binary to put into sandbox images (default: this executable)")
	cmd.Flags().IntVar(&f.slots, "slots", 2, "attempts that may run at once")
	cmd.Flags().IntVar(&f.queue, "queue", 16, "attempts that may wait for a slot")
	cmd.Flags().StringVar(&f.seccompProfile, "seccomp-profile", "", "absolute path of a seccomp profile for workers (required with sandbox_required)")
	cmd.Flags().StringVar(&f.lsmOption, "lsm", "", "LSM security option for workers, e.g. apparmor=NAME (required with sandbox_required)")
	cmd.Flags().StringVar(&f.managedNS, "managed-namespace", messages.DefaultManagedNamespace, "ref prefix every dispatch's worktreeKey must lie below (refs/heads/…/)")
	cmd.Flags().BoolVarP(&f.verbose, "verbose", "v", false, "debug logging")
	f.preflight.register(cmd)
	f.publish.register(cmd)
}

func (f *runnerFlags) config(logger *slog.Logger) runner.Config {
	return runner.Config{
		Slots:            f.slots,
		QueueLimit:       f.queue,
		StateRoot:        f.stateRoot,
		WorkerBinary:     f.workerBinary,
		SeccompProfile:   f.seccompProfile,
		LSMOption:        f.lsmOption,
		ManagedNamespace: f.managedNS,
		Logger:           logger,
		AllowRootful:     f.preflight.allowRootful,
		Capacity:         f.preflight.policy(f.slots),
	}
}

func (f *runnerFlags) logLevel() slog.Level {
	if f.verbose {
		return slog.LevelDebug
	}
	return slog.LevelWarn
}
