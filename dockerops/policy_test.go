package dockerops

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/messages"
)

func TestResolveSecurityOptions(t *testing.T) {
	dir := t.TempDir()
	profile := filepath.Join(dir, "seccomp.json")
	require.NoError(t, os.WriteFile(profile, []byte("{\n  \"defaultAction\": \"SCMP_ACT_ERRNO\"\n}\n"), 0o600))

	opts, err := ResolveSecurityOptions(messages.PolicySandboxRequired, " "+profile+" ", "apparmor=forge-sandbox")
	require.NoError(t, err)
	assert.Equal(t, []string{`seccomp={"defaultAction":"SCMP_ACT_ERRNO"}`, "apparmor=forge-sandbox"}, opts)

	opts, err = ResolveSecurityOptions(messages.PolicyAdoption, "", "")
	require.NoError(t, err)
	assert.Empty(t, opts)
	opts, err = ResolveSecurityOptions(messages.PolicyAdoption, "", "label=type:forge_t")
	require.NoError(t, err)
	assert.Equal(t, []string{"label=type:forge_t"}, opts)

	notJSON := filepath.Join(dir, "bad.json")
	require.NoError(t, os.WriteFile(notJSON, []byte("defaultAction: allow"), 0o600))
	huge := filepath.Join(dir, "huge.json")
	require.NoError(t, os.WriteFile(huge, []byte(`{"x":"`+strings.Repeat("a", maxSeccompProfileBytes)+`"}`), 0o600))

	cases := []struct {
		policy, seccomp, lsm string
		code                 failure.Code
	}{
		{messages.PolicySandboxRequired, "", "apparmor=x", failure.SandboxSecurityUnavailable},
		{messages.PolicySandboxRequired, profile, "", failure.SandboxSecurityUnavailable},
		{messages.PolicyAdoption, "relative/seccomp.json", "", failure.SandboxSecurityProfile},
		{messages.PolicyAdoption, "/tmp/x\n.json", "", failure.SandboxSecurityProfile},
		{messages.PolicyAdoption, "", "apparmor=unconfined; rm", failure.SandboxSecurityProfile},
		{messages.PolicyAdoption, "", "seccomp=unconfined", failure.SandboxSecurityProfile},
		{messages.PolicyAdoption, filepath.Join(dir, "missing.json"), "", failure.SandboxSecurityUnavailable},
		{messages.PolicyAdoption, notJSON, "", failure.SandboxSecurityProfile},
		{messages.PolicyAdoption, huge, "", failure.SandboxSecurityProfile},
	}
	for _, tc := range cases {
		_, err := ResolveSecurityOptions(tc.policy, tc.seccomp, tc.lsm)
		assert.Equal(t, tc.code, failure.CodeOf(err), "%+v: %v", tc, err)
	}
}
