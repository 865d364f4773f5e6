package dockerops

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/host/preflight"
	"github.com/forgedev/forged/messages"
)

// An engine without AppArmor runs a container whose apparmor= option names
// a profile that does not even exist: the option is silently dropped. So
// sandbox_required takes the engine's facts from preflight and refuses an
// LSM option the engine would not enforce; an engine with AppArmor refuses
// the unknown profile itself.
func TestIntegrationSandboxRequiredNeedsTheEngineToEnforce(t *testing.T) {
	c := requireEngine(t)
	ctx := testCtx(t)
	r := preflight.NewChecker(c.raw, nil, preflight.Options{AllowRootful: true, StateRoot: t.TempDir()}).Check(ctx)
	require.True(t, r.Engine.Reachable, r.Reason)
	engine := EngineSecurity{Known: true, Seccomp: r.Features.Seccomp, LSM: r.Features.LSM}

	allowlist := filepath.Join(t.TempDir(), "allowlist.json")
	require.NoError(t, os.WriteFile(allowlist, []byte(`{"defaultAction":"SCMP_ACT_ERRNO","syscalls":[]}`), 0o600))
	const lsm = "apparmor=forged-test-no-such-profile"
	_, err := ResolveSecurityOptions(messages.PolicySandboxRequired, allowlist, lsm, engine)

	s := provision(t, "echo confined-or-not", func(spec *WorkerSpec) { spec.SecurityOpts = []string{lsm} })
	lines, res, runErr := s.run(t, ctx, "", RunLimits{})
	if slices.Contains(engine.LSM, "apparmor") {
		assert.Error(t, runErr, "an engine with AppArmor refuses an unknown profile")
		assert.NoError(t, err)
		return
	}
	require.NoError(t, runErr)
	assert.Equal(t, 0, res.ExitCode)
	assert.Equal(t, []string{"confined-or-not"}, lines, "the engine ignored the apparmor option")
	assert.Equal(t, failure.SandboxSecurityUnavailable, failure.CodeOf(err), "sandbox_required refuses what the engine would ignore: %v", err)
	if !engine.Seccomp {
		assert.Contains(t, err.Error(), "seccomp")
	}
}
