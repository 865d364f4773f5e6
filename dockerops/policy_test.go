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

// enforcing is an engine with seccomp and both LSMs.
var enforcing = EngineSecurity{Known: true, Seccomp: true, LSM: []string{"apparmor", "selinux"}}

func TestResolveSecurityOptions(t *testing.T) {
	dir := t.TempDir()
	profile := filepath.Join(dir, "seccomp.json")
	require.NoError(t, os.WriteFile(profile, []byte("{\n  \"defaultAction\": \"SCMP_ACT_ERRNO\"\n}\n"), 0o600))

	opts, err := ResolveSecurityOptions(messages.PolicySandboxRequired, " "+profile+" ", "apparmor=forge-sandbox", enforcing)
	require.NoError(t, err)
	assert.Equal(t, []string{`seccomp={"defaultAction":"SCMP_ACT_ERRNO"}`, "apparmor=forge-sandbox"}, opts)

	opts, err = ResolveSecurityOptions(messages.PolicyAdoption, "", "", EngineSecurity{})
	require.NoError(t, err)
	assert.Empty(t, opts)
	opts, err = ResolveSecurityOptions(messages.PolicyAdoption, "", "label=type:forge_t", EngineSecurity{})
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
		_, err := ResolveSecurityOptions(tc.policy, tc.seccomp, tc.lsm, enforcing)
		assert.Equal(t, tc.code, failure.CodeOf(err), "%+v: %v", tc, err)
	}
}

// sandbox_required refuses every way of switching confinement off, and an
// engine that would not apply the profiles.
func TestSandboxRequiredRefusesConfinementOff(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
		return path
	}
	allowlist := write("allowlist.json", `{"defaultAction":"SCMP_ACT_ERRNO","syscalls":[{"names":["read","write"],"action":"SCMP_ACT_ALLOW"}]}`)
	required := messages.PolicySandboxRequired

	_, err := ResolveSecurityOptions(required, allowlist, "apparmor=forge", enforcing)
	require.NoError(t, err)
	_, err = ResolveSecurityOptions(required, allowlist, "label=type:forge_t,level:s0", enforcing)
	require.NoError(t, err)
	// As Docker's default profile: mount and friends only with a
	// capability the worker never has, or refused with an errno.
	gated := write("gated.json", `{"defaultAction":"SCMP_ACT_ERRNO","syscalls":[{"names":["read"],"action":"SCMP_ACT_ALLOW"},`+
		`{"names":["mount","umount2","unshare","setns","bpf"],"action":"SCMP_ACT_ALLOW","includes":{"caps":["CAP_SYS_ADMIN"]}},`+
		`{"names":["keyctl"],"action":"SCMP_ACT_ERRNO"}]}`)
	_, err = ResolveSecurityOptions(required, gated, "apparmor=forge", enforcing)
	require.NoError(t, err)

	cases := []struct {
		name, seccomp, lsm string
		engine             EngineSecurity
		code               failure.Code
	}{
		{"apparmor unconfined", allowlist, "apparmor=unconfined", enforcing, failure.SandboxSecurityProfile},
		{"label disable", allowlist, "label=disable", enforcing, failure.SandboxSecurityProfile},
		{"label colon disable", allowlist, "label:disable", enforcing, failure.SandboxSecurityProfile},
		{"selinux spc_t", allowlist, "label=type:spc_t", enforcing, failure.SandboxSecurityProfile},
		{"selinux unconfined_t", allowlist, "label=level:s0,type:unconfined_t", enforcing, failure.SandboxSecurityProfile},
		{"seccomp unconfined as lsm", allowlist, "seccomp=unconfined", enforcing, failure.SandboxSecurityProfile},
		{"seccomp unconfined as profile", "unconfined", "apparmor=forge", enforcing, failure.SandboxSecurityProfile},
		{"allow everything", write("allow.json", `{"defaultAction":"SCMP_ACT_ALLOW"}`), "apparmor=forge", enforcing, failure.SandboxSecurityProfile},
		{"allow with no effective rules", write("allow-empty.json", `{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":["read"],"action":"SCMP_ACT_ALLOW"}]}`), "apparmor=forge", enforcing, failure.SandboxSecurityProfile},
		{"allow blocklist", write("blocklist.json", `{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":["mkdir"],"action":"SCMP_ACT_ERRNO"}]}`), "apparmor=forge", enforcing, failure.SandboxSecurityProfile},
		{"log", write("log.json", `{"defaultAction":"SCMP_ACT_LOG"}`), "apparmor=forge", enforcing, failure.SandboxSecurityProfile},
		{"trace", write("trace.json", `{"defaultAction":"SCMP_ACT_TRACE"}`), "apparmor=forge", enforcing, failure.SandboxSecurityProfile},
		{"no default", write("nodefault.json", `{"syscalls":[]}`), "apparmor=forge", enforcing, failure.SandboxSecurityProfile},
		{"later key wins", write("dup.json", `{"defaultAction":"SCMP_ACT_ERRNO","defaultAction":"SCMP_ACT_ALLOW"}`), "apparmor=forge", enforcing, failure.SandboxSecurityProfile},
		{"allowlist allowing mount", write("mount.json", `{"defaultAction":"SCMP_ACT_ERRNO","syscalls":[{"names":["read","mount"],"action":"SCMP_ACT_ALLOW"}]}`), "apparmor=forge", enforcing, failure.SandboxSecurityProfile},
		{"allowlist logging bpf", write("bpf.json", `{"defaultAction":"SCMP_ACT_ERRNO","syscalls":[{"name":"bpf","action":"SCMP_ACT_LOG"}]}`), "apparmor=forge", enforcing, failure.SandboxSecurityProfile},
		{"allowlist allowing unshare on a condition", write("unshare.json", `{"defaultAction":"SCMP_ACT_ERRNO","syscalls":[{"names":["unshare"],"action":"SCMP_ACT_ALLOW","args":[{"index":0,"value":0,"op":"SCMP_CMP_EQ"}]}]}`), "apparmor=forge", enforcing, failure.SandboxSecurityProfile},
		{"other case key", write("case.json", `{"defaultAction":"SCMP_ACT_ERRNO","DefaultAction":"SCMP_ACT_ALLOW"}`), "apparmor=forge", enforcing, failure.SandboxSecurityProfile},
		{"engine without seccomp", allowlist, "apparmor=forge", EngineSecurity{Known: true, LSM: []string{"apparmor"}}, failure.SandboxSecurityUnavailable},
		{"engine unknown", allowlist, "apparmor=forge", EngineSecurity{}, failure.SandboxSecurityUnavailable},
		{"engine without apparmor", allowlist, "apparmor=forge", EngineSecurity{Known: true, Seccomp: true, LSM: []string{"selinux"}}, failure.SandboxSecurityUnavailable},
		{"engine without selinux", allowlist, "label=type:forge_t", EngineSecurity{Known: true, Seccomp: true, LSM: []string{"apparmor"}}, failure.SandboxSecurityUnavailable},
	}
	for _, tc := range cases {
		_, err := ResolveSecurityOptions(required, tc.seccomp, tc.lsm, tc.engine)
		assert.Equal(t, tc.code, failure.CodeOf(err), "%s: %v", tc.name, err)
	}

	// Other policies keep today's behaviour: the operator's options pass.
	blocklist := filepath.Join(dir, "blocklist.json")
	opts, err := ResolveSecurityOptions(messages.PolicyAdoption, blocklist, "", EngineSecurity{})
	require.NoError(t, err)
	assert.Len(t, opts, 1)
}
