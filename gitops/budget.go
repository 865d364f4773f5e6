package gitops

import (
	"strconv"
	"strings"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/kit/text"
)

// Default import budgets.
const (
	DefaultMaxObjects       = 500_000
	DefaultMaxExpandedBytes = 2 << 30
	DefaultMaxCommitDepth   = 50_000
	// DefaultMaxDeltaResultBytes bounds one delta's result: git resolves a
	// delta in memory. forged's worker writes no deltas at all.
	DefaultMaxDeltaResultBytes = 64 << 20
	// DefaultMaxWorktreeEntries and DefaultMaxWorktreeBytes bound the
	// result tree a checked-out host worktree is updated to.
	DefaultMaxWorktreeEntries = 200_000
	DefaultMaxWorktreeBytes   = 2 << 30
)

// Budget bounds what a sandbox may import. Zero fields take the defaults.
type Budget struct {
	// MaxObjects bounds the number of objects the bundle's pack holds.
	MaxObjects int
	// MaxExpandedBytes bounds the sum of their resolved sizes, and
	// separately the sum of the pack's inflated entries (see ScanPack).
	MaxExpandedBytes int64
	// MaxCommitDepth bounds the number of commits between input and result.
	MaxCommitDepth int
	// MaxDeltaResultBytes bounds the size one delta of the pack resolves to.
	MaxDeltaResultBytes int64
	// MaxWorktreeEntries and MaxWorktreeBytes bound the result tree (its
	// files, and the sum of their sizes, counting every path) that a host
	// worktree with the managed branch checked out is updated to. Beyond
	// either, the branch still moves but the worktree is left as it was.
	MaxWorktreeEntries int
	MaxWorktreeBytes   int64
}

// withDefaults fills zero (or negative) fields with the defaults.
func (b Budget) withDefaults() Budget {
	if b.MaxObjects <= 0 {
		b.MaxObjects = DefaultMaxObjects
	}
	if b.MaxExpandedBytes <= 0 {
		b.MaxExpandedBytes = DefaultMaxExpandedBytes
	}
	if b.MaxCommitDepth <= 0 {
		b.MaxCommitDepth = DefaultMaxCommitDepth
	}
	if b.MaxDeltaResultBytes <= 0 {
		b.MaxDeltaResultBytes = DefaultMaxDeltaResultBytes
	}
	if b.MaxWorktreeEntries <= 0 {
		b.MaxWorktreeEntries = DefaultMaxWorktreeEntries
	}
	if b.MaxWorktreeBytes <= 0 {
		b.MaxWorktreeBytes = DefaultMaxWorktreeBytes
	}
	return b
}

// ParseCommitDepth parses the output of `git rev-list --count input..result`
// and checks it against the budget's MaxCommitDepth (zero takes the
// default). Malformed output or a depth over budget is
// failure.SandboxOutputInvalid.
func ParseCommitDepth(out string, budget Budget) (int, error) {
	b := budget.withDefaults()
	s := strings.TrimSpace(out)
	if !isDigits(s) {
		return 0, failure.New(failure.SandboxOutputInvalid, "git commit-depth result is malformed")
	}
	depth, err := strconv.ParseInt(s, 10, 64)
	if err != nil || depth > int64(b.MaxCommitDepth) {
		return 0, failure.New(failure.SandboxOutputInvalid,
			"git result exceeds the commit-depth budget (%s commits, budget %d)", text.Ellipsis(s, 24), b.MaxCommitDepth)
	}
	return int(depth), nil
}

// isObjectID reports whether s is a full lowercase SHA-1 or SHA-256 id.
func isObjectID(s string) bool {
	return (len(s) == 40 || len(s) == 64) && isLowerHex(s)
}

func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return s != ""
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}
