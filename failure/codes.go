package failure

// Dispatch decoding and admission.
const (
	DispatchInvalid        Code = "dispatch_invalid"
	DispatchWrongRunner    Code = "dispatch_runner_mismatch"
	CapacityExhausted      Code = "capacity_exhausted"
	AttemptDuplicate       Code = "attempt_duplicate"
	AttemptNotFound        Code = "attempt_not_found"
	SupervisorShuttingDown Code = "supervisor_shutting_down"
)

// Sandbox runtime failures, as in the seed implementation.
const (
	SandboxIdentityInvalid     Code = "sandbox_identity_invalid"
	SandboxContractInvalid     Code = "sandbox_contract_invalid"
	SandboxServicesUnsupported Code = "sandbox_services_unsupported"
	SandboxEgressUnsupported   Code = "sandbox_egress_unsupported"
	SandboxCapacityProfile     Code = "sandbox_capacity_profile_mismatch"
	SandboxSecurityProfile     Code = "sandbox_security_profile_invalid"
	SandboxSecurityUnavailable Code = "sandbox_security_profile_unavailable"
	PolicyMismatch             Code = "policy_mismatch"
	SandboxInputFailed         Code = "sandbox_input_failed"
	SandboxConfigUnapproved    Code = "sandbox_config_commit_unapproved"
	SandboxConfigInvalid       Code = "sandbox_config_commit_invalid"
	SandboxConfigMismatch      Code = "sandbox_config_commit_mismatch"
	SandboxBuildFailed         Code = "sandbox_build_failed"
	SandboxBuildPolicy         Code = "sandbox_build_policy_failed"
	SandboxCreateFailed        Code = "sandbox_create_failed"
	SandboxWorkerFailed        Code = "sandbox_worker_failed"
	SandboxOOMKilled           Code = "sandbox_oom_killed"
	SandboxPIDExhausted        Code = "sandbox_pid_exhausted"
	SandboxStorageExhausted    Code = "sandbox_storage_exhausted"
	SandboxFDExhausted         Code = "sandbox_file_descriptor_exhausted"
	SandboxLogLimit            Code = "sandbox_log_limit"
	SandboxEventInvalid        Code = "sandbox_event_invalid"
	SandboxOutputMissing       Code = "sandbox_output_missing"
	SandboxOutputInvalid       Code = "sandbox_output_invalid"
	SandboxOutputConflict      Code = "sandbox_output_conflict"
	SandboxOutputStale         Code = "sandbox_output_stale"
	SandboxOutputPublishForbid Code = "sandbox_output_publish_forbidden"
	SandboxOutputPublishReject Code = "sandbox_output_publish_rejected"
	SandboxOutputPublishStale  Code = "sandbox_output_publish_stale"
	SandboxLeaseExpired        Code = "sandbox_lease_expired"
	SandboxCancelled           Code = "sandbox_cancelled"
	SandboxRuntimeFailed       Code = "sandbox_runtime_failed"
	SandboxTeardownFailed      Code = "teardown_failed"
	DockerUnreachable          Code = "docker_unreachable"
)
