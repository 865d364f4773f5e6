package failure

import "net/http"

// The registry of every code forged reports. Each line is one code: its
// name, whether a new dispatch of the same work may succeed (Retryable or
// Permanent), the HTTP status the daemon answers it with, and its meaning.
// Adding a code is one line here; then `go generate ./failure/` writes
// the code table, docs/failure-codes.md (TestCodeTableIsCurrent fails
// until it is current).

// Dispatch decoding and admission.
var (
	DispatchInvalid        = define("dispatch_invalid", Permanent, http.StatusBadRequest, "the dispatch failed strict decoding, or its `worktreeKey` is the default or base branch or outside the managed namespace; the message names the field")
	DispatchExceedsHost    = define("dispatch_exceeds_host", Permanent, http.StatusUnprocessableEntity, "the dispatch asks for more memory or CPU than this host offers after its reserve, even alone; the message carries the numbers")
	CapacityExhausted      = define("capacity_exhausted", Retryable, http.StatusTooManyRequests, "all slots busy and the queue full")
	DispatchWrongRunner    = define("dispatch_runner_mismatch", Permanent, http.StatusConflict, "the dispatch names another runner id than this forged's")
	AttemptDuplicate       = define("attempt_duplicate", Permanent, http.StatusConflict, "the attempt id is already admitted, or finished and still remembered")
	AttemptNotFound        = define("attempt_not_found", Permanent, http.StatusNotFound, "no such attempt (running, or finished and remembered)")
	SupervisorShuttingDown = define("supervisor_shutting_down", Retryable, http.StatusServiceUnavailable, "forged is stopping and admits nothing more")
	QueryInvalid           = define("query_invalid", Permanent, http.StatusBadRequest, "a query parameter of the daemon API is invalid; the message names it")
	ConsoleReadOnly        = define("console_read_only", Permanent, http.StatusForbidden, "the console's cancel action is off: the daemon runs without --console-manage-token-file")
	APIHostRefused         = define("api_host_refused", Permanent, http.StatusMisdirectedRequest, "the request's `Host` is not a name the daemon answers to (`localhost`, a loopback address, `forged`, or one of `--api-allowed-host`): a DNS-rebinding page or a misrouted forward")
	APIOriginRefused       = define("api_origin_refused", Permanent, http.StatusForbidden, "the request's `Origin` (or `Sec-Fetch-Site`) says it comes from a page of another origin than the daemon's own")
	APIClientRequired      = define("api_client_required", Permanent, http.StatusForbidden, "a state-changing request (POST, DELETE) lacks `Content-Type: application/json` or the `X-Forged-Client` header that the CLI, package client and the console send")
	RepoOutsideRoots       = define("dispatch_repo_outside_roots", Permanent, http.StatusForbidden, "the dispatch's `repo.localPath` (or the path of its `file://` `repo.remote`), symlinks resolved, lies outside every `--repo-root` the operator allows")
	RemoteRefused          = define("dispatch_remote_refused", Permanent, http.StatusForbidden, "the dispatch names `repo.remote` and this runner fetches no remotes (`--remote-protocols` unset, the default), or not over that URL's protocol")
)

// Host preflight and the Docker context lock.
var (
	DockerUnreachable      = define("docker_unreachable", Retryable, http.StatusServiceUnavailable, "the engine does not answer")
	PlatformUnsupported    = define("platform_unsupported", Permanent, http.StatusServiceUnavailable, "forged's own OS cannot host Docker sandboxes")
	DockerLinuxRequired    = define("docker_linux_required", Permanent, http.StatusServiceUnavailable, "the engine runs non-Linux containers")
	DockerRootlessRequired = define("docker_rootless_required", Permanent, http.StatusServiceUnavailable, "the engine is rootful and rootful was not allowed")
	DockerDiskLow          = define("docker_disk_low", Retryable, http.StatusServiceUnavailable, "the Docker root directory is under disk pressure; the message carries the numbers")
	DockerMemoryLow        = define("docker_memory_low", Retryable, http.StatusServiceUnavailable, "available memory less the host reserve holds no attempt; the message carries the numbers")
	DockerCPULow           = define("docker_cpu_low", Retryable, http.StatusServiceUnavailable, "the cores left after the host's share hold no attempt")
	DockerContextOwned     = define("docker_context_owned", Retryable, http.StatusServiceUnavailable, "another live forged owns this Docker context (its pid is named)")
)

