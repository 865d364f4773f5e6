package main

import (
	"log/slog"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/forgedev/forged/runner"
)

// runnerFlags are the flags shared by the commands that embed forged.
type runnerFlags struct {
	stateRoot      string
	workerBinary   string
	slots          int
	queue          int
	seccompProfile string
	lsmOption      string
	verbose        bool
}

func (f *runnerFlags) register(cmd *cobra.Command) {
	defaultState := filepath.Join(os.TempDir(), "forged-state")
	if dir, err := os.UserCacheDir(); err == nil {
		defaultState = filepath.Join(dir, "forged")
	}
	cmd.Flags().StringVar(&f.stateRoot, "state-root", defaultState, "forged's private state directory")
	cmd.Flags().StringVar(&f.workerBinary, "worker-binary", "", "static forged binary to put into sandbox images (default: this executable)")
	cmd.Flags().IntVar(&f.slots, "slots", 2, "attempts that may run at once")
	cmd.Flags().IntVar(&f.queue, "queue", 16, "attempts that may wait for a slot")
	cmd.Flags().StringVar(&f.seccompProfile, "seccomp-profile", "", "absolute path of a seccomp profile for workers (required with sandbox_required)")
	cmd.Flags().StringVar(&f.lsmOption, "lsm", "", "LSM security option for workers, e.g. apparmor=NAME (required with sandbox_required)")
	cmd.Flags().BoolVarP(&f.verbose, "verbose", "v", false, "debug logging")
}

func (f *runnerFlags) config(logger *slog.Logger) runner.Config {
	return runner.Config{
		Slots:          f.slots,
		QueueLimit:     f.queue,
		StateRoot:      f.stateRoot,
		WorkerBinary:   f.workerBinary,
		SeccompProfile: f.seccompProfile,
		LSMOption:      f.lsmOption,
		Logger:         logger,
	}
}

func (f *runnerFlags) logLevel() slog.Level {
	if f.verbose {
		return slog.LevelDebug
	}
	return slog.LevelWarn
}
