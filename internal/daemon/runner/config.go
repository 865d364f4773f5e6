package runner

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"golang.org/x/sys/unix"

	"github.com/forgedev/forged/gitops"
	"github.com/forgedev/forged/internal/daemon/metrics"
	"github.com/forgedev/forged/internal/kit/clock"
	"github.com/forgedev/forged/internal/kit/ids"
	"github.com/forgedev/forged/messages"
	"github.com/forgedev/forged/supervisor"
)

// resolve fills in the defaults, checks what must be given, prepares the
// state root and finds the worker binary: everything New needs before it
// opens anything. It returns the worker binary's digest.
func (cfg Config) resolve() (Config, string, error) {
	if cfg.Slots <= 0 {
		cfg.Slots = 1
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.System{}
	}
	if cfg.SandboxUIDBase == 0 {
		cfg.SandboxUIDBase = supervisor.DefaultUIDBase
	}
	if err := supervisor.ValidateUIDRange(cfg.SandboxUIDBase, cfg.Slots); err != nil {
		return cfg, "", fmt.Errorf("runner: %w (--sandbox-uid-base)", err)
	}
	if cfg.QueueLimit < 0 {
		cfg.QueueLimit = 0
	}
	if cfg.SampleInterval > MaxSampleInterval {
		return cfg, "", fmt.Errorf("runner: the sample interval %s is above %s (the telemetry's bound)", cfg.SampleInterval, MaxSampleInterval)
	}
	switch cfg.Isolation {
	case "":
		cfg.Isolation = messages.IsolationRunc
	case messages.IsolationRunc, messages.IsolationGVisor:
	default:
		// Never a silent fall back to less isolation than asked for.
		return cfg, "", fmt.Errorf("runner: isolation %q is neither %s nor %s (--isolation)", cfg.Isolation, messages.IsolationRunc, messages.IsolationGVisor)
	}
	switch cfg.SandboxRequiredIsolation {
	case "", messages.IsolationRunc, messages.IsolationGVisor:
	default:
		return cfg, "", fmt.Errorf("runner: sandbox_required isolation %q is neither %s nor %s (--sandbox-required-isolation)", cfg.SandboxRequiredIsolation, messages.IsolationRunc, messages.IsolationGVisor)
	}
	if cfg.BuildPermits <= 0 {
		cfg.BuildPermits = DefaultBuildPermits(runtime.NumCPU(), hostMemoryBytes())
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.CloseTimeout <= 0 {
		cfg.CloseTimeout = DefaultCloseTimeout
	}
	if cfg.StateRoot == "" {
		return cfg, "", errors.New("runner: a state root is required")
	}
	if cfg.ManagedNamespace == "" {
		cfg.ManagedNamespace = messages.DefaultManagedNamespace
	}
	if !messages.ValidManagedNamespace(cfg.ManagedNamespace) {
		return cfg, "", fmt.Errorf("runner: managed namespace %q is not a refs/heads/…/ prefix", cfg.ManagedNamespace)
	}
	stateRoot, err := filepath.Abs(cfg.StateRoot)
	if err != nil {
		return cfg, "", fmt.Errorf("runner: state root: %w", err)
	}
	if err := prepareStateRoot(stateRoot); err != nil {
		return cfg, "", err
	}
	cfg.StateRoot = stateRoot
	worker, digest, err := resolveWorkerBinary(cfg.WorkerBinary)
	if err != nil {
		return cfg, "", err
	}
	cfg.WorkerBinary = worker
	if cfg.RunnerID == "" {
		if cfg.RunnerID, err = LoadRunnerID(stateRoot); err != nil {
			return cfg, "", err
		}
	}
	if cfg.RunnerInstanceID == "" {
		cfg.RunnerInstanceID = ids.NewUUID()
	}
	if cfg.LockRoot == "" {
		cfg.LockRoot = filepath.Join(os.TempDir(), "forged")
	}
	if cfg.Metrics == nil {
		cfg.Metrics = metrics.New()
	}
	if cfg.PublishPolicy == nil {
		policy := gitops.DefaultPublishPolicy()
		cfg.PublishPolicy = &policy
	}
	if err := cfg.PublishPolicy.Validate(); err != nil {
		return cfg, "", fmt.Errorf("runner: publish policy: %w", err)
	}
	return cfg, digest, nil
}

// DefaultBuildPermits is the build permit pool's size when the operator
// gives none: one build per two cores and per 4 GiB of memory (a build's
// own limit is 3 GiB, plus room for the attempts beside it), at least 1
// and at most 4. A 2-core host builds one image at a time, as before the
// pool existed.
func DefaultBuildPermits(cpus int, memoryBytes uint64) int {
	const perBuild = 4 << 30
	n := min(cpus/2, int(min(memoryBytes/perBuild, 64)))
	return max(1, min(n, 4))
}

// hostMemoryBytes is the host's physical memory (0 if unknown).
func hostMemoryBytes() uint64 {
	var info unix.Sysinfo_t
	if err := unix.Sysinfo(&info); err != nil {
		return 0
	}
	return uint64(info.Totalram) * uint64(info.Unit)
}

// MaxSampleInterval is the longest memory sampling period: the seed's
// telemetry bound (sampleIntervalMs at most 30,000). A longer one would
// make every attempt's telemetry invalid, so it is refused at start.
const MaxSampleInterval = 30 * time.Second