// Sandbox runtime failures, as in the seed implementation.
var (
	SandboxIdentityInvalid      = define("sandbox_identity_invalid", Permanent, http.StatusBadRequest, "an attempt, lease, runner or fencing id is not a full lowercase UUID")
	SandboxContractInvalid      = define("sandbox_contract_invalid", Permanent, http.StatusUnprocessableEntity, "`.forge/forge.sandbox.yml` is invalid")
	SandboxServicesUnsupported  = define("sandbox_services_unsupported", Permanent, http.StatusUnprocessableEntity, "the contract declares a service forged has no recipe for (the contract parser admits only postgres, redis and browser); refused before anything is created")
	SandboxServiceUnavailable   = define("sandbox_service_unavailable", Permanent, http.StatusUnprocessableEntity, "a declared service has no image in the runner's service catalogue, or its pinned image is not in the engine; refused before anything is created")
	SandboxServiceImageDiffers  = define("sandbox_service_image_mismatch", Permanent, http.StatusUnprocessableEntity, "a service catalogue image's id differs from its pinned digest; refused before anything is created")
	SandboxServiceHealthTimeout = define("sandbox_service_health_timeout", Retryable, http.StatusInternalServerError, "a service did not pass its readiness probe within its own or the attempt's total cap")
	SandboxServiceFailed        = define("sandbox_service_failed", Permanent, http.StatusInternalServerError, "a service container exited before it was ready or while the worker ran; the message names the service")
	SandboxEgressUnsupported    = define("sandbox_egress_proxy_unavailable", Permanent, http.StatusUnprocessableEntity, "the dispatch asks for `public_allowlist` and this runner has no egress proxy (`--egress` off, or no `egress` image in the service catalogue, or that image is not in the engine); refused before anything is created")
	SandboxEgressPolicyInvalid  = define("sandbox_egress_policy_invalid", Permanent, http.StatusUnprocessableEntity, "the `public_allowlist` hosts fail the egress proxy's rules (host names and `*.` wildcards only, no IP literals); refused before anything is created")
	SandboxEgressFailed         = define("sandbox_egress_failed", Permanent, http.StatusInternalServerError, "the egress proxy could not be started, did not pass its readiness probe, or exited while the worker ran")
	SandboxNetworkIsolation     = define("sandbox_network_isolation_unavailable", Permanent, http.StatusUnprocessableEntity, "the attempt needs a network (services, egress) and preflight could not verify that attempt networks are isolated from the host; refused before anything is created")
	SandboxStorageUnbounded     = define("sandbox_storage_unbounded", Permanent, http.StatusUnprocessableEntity, "this runner cannot bound attempt volumes (preflight's `storage` is `none`: a rootless or remote engine, no access to the loop devices, no e2fsprogs) and the dispatch is `sandbox_required`, or the operator refuses unbounded storage for every attempt (`--require-bounded-storage`); refused before anything is created")
	SandboxCachesUnsupported    = define("sandbox_caches_unsupported", Permanent, http.StatusUnprocessableEntity, "the contract declares a cache in a mode this runner's policy does not allow (--cache-modes); refused before anything is created")
	SandboxCapacityProfile      = define("sandbox_capacity_profile_mismatch", Permanent, http.StatusUnprocessableEntity, "the reserved service or runtime memory is below what the contract needs")
	SandboxSecurityUnavailable  = define("sandbox_security_profile_unavailable", Permanent, http.StatusUnprocessableEntity, "`sandbox_required` without seccomp and LSM profiles")
	SandboxSecurityProfile      = define("sandbox_security_profile_invalid", Permanent, http.StatusUnprocessableEntity, "a malformed seccomp or LSM profile")
	PolicyMismatch              = define("policy_mismatch", Permanent, http.StatusUnprocessableEntity, "`open_public` networking is not permitted on this runner")
	SandboxRemoteFetchFailed    = define("sandbox_remote_fetch_failed", Retryable, http.StatusBadGateway, "the runner could not fetch the dispatch's `repo.remote` into its mirror: unreachable, not a repository, refused by the remote, or past the fetch's time or size bound (`--remote-fetch-timeout`, `--remote-fetch-max-bytes`); the message carries git's last words")
	SandboxInputFailed          = define("sandbox_input_failed", Permanent, http.StatusUnprocessableEntity, "the input or config could not be resolved from the host repository")
	SandboxConfigUnapproved     = define("sandbox_config_commit_unapproved", Permanent, http.StatusUnprocessableEntity, "`sandbox_required` without an approved config commit")
	SandboxConfigInvalid        = define("sandbox_config_commit_invalid", Permanent, http.StatusUnprocessableEntity, "the config commit is not a full commit sha of the repository")
	SandboxConfigMismatch       = define("sandbox_config_commit_mismatch", Permanent, http.StatusUnprocessableEntity, "the config commit does not carry the approved sandbox configuration")
	SandboxBuildFailed          = define("sandbox_build_failed", Permanent, http.StatusInternalServerError, "the image build failed, exceeded a limit (named) or its timeout")
	SandboxBuildPolicy          = define("sandbox_build_policy_failed", Permanent, http.StatusUnprocessableEntity, "the Dockerfile breaks the build policy (URL `ADD`; under `sandbox_required` an unpinned, absent or variable upstream image, or a `syntax` frontend); the message names the line), or a builder limit that cannot be applied (the builder PIDs limit)")
	SandboxCreateFailed         = define("sandbox_create_failed", Retryable, http.StatusInternalServerError, "the network, volumes or worker could not be created")
	SandboxWorkerFailed         = define("sandbox_worker_failed", Permanent, http.StatusInternalServerError, "the worker or its task exited non-zero; the message carries the diagnostic")
	SandboxOOMKilled            = define("sandbox_oom_killed", Permanent, http.StatusInternalServerError, "the engine's inspected state says OOMKilled, or the memory cgroup's `oom_kill` count is above 0 (never inferred from exit code 137 or the task's output)")
	SandboxPIDExhausted         = define("sandbox_pid_exhausted", Permanent, http.StatusInternalServerError, "the pids cgroup refused forks at `pids.max` (`pids.events`), seen by the host")
	SandboxStorageExhausted     = define("sandbox_storage_exhausted", Permanent, http.StatusInternalServerError, "a file system of the task was full (the host's statfs through the container's root, or else the worker's), or the host finds a bounded volume full after the worker failed, or the `/tmp` tmpfs held half the memory limit when the kernel OOM-killed: it is charged to memory")
	SandboxFDExhausted          = define("sandbox_file_descriptor_exhausted", Permanent, http.StatusInternalServerError, "the worker saw a task process hold as many descriptors as its `RLIMIT_NOFILE` (the kernel keeps no count of EMFILE)")
	SandboxLogLimit             = define("sandbox_log_limit", Permanent, http.StatusInternalServerError, "the worker's stdout exceeded the capture budget (10 MiB of signed event lines: 8 MiB of task output, which the worker never exceeds, and 2 MiB for its own events); only lines the task writes past the worker reach it")
	SandboxEventInvalid         = define("sandbox_event_invalid", Permanent, http.StatusInternalServerError, "a worker event broke the field bounds")
	SandboxOutputMissing        = define("sandbox_output_missing", Permanent, http.StatusInternalServerError, "the worker left no manifest")
	SandboxOutputInvalid        = define("sandbox_output_invalid", Permanent, http.StatusInternalServerError, "identity or fence mismatch, bad file, size or hash; or a result the host refuses: over a budget (objects, bytes, delta result, 50,000 commits), failing strict fsck, not descended from the input, or needing an object outside the bundle and the input's history")
	SandboxOutputConflict       = define("sandbox_output_conflict", Retryable, http.StatusConflict, "the managed branch or its checked-out worktree moved during the attempt")
	SandboxOutputStale          = define("sandbox_output_stale", Permanent, http.StatusConflict, "at the moment of the move, the attempt was cancelled, its lease expired or its fence changed")
	SandboxOutputPublishForbid  = define("sandbox_output_publish_forbidden", Permanent, http.StatusForbidden, "no grant redeemer configured; the helper or endpoint failed, timed out or answered malformed; or the credential breaks the rules (expired, remote outside the allowed hosts, …)")
	SandboxOutputPublishReject  = define("sandbox_output_publish_rejected", Permanent, http.StatusConflict, "the push was rejected")
	SandboxOutputPublishStale   = define("sandbox_output_publish_stale", Permanent, http.StatusConflict, "the remote branch moved away from the input")
	SandboxOutputPublishPolicy  = define("sandbox_output_publish_policy", Permanent, http.StatusForbidden, "the operator's publish policy refused the result before anything was pushed: a commit changes a protected path (`--publish-forbidden-paths`, CI configuration by default), or its author or committer is not the required identity (`--publish-author-policy require` or `rewrite`); the message names the path or commit")
	SandboxImageSignature       = define("sandbox_image_signature_invalid", Permanent, http.StatusUnprocessableEntity, "`sandbox_required` with an upstream image the verification command (`--image-verify-command`) did not verify, or without such a command")
	SandboxAuthUnavailable      = define("sandbox_auth_unavailable", Permanent, http.StatusUnprocessableEntity, "the dispatch names a provider no auth adapter serves, or the adapter's helper could not prepare the credentials")
	SandboxHardWallExceeded     = define("sandbox_hard_wall_exceeded", Permanent, http.StatusInternalServerError, "the worker ran past its hard wall (`--hard-wall`, shortened by the task timeout), measured on the host")
	SandboxIdleTimeout          = define("sandbox_idle_timeout", Permanent, http.StatusInternalServerError, "the worker wrote no output for the idle limit (`--idle-timeout`), measured on the host")
	SandboxChildResultUnknown   = define("sandbox_child_result_unknown", Permanent, http.StatusInternalServerError, "in an outcome's causes: the worker's own account of a failure that a trusted host failure decided (evidence, never the outcome's code)")
	SandboxLeaseExpired         = define("sandbox_lease_expired", Permanent, http.StatusConflict, "the lease watchdog fired")
	SandboxRunnerRestarted      = define("sandbox_runner_restarted", Retryable, http.StatusInternalServerError, "forged died while the attempt ran; the attempt was reaped at the next start and not re-run")
	SandboxReadoptWorkerGone    = define("sandbox_readopt_worker_gone", Retryable, http.StatusInternalServerError, "forged restarted while the attempt ran and its worker container was gone (removed, or never created); the attempt was reaped, not re-adopted")
	SandboxReadoptLeaseExpired  = define("sandbox_readopt_lease_expired", Permanent, http.StatusConflict, "forged restarted while the attempt ran and its lease had expired meanwhile; the worker was stopped and reaped, not re-adopted")
	SandboxReadoptLedgerDamaged = define("sandbox_readopt_ledger_damaged", Retryable, http.StatusInternalServerError, "forged restarted while the attempt ran and its ledger lacked what re-adoption needs, or its adoption record, sealed key or recorded inputs did not check out; the attempt was reaped")
	SandboxReadoptProtocol      = define("sandbox_readopt_protocol_unknown", Retryable, http.StatusInternalServerError, "forged restarted while the attempt ran and its worker speaks a worker protocol version this forged does not know; the attempt was reaped")
	SandboxReadoptUnsupported   = define("sandbox_readopt_unsupported", Retryable, http.StatusInternalServerError, "forged restarted while the attempt ran, and the attempt has an open_public network (its guarded netns holder), which this forged does not re-adopt (services and the egress proxy are); the attempt was reaped")
	SandboxEventLogInvalid      = define("sandbox_event_log_invalid", Permanent, http.StatusInternalServerError, "the worker's event log in the control volume, read when forged re-adopted the attempt, failed its signatures, its sequence or its bounds")
	SandboxCancelled            = define("sandbox_cancelled", Permanent, http.StatusConflict, "cancelled by request or signal")
	SandboxRuntimeFailed        = define("sandbox_runtime_failed", Retryable, http.StatusInternalServerError, "anything uncoded (including a crashed actor)")
	SandboxTeardownFailed       = define("teardown_failed", Permanent, http.StatusInternalServerError, "some labelled resource could not be removed; the attempt is reported degraded")
)

