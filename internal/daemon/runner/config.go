package runner

import (
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/forgedev/forged/actors"
	"github.com/forgedev/forged/gitops"
	"github.com/forgedev/forged/internal/daemon/metrics"
	"github.com/forgedev/forged/internal/host/preflight"
	"github.com/forgedev/forged/internal/kit/clock"
	"github.com/forgedev/forged/internal/kit/ids"
	"github.com/forgedev/forged/internal/sandbox/caches"
	"github.com/forgedev/forged/internal/sandbox/egress"
	"github.com/forgedev/forged/internal/sandbox/services"
	"github.com/forgedev/forged/internal/sandbox/timelimit"
	"github.com/forgedev/forged/messages"
)

// Config configures an embedded forged.
type Config struct {
	// Slots and QueueLimit size admission.
	Slots      int
	QueueLimit int
	// StateRoot is forged's private state directory (created 0700).
	StateRoot string
	// WorkerBinary is the static forged binary put into sandbox images;
	// empty means the running executable, which must then be static.
	WorkerBinary string
	// SeccompProfile and LSMOption are passed to every worker.
	SeccompProfile string
	LSMOption      string
	Logger         *slog.Logger
	// WrapDocker, when set, wraps the Docker client the attempts use. It
	// exists for fault-injection tests against the real engine.
	WrapDocker func(actors.Docker) actors.Docker
	// AllowRootful accepts a Docker engine that does not run rootless.
	AllowRootful bool
	// Capacity sizes one attempt and the host's reserve for the preflight
	// admission; its MaxSlots is Slots.
	Capacity preflight.CapacityPolicy
	// Disk bounds the disk pressure of the Docker root directory.
	Disk preflight.DiskPolicy
	// SampleInterval is the memory sampler's period (default 250ms).
	SampleInterval time.Duration
	// Limits are the attempts' time limits (timelimit.Operator validates
	// the operator's); zero takes the defaults, 8 h and 10 min.
	Limits timelimit.Limits
	// LockRoot holds the one-forged-per-Docker-context lock (default
	// TMPDIR/forged). Every forged on a host must use the same one.
	LockRoot string
	// RunnerID is this runner's id (default: kept in the state root);
	// RunnerInstanceID identifies this process (default: a new UUID).
	RunnerID         string
	RunnerInstanceID string
	// ReapInterval and ReapGrace tune the reaper (defaults 1 minute and 2
	// minutes: labelled resources younger than the grace are never reaped).
	ReapInterval time.Duration
	ReapGrace    time.Duration
	// ImageGC, when set, starts the image collector (package collector):
	// on its interval, when the preflight disk turns low, and on
	// CollectImagesNow, guarded by the attempts' image keys. Nil: off.
	ImageGC *ImageGCConfig
	// Redeemer redeems publication grants for bridge_push; nil refuses
	// bridge_push. ValidateRemote checks the redeemed remotes (nil: GitHub
	// only, as the seed requires). redeem.New builds both from the
	// operator's configuration (a credential helper or an HTTPS endpoint,
	// and the allowed hosts), as `forged run` and `forged daemon` do.
	Redeemer       actors.CredentialRedeemer
	ValidateRemote gitops.RemoteValidator
	// Services is the operator's service catalogue (nil: contracts that
	// declare services are refused). ServiceReadyWithin and
	// ServicesReadyWithin override the readiness caps (defaults 60s per
	// service, 90s in all).
	Services            *services.Catalogue
	ServiceReadyWithin  time.Duration
	ServicesReadyWithin time.Duration
	// Egress is the egress proxy's configuration for public_allowlist
	// (Enabled false refuses it; its image is the Services catalogue's
	// egress entry). AllowOpenPublic lets open_public attempts run.
	Egress          egress.Options
	AllowOpenPublic bool
	// Caches is which contract cache modes are allowed (zero: both);
	// CacheBytes bounds each per-attempt cache volume when volumes are
	// bounded (zero: caches.DefaultPerAttemptBytes). See package caches.
	Caches     caches.Policy
	CacheBytes int64
	// Metrics is this runner's instrumentation (nil: a new one). One
	// Metrics serves one runner.
	Metrics *metrics.Metrics
	// ProviderAuth prepares the agents' provider credentials (see package
	// providerauth); nil refuses every dispatch that names a provider with
	// sandbox_auth_unavailable.
	ProviderAuth actors.ProviderAuth
	// ImageVerifier is the image-signature hook (imagesig.New); nil
	// verifies nothing: sandbox_required is refused with
	// sandbox_image_signature_invalid, adoption warns.
	ImageVerifier actors.ImageVerifier
	// ManagedNamespace is the ref prefix ("refs/heads/…/") every dispatch's
	// worktree key must lie below; empty means refs/heads/forge/. Other
	// dispatches are refused with dispatch_invalid.
	ManagedNamespace string
	// SkipStartupReap leaves the previous process's ledgers alone at start
	// (for a dry run that must change nothing).
	SkipStartupReap bool
	// Clock drives every timer of the runner (capacity refresh and the
	// preflight report's age, reaper, lease watchdogs, samplers) and its
	// timestamps; nil means clock.System. Tests inject a clock.Manual.
	Clock clock.Clock
	// CloseTimeout bounds how long Close waits for the actor tree's work
	// still in flight (a teardown, a crashed attempt's cleanup) before it
	// gives up (default DefaultCloseTimeout); see Close.
	CloseTimeout time.Duration
}

