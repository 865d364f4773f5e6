package reaper

import (
	"time"

	"github.com/forgedev/forged/internal/host/cgroups"
	"github.com/forgedev/forged/internal/images/imagegc"
	"github.com/forgedev/forged/internal/state/ledger"
	"github.com/forgedev/forged/messages"
)

// DefaultGrace is the youngest an object may be for the label phase to
// remove it, when Config.Grace is zero.
const DefaultGrace = 2 * time.Minute

// NoGrace, as Config.Grace, disables the grace period: only objects
// created after the round began are spared.
const NoGrace time.Duration = -1

// Config is one round's view of the world.
type Config struct {
	// RunnerID and RunnerInstanceID identify this runner and this process
	// (full lowercase UUIDs).
	RunnerID         string
	RunnerInstanceID string
	// Grace is the minimum age of an object removed by label. Zero means
	// DefaultGrace; a negative value (NoGrace) means none.
	Grace time.Duration
	// DryRun lists what the round would do and changes nothing.
	DryRun bool
	// Now is the clock; nil means time.Now. The round begins at its first
	// reading.
	Now func() time.Time
	// Live reports whether this process is running the attempt. Such an
	// attempt is never reaped. An attempt must be live from before its
	// ledger is first written until its own teardown has finished. It is
	// called from the round's goroutine, so it must be safe for concurrent
	// use. Nil means nothing is live.
	Live func(attemptID string) bool
	// ServerSnapshot is the server's list of this runner's live attempts;
	// it is used only when SnapshotAvailable is true.
	ServerSnapshot    []ServerAttempt
	SnapshotAvailable bool
	// BuildCgroups, when set, are this runner's build cgroups: the round
	// removes those a dead process left (buildcgroups.go).
	BuildCgroups *cgroups.BuildCgroups
	// Audit, when set, collects the stored build logs and attestations
	// at the end of the round (snapshot.go).
	Audit *AuditRetention
}

// SkipReason says why a round left a ledger or an object alone.
type SkipReason string

// Reasons a round skips a ledger or object.
const (
	SkipLive              SkipReason = "attempt is running in this process"
	SkipLeaseCurrent      SkipReason = "attempt lease is current"
	SkipServerHolds       SkipReason = "server holds the attempt live"
	SkipForeignRunner     SkipReason = "belongs to another runner"
	SkipIncompleteLabels  SkipReason = "labels are incomplete or inexact"
	SkipUnknownAge        SkipReason = "creation time unknown"
	SkipNotBeforeSweep    SkipReason = "not created before the round began"
	SkipTooYoung          SkipReason = "younger than the grace period"
	SkipForeignInstance   SkipReason = "another runner instance may still run the attempt"
	SkipUnknownObjectKind SkipReason = "unknown object kind"
)

// Skip is one ledger (Object zero) or object the round left alone.
type Skip struct {
	AttemptID string     `json:"attemptId"`
	Object    Object     `json:"object"`
	Reason    SkipReason `json:"reason"`
}

// Round is the account of one round. Its JSON (forged reap, POST
// /v1/reap) is camelCase like every other document forged prints.
type Round struct {
	// Started is when the round began; nothing created later is removed.
	Started time.Time `json:"started"`
	// Reaped lists the attempts whose ledger was reaped and removed.
	Reaped []string `json:"reaped"`
	// Degraded lists the attempts whose teardown or removal failed; they
	// are retried next round.
	Degraded []string `json:"degraded"`
	// Removed lists the objects removed by label.
	Removed []Object `json:"removed"`
	// WouldReap and WouldRemove are what a dry run would reap (ledgers)
	// and remove (objects, including those the reaped ledgers own).
	WouldReap   []string `json:"wouldReap"`
	WouldRemove []Object `json:"wouldRemove"`
	// Skipped lists what was left alone, and why.
	Skipped []Skip `json:"skipped"`
	// Corrupt lists ledgers that cannot be trusted; they are left on disk.
	Corrupt []ledger.Corrupt `json:"corrupt"`
	// RemovedDirs lists the per-attempt directories of the state root
	// (attempts/<hex>, quarantine/<hex>) removed because no running
	// attempt and no ledger owns them; WouldRemoveDirs, those a dry run
	// would remove.
	RemovedDirs     []string `json:"removedDirs,omitempty"`
	WouldRemoveDirs []string `json:"wouldRemoveDirs,omitempty"`
	// BuildCgroups is what the round did with this runner's build
	// cgroups (Config.BuildCgroups).
	BuildCgroups *cgroups.BuildCgroupReap `json:"buildCgroups,omitempty"`
	// Reports are the cleanup reports stored during the round.
	Reports []messages.CleanupReport `json:"reports"`
	// Audit is what the round did with the stored build logs and
	// attestations (Config.Audit).
	Audit *imagegc.AuditReport `json:"audit,omitempty"`
}