// Leases: renewals from the API and signed updates inside the sandbox.
var (
	LeaseRenewalInvalid = define("lease_renewal_invalid", Permanent, http.StatusBadRequest, "a renewal request body is not {fencingToken: full UUID, expiresAt: RFC 3339}")
	LeaseUpdateInvalid  = define("lease_update_invalid", Permanent, http.StatusBadRequest, "a signed lease update is malformed")
	LeaseUpdateForbid   = define("lease_update_forbidden", Permanent, http.StatusForbidden, "a lease update is not signed for this attempt and fence")
	LeaseUpdateStale    = define("lease_update_stale", Permanent, http.StatusConflict, "a lease update does not move the expiry later")
)

// The ledger, cleanup reports and the reaper.
var (
	LedgerInvalid          = define("sandbox_ledger_invalid", Permanent, http.StatusInternalServerError, "a ledger refused on write, or one on disk that is corrupt, oversized, a symbolic link or fails its schema")
	LeaseTransitionInvalid = define("sandbox_lease_transition_invalid", Permanent, http.StatusInternalServerError, "a ledger state change the transition table forbids")
	CleanupReportInvalid   = define("sandbox_cleanup_report_invalid", Permanent, http.StatusBadRequest, "a cleanup report (or report id) that fails validation")
	StateIOFailed          = define("sandbox_state_io_failed", Retryable, http.StatusInternalServerError, "forged's state directory could not be read or written")
	ReaperConfigInvalid    = define("reaper_config_invalid", Permanent, http.StatusInternalServerError, "a reaper round's runner identities are not full UUIDs")
	ReaperListFailed       = define("reaper_list_failed", Retryable, http.StatusServiceUnavailable, "the engine's managed objects could not be listed")
	ReapRequestInvalid     = define("reap_request_invalid", Permanent, http.StatusBadRequest, "a POST /v1/reap body is not {attemptSnapshot: [{dispatchAttemptId, fencingToken, runnerInstanceId: full UUIDs, expiresAt: RFC 3339}]}")
)

