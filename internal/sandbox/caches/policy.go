package caches

import (
	"fmt"
	"strings"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/sandbox/contract"
)

// DefaultPerAttemptBytes is the size of each per-attempt cache volume when
// volumes are bounded (package quota), unless the operator sets another
// (`--cache-bytes`).
const DefaultPerAttemptBytes = 2 << 30

// Policy is which cache modes the operator allows. The zero Policy allows
// both, as the seed does.
type Policy struct {
	ForbidPerAttempt bool
	ForbidReadOnly   bool
}

// ParseModes reads the operator's list of allowed modes: a comma-separated
// list of per_attempt and readonly, or "none".
func ParseModes(s string) (Policy, error) {
	p := Policy{ForbidPerAttempt: true, ForbidReadOnly: true}
	s = strings.TrimSpace(s)
	if s == "none" {
		return p, nil
	}
	for _, m := range strings.Split(s, ",") {
		switch strings.TrimSpace(m) {
		case contract.CachePerAttempt:
			p.ForbidPerAttempt = false
		case contract.CacheReadOnly:
			p.ForbidReadOnly = false
		default:
			return Policy{}, fmt.Errorf("cache mode %q is not one of %s, %s (or none)", m, contract.CachePerAttempt, contract.CacheReadOnly)
		}
	}
	return p, nil
}

// String is the list ParseModes reads.
func (p Policy) String() string {
	var modes []string
	if !p.ForbidPerAttempt {
		modes = append(modes, contract.CachePerAttempt)
	}
	if !p.ForbidReadOnly {
		modes = append(modes, contract.CacheReadOnly)
	}
	if len(modes) == 0 {
		return "none"
	}
	return strings.Join(modes, ",")
}

// Check refuses, with failure.SandboxCachesUnsupported, the first declared
// cache whose mode the policy forbids.
func (p Policy) Check(cs []contract.Cache) error {
	for _, c := range cs {
		if (c.Mode == contract.CachePerAttempt && p.ForbidPerAttempt) || (c.Mode == contract.CacheReadOnly && p.ForbidReadOnly) {
			return failure.New(failure.SandboxCachesUnsupported,
				"the contract declares the %s cache as %s; this runner allows cache modes: %s", c.Name, c.Mode, p)
		}
	}
	return nil
}
