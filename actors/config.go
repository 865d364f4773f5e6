package actors

import (
	"os"
	"time"

	"github.com/forgedev/forged/dockerops"
	"github.com/forgedev/forged/internal/kit/clock"
	"github.com/forgedev/forged/internal/sandbox/caches"
	"github.com/forgedev/forged/internal/sandbox/egress"
	"github.com/forgedev/forged/internal/sandbox/services"
	"github.com/forgedev/forged/internal/sandbox/timelimit"
)

// AttemptConfig is the operator configuration every attempt shares.
type AttemptConfig struct {
	// StateRoot is forged's private state directory; attempts work under
	// StateRoot/attempts/<attempt hex>.
	StateRoot string
	// HostKey seals the attempt's control key in its ledger
	// (ledger.Store.HostKey), so that a restarted forged can re-adopt it;
	// nil: attempts are not re-adoptable.
	HostKey []byte
	// WorkerBinary is the static forged-worker binary copied into the agent
	// image; WorkerDigest is its sha256 (computed once at start-up), the
	// image key's worker input.
	WorkerBinary string
	WorkerDigest string
	// Platform is part of the image cache key (e.g. "linux/amd64").
	Platform string
	// SeccompProfile (an absolute path to a JSON profile) and LSMOption
	// (apparmor=… or label=…) are the operator's extra security options;
	// sandbox_required refuses to run without both.
	SeccompProfile string
	LSMOption      string
	// Limits are the operator's time limits (hard wall and idle); a
	// dispatch's task timeout can only shorten them. Zero: the defaults.
	Limits timelimit.Limits
	// LimitGrace is how long the worker may take, after the host saw a
	// time limit pass, to stop its task and write its output before the
	// host stops the container. Default 30s.
	LimitGrace time.Duration
	// BuildLimits confine image builds (zero: no network, the dockerops
	// defaults).
	BuildLimits dockerops.BuildLimits
	// AllowBuildPulls lets a build start while an upstream image is absent
	// (the engine then pulls it); never under sandbox_required.
	AllowBuildPulls bool
	// SampleInterval is the memory sampler's period.
	SampleInterval time.Duration
	// Services is the operator's catalogue of digest-pinned service
	// images; nil refuses every contract that declares a service.
	Services *services.Catalogue
	// ServiceReadyWithin caps one service's readiness probe (default 60s,
	// as the seed); ServicesReadyWithin caps all of an attempt's services
	// together, from the first start to the last ready (default 90s).
	ServiceReadyWithin  time.Duration
	ServicesReadyWithin time.Duration
	// Egress is the operator's egress proxy configuration for
	// networkPolicy.mode public_allowlist (its image is the catalogue's
	// `egress` entry); Egress.Enabled false refuses public_allowlist with
	// sandbox_egress_proxy_unavailable.
	Egress egress.Options
	// AllowOpenPublic lets open_public attempts run, on a routed attempt
	// network; never under sandbox_required (policy_mismatch).
	AllowOpenPublic bool
	// Caches is which contract cache modes the operator allows (zero: both,
	// as the seed). CacheBytes is the size of each per-attempt cache volume
	// when volumes are bounded (package quota); zero is
	// caches.DefaultPerAttemptBytes.
	Caches     caches.Policy
	CacheBytes int64
	// Clock drives every timer of the attempt tree (lease watchdog,
	// sampler) and its timestamps; nil means clock.System. Deadlines of
	// engine and git calls are those of dockerops.Options and gitops.
	Clock clock.Clock
	// Confinement returns the engine's and host's confinement facts from
	// the latest preflight report; nil means unknown, which refuses
	// sandbox_required and every attempt that needs a network.
	Confinement func() Confinement
	// RequireBoundedStorage refuses every attempt, adoption too, when
	// attempt volumes are not bounded (sandbox_required always is).
	RequireBoundedStorage bool

	// removeAll removes an attempt's private work directory; nil means
	// os.RemoveAll (tests slow it down).
	removeAll func(string) error
}

func (c AttemptConfig) withDefaults() AttemptConfig {
	if c.SampleInterval <= 0 {
		c.SampleInterval = 250 * time.Millisecond
	}
	if c.ServiceReadyWithin <= 0 {
		c.ServiceReadyWithin = 60 * time.Second
	}
	if c.ServicesReadyWithin <= 0 {
		c.ServicesReadyWithin = 90 * time.Second
	}
	if c.LimitGrace <= 0 {
		c.LimitGrace = 30 * time.Second
	}
	if c.Clock == nil {
		c.Clock = clock.System{}
	}
	if c.Confinement == nil {
		c.Confinement = unknownConfinement
	}
	if c.CacheBytes <= 0 {
		c.CacheBytes = caches.DefaultPerAttemptBytes
	}
	if c.Platform == "" {
		c.Platform = "linux/amd64"
	}
	if c.removeAll == nil {
		c.removeAll = os.RemoveAll
	}
	return c
}