// The seed's wire names that forged had renamed: the seed's name is the
// code, forged's earlier one an alias (Spec.Alias).
var (
	// SandboxEgressProxyUnavailable is the seed's name; SandboxEgressUnsupported
	// stays the same code.
	SandboxEgressProxyUnavailable = alias(SandboxEgressUnsupported, "sandbox_egress_unsupported")
)

// Codes of the host repository.
var (
	SandboxRepositoryUnsupported = define("sandbox_repository_unsupported", Permanent, http.StatusUnprocessableEntity, "the host repository uses SHA-256 object names; the worker's git (go-git, built for SHA-1) cannot read them, so the attempt is refused before anything is prepared")
)

// Codes of the isolation tier (gVisor's runsc beside runc).
var (
	SandboxIsolationUnavailable      = define("sandbox_isolation_unavailable", Retryable, http.StatusServiceUnavailable, "gVisor is demanded (the operator's isolation floor is gvisor, the dispatch's `sandbox.isolation` is gvisor, or `--sandbox-required-isolation gvisor` for a `sandbox_required` dispatch) and the engine has no working runsc runtime (not registered, or its probe container failed), or a runc-floor runner does not offer gvisor to dispatches (`--allow-gvisor-dispatch`); under the gvisor floor the host takes no attempts until it has one")
	SandboxIsolationBelowFloor       = define("sandbox_isolation_below_floor", Permanent, http.StatusUnprocessableEntity, "the dispatch's `sandbox.isolation` asks for less isolation than the runner's floor (`runc` on a runner whose `--isolation` is `gvisor`); omit it or ask for the floor")
	SandboxIsolationNetworkUnsupport = define("sandbox_isolation_network_unsupported", Permanent, http.StatusUnprocessableEntity, "under the gvisor isolation floor an attempt runs with no network (runsc's netstack does not start on forged's attempt networks), so contracts declaring services and public_allowlist or open_public dispatches are refused before anything is created")
)

