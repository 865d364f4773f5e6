package gitops

import (
	"strconv"
	"strings"

	"github.com/forgedev/forged/failure"
)

// Default import budgets.
const (
	DefaultMaxObjects       = 500_000
	DefaultMaxExpandedBytes = 2 << 30
	DefaultMaxCommitDepth   = 50_000
)

// Budget bounds what a sandbox may import. Zero fields take the defaults.
type Budget struct {
	// MaxObjects bounds the number of objects the bundle brings in.
	MaxObjects int
	// MaxExpandedBytes bounds the sum of their inflated sizes.
	MaxExpandedBytes int64
	// MaxCommitDepth bounds the number of commits between input and result.
	MaxCommitDepth int
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
	return b
}

// Inventory summarises the objects a bundle brought in.
type Inventory struct {
	Objects       int
	ExpandedBytes int64
}

// ParseObjectInventory checks the output of
// `git cat-file --batch-all-objects --batch-check='%(objectname) %(objecttype) %(objectsize)'`
// against the budget (zero fields take the defaults). Every line must be a
// full lowercase object id (one hash length throughout), a type among blob,
// tree, commit and tag, and a decimal size; ids must be unique; there must
// be at least one object, at most MaxObjects, and their sizes must sum to at
// most MaxExpandedBytes. Violations are failure.SandboxOutputInvalid.
func ParseObjectInventory(out string, budget Budget) (Inventory, error) {
	b := budget.withDefaults()
	out = strings.TrimSuffix(out, "\n")
	if out == "" {
		return Inventory{}, failure.New(failure.SandboxOutputInvalid, "git bundle brought in no objects")
	}
	// Count first so that a huge inventory is refused before it is indexed.
	if n := strings.Count(out, "\n") + 1; n > b.MaxObjects {
		return Inventory{}, failure.New(failure.SandboxOutputInvalid,
			"git bundle exceeds the object-count budget (%d objects, budget %d)", n, b.MaxObjects)
	}
	var inv Inventory
	idLen := 0
	seen := make(map[string]struct{})
	for lineNo, line := range strings.Split(out, "\n") {
		id, size, ok := parseInventoryLine(line)
		if ok && idLen == 0 {
			idLen = len(id)
		}
		if !ok || len(id) != idLen {
			return Inventory{}, failure.New(failure.SandboxOutputInvalid, "git object inventory line %d is malformed", lineNo+1)
		}
		if _, dup := seen[id]; dup {
			return Inventory{}, failure.New(failure.SandboxOutputInvalid, "git object inventory lists %s twice", id)
		}
		seen[id] = struct{}{}
		if size > b.MaxExpandedBytes-inv.ExpandedBytes {
			return Inventory{}, failure.New(failure.SandboxOutputInvalid,
				"git bundle exceeds the expanded-object byte budget (%d bytes)", b.MaxExpandedBytes)
		}
		inv.ExpandedBytes += size
		inv.Objects++
	}
	return inv, nil
}

// parseInventoryLine splits "<id> <type> <size>". A size too large for an
// int64 is reported as the maximum, which no budget admits.
func parseInventoryLine(line string) (id string, size int64, ok bool) {
	f := strings.Split(line, " ")
	if len(f) != 3 || !isObjectID(f[0]) || !isDigits(f[2]) {
		return "", 0, false
	}
	switch f[1] {
	case "blob", "tree", "commit", "tag":
	default:
		return "", 0, false
	}
	size, err := strconv.ParseInt(f[2], 10, 64)
	if err != nil {
		size = 1<<63 - 1 // only overflow is possible after isDigits
	}
	return f[0], size, true
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
			"git result exceeds the commit-depth budget (%s commits, budget %d)", truncate(s, 24), b.MaxCommitDepth)
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