// DefaultCloseTimeout is Close's default wait for the tree's work in
// flight: longer than one teardown's own bound (dockerops' 3 minutes), so
// that a teardown which honours its bound always finishes first.
const DefaultCloseTimeout = 4 * time.Minute

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
	if cfg.QueueLimit < 0 {
		cfg.QueueLimit = 0
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
	return cfg, digest, nil
}

// resolveWorkerBinary returns the worker binary's path and sha256, refusing
// a dynamically linked binary: the sandbox image has no libc to offer it.
func resolveWorkerBinary(path string) (string, string, error) {
	if path == "" {
		self, err := os.Executable()
		if err != nil {
			return "", "", fmt.Errorf("worker binary: %w", err)
		}
		path = self
	}
	f, err := elf.Open(path)
	if err != nil {
		return "", "", fmt.Errorf("worker binary %s: %w", path, err)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			f.Close()
			return "", "", fmt.Errorf("worker binary %s is dynamically linked: build forged with CGO_ENABLED=0 or pass --worker-binary", path)
		}
	}
	f.Close()
	file, err := os.Open(path)
	if err != nil {
		return "", "", fmt.Errorf("worker binary: %w", err)
	}
	defer file.Close()
	h := sha256.New()
	if _, err := io.Copy(h, file); err != nil {
		return "", "", fmt.Errorf("worker binary digest: %w", err)
	}
	return path, hex.EncodeToString(h.Sum(nil)), nil
}

// prepareStateRoot creates the state root, or tightens an existing one, to
// mode 0700: it holds ledgers, attempt inputs and the daemon's socket. A
// state root that is not a directory owned by this process's uid is
// refused.
func prepareStateRoot(path string) error {
	if err := os.MkdirAll(path, 0o700); err != nil {
		return fmt.Errorf("runner: state root: %w", err)
	}
	info, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("runner: state root: %w", err)
	}
	if !info.IsDir() {
		return fmt.Errorf("runner: state root %s is not a directory", path)
	}
	if st, ok := info.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Getuid() {
		return fmt.Errorf("runner: state root %s is owned by uid %d, not by forged's uid %d", path, st.Uid, os.Getuid())
	}
	if info.Mode().Perm() != 0o700 {
		if err := os.Chmod(path, 0o700); err != nil {
			return fmt.Errorf("runner: tighten state root: %w", err)
		}
	}
	return nil
}
