package actors

import (
	"time"

	"github.com/forgedev/forged/dockerops"
)

// AttemptConfig is the operator configuration every attempt shares.
type AttemptConfig struct {
	// StateRoot is forged's private state directory; attempts work under
	// StateRoot/attempts/<attempt hex>.
	StateRoot string
	// WorkerBinary is the static forged binary copied into the agent image;
	// WorkerDigest is its sha256 (computed once at start-up).
	WorkerBinary string
	WorkerDigest string
	// Platform is part of the image cache key (e.g. "linux/amd64").
	Platform string
	// SeccompProfile (an absolute path to a JSON profile) and LSMOption
	// (apparmor=… or label=…) are the operator's extra security options;
	// sandbox_required refuses to run without both.
	SeccompProfile string
	LSMOption      string
	// BuildLimits confine image builds (zero: no network, the dockerops
	// defaults).
	BuildLimits dockerops.BuildLimits
	// SampleInterval is the memory sampler's period.
	SampleInterval time.Duration
	// TeardownTimeout bounds the whole teardown, which runs on a context
	// that survives cancellation.
	TeardownTimeout time.Duration
	// StepTimeout bounds each host step (prepare, provision, collect, import).
	StepTimeout time.Duration
	// Clock drives the lease watchdog and sampler; nil means SystemClock.
	Clock Clock
}

func (c AttemptConfig) withDefaults() AttemptConfig {
	if c.SampleInterval <= 0 {
		c.SampleInterval = 250 * time.Millisecond
	}
	if c.TeardownTimeout <= 0 {
		c.TeardownTimeout = 2 * time.Minute
	}
	if c.StepTimeout <= 0 {
		c.StepTimeout = 10 * time.Minute
	}
	if c.Clock == nil {
		c.Clock = SystemClock{}
	}
	if c.Platform == "" {
		c.Platform = "linux/amd64"
	}
	return c
}