// Codes of the image policy (SBOM, vulnerability gate, signed provenance).
var (
	SandboxImagePolicy     = define("sandbox_image_policy_failed", Permanent, http.StatusUnprocessableEntity, "the image policy could not be applied to a built image: the SBOM command or the scan command failed or answered out of shape, the provenance could not be signed, or an enforced policy is incomplete (`--image-policy-enforced` without `--image-sbom-command`, `--image-scan-command` and `--image-provenance-key`) for a `sandbox_required` attempt")
	SandboxImageVulnerable = define("sandbox_image_vulnerable", Permanent, http.StatusUnprocessableEntity, "the scan command reported a finding, not allowlisted (`--image-scan-allow`), at or above `--image-scan-fail-severity` in the built image; the message names the findings")
)

// Codes of the fleet (internal/fleet).
var (
	FleetMemberCutOff    = define("fleet_member_cut_off", Retryable, http.StatusServiceUnavailable, "this fleet member has not reached etcd for longer than its membership TTL (the fleet may declare it lost): it admits no new work until etcd answers again; the attempts it runs go on")
	FleetMemberRestarted = define("fleet_member_restarted", Retryable, http.StatusServiceUnavailable, "the fleet member a dispatch was forwarded to is not the process instance the submitter chose from the directory (it restarted in between: its runner instance id changed); nothing was admitted: submit again")
	FleetMemberUnknown   = define("fleet_member_unknown", Permanent, http.StatusNotFound, "no member of the fleet, as this daemon sees it, has that runner id (or the daemon is no fleet member): list the members with GET /v1/fleet or `forged fleet`")
	SandboxRunnerLost    = define("sandbox_runner_lost", Retryable, http.StatusInternalServerError, "the fleet member running the attempt left the fleet (its etcd lease expired: killed, host gone or cut off) while it ran; its submitter ended the attempt, and the member, returning, refuses to import or publish its result (the loss is recorded in etcd)")
)
