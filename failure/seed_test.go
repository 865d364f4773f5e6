package failure

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// seedCodes are the failure codes of the seed documents (the original
// implementation whose rules, limits and codes are forged's spec): the
// preflight codes of 000 and the sandbox codes of 003. A server written
// against the seed keys on them, so each is registered under the seed's
// own name, unless seedCodesNotUsed says why forged never raises it.
var seedCodes = []Code{
	"docker_cpu_low", "docker_disk_low", "docker_linux_required", "docker_memory_low", "docker_rootless_required",
	"docker_unreachable", "platform_unsupported",
	"sandbox_auth_unavailable", "sandbox_build_failed", "sandbox_build_policy_failed", "sandbox_child_result_unknown",
	"sandbox_config_commit_invalid", "sandbox_config_commit_unapproved", "sandbox_egress_policy_invalid",
	"sandbox_egress_proxy_unavailable", "sandbox_event_invalid", "sandbox_file_descriptor_exhausted",
	"sandbox_identity_invalid", "sandbox_input_failed", "sandbox_log_limit", "sandbox_oom_killed",
	"sandbox_output_conflict", "sandbox_output_invalid", "sandbox_output_missing", "sandbox_output_publish_forbidden",
	"sandbox_output_publish_rejected", "sandbox_output_publish_stale", "sandbox_output_stale", "sandbox_pid_exhausted",
	"sandbox_runtime_failed", "sandbox_security_profile_invalid", "sandbox_security_profile_unavailable",
	"sandbox_service_health_policy_invalid", "sandbox_storage_exhausted", "teardown_failed",
}

var seedCodesNotUsed = map[Code]string{
	"sandbox_service_health_policy_invalid": "the seed needs an operator-configured health command for the browser service; forged's browser image carries its own probe, so there is no such policy to get wrong",
}

func TestTheSeedsCodesAreRegisteredUnderTheSeedsNames(t *testing.T) {
	for _, code := range seedCodes {
		if why, ok := seedCodesNotUsed[code]; ok {
			_, registered := registry[code]
			assert.False(t, registered, "%s is registered after all: drop it from seedCodesNotUsed (%s)", code, why)
			continue
		}
		spec, ok := registry[code]
		if assert.True(t, ok, "the seed's code %s is not registered under its own name", code) {
			assert.Equal(t, code, spec.Code)
		}
	}
}

func TestAnAliasResolvesToTheWireName(t *testing.T) {
	assert.Equal(t, Code("sandbox_egress_proxy_unavailable"), SandboxEgressUnsupported, "the Go name of the old code means the wire name")
	spec, ok := Lookup("sandbox_egress_unsupported")
	assert.True(t, ok)
	assert.Equal(t, SandboxEgressProxyUnavailable, spec.Code)
	assert.Equal(t, Code("sandbox_egress_unsupported"), spec.Alias)
	for _, s := range Registered() {
		assert.NotEqual(t, Code("sandbox_egress_unsupported"), s.Code, "an alias is never a code of its own")
	}
}
