package actors

import (
	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/sandbox/contract"
	"github.com/forgedev/forged/messages"
)

// Under the gvisor isolation floor a worker without an attempt network
// runs under runsc with no network (Confinement.Runtime). A worker with
// one (services, public_allowlist) runs under runsc's second registration
// with gVisor's own network stack (Confinement.NetworkRuntime); when that
// registration does not work, those attempts are refused before anything
// is created. open_public is refused under the floor whatever works: its
// netns guard's nftables rules hook the host kernel's IP stack, which
// gVisor's network stack bypasses (docs/gvisor.md).

// gVisorFloor reports whether conf's floor is gvisor.
func gVisorFloor(conf Confinement) bool { return conf.Isolation == messages.IsolationGVisor }

// checkIsolationNetwork refuses a network policy the floor cannot run.
func checkIsolationNetwork(mode string, conf Confinement) error {
	if !gVisorFloor(conf) {
		return nil
	}
	switch mode {
	case messages.NetworkOpenPublic:
		return failure.New(failure.SandboxIsolationNetworkUnsupport,
			"networkPolicy.mode open_public is not run under this runner's gvisor isolation floor (--isolation): its netns guard does not hold under gVisor's network stack; use mode public_allowlist or none, or a runner whose floor is runc")
	case messages.NetworkPublicAllowlist:
		if conf.NetworkRuntime == "" {
			return failure.New(failure.SandboxIsolationNetworkUnsupport,
				"networkPolicy.mode public_allowlist needs an attempt network, which this runner's gvisor isolation floor (--isolation) cannot run: %s; use mode none, or register runsc-net (docs/gvisor.md)", conf.NetworkRuntimeErr)
		}
	}
	return nil
}

// checkIsolationServices refuses a contract's services under the floor
// when no network runtime works.
func checkIsolationServices(services []contract.Service, conf Confinement) error {
	if !gVisorFloor(conf) || len(services) == 0 || conf.NetworkRuntime != "" {
		return nil
	}
	return failure.New(failure.SandboxIsolationNetworkUnsupport,
		"the contract declares %d service(s), which need an attempt network that this runner's gvisor isolation floor (--isolation) cannot run: %s; drop services, or register runsc-net (docs/gvisor.md)", len(services), conf.NetworkRuntimeErr)
}

// workerRuntime is the OCI runtime of a worker: conf's network runtime
// when the worker joins an attempt network under the gvisor floor, conf's
// runtime otherwise.
func workerRuntime(conf Confinement, attemptNetwork string) string {
	if gVisorFloor(conf) && attemptNetwork != "" {
		return conf.NetworkRuntime
	}
	return conf.Runtime
}

// attemptConfinement is conf as the dispatch d runs under it: its
// isolation is the floor, raised to gVisor when d asks for it
// (sandbox.isolation) or when d is sandbox_required and the operator's
// RequiredIsolation is gvisor. Asking for less than the floor is refused
// (failure.SandboxIsolationBelowFloor). On a runc floor gVisor needs a
// working runsc (and, when d asked for it, the operator's OfferGVisor);
// otherwise the refusal is failure.SandboxIsolationUnavailable. The
// result's Isolation is then gvisor and its Runtime runsc's, so the
// worker runs exactly as under the gvisor floor (checkIsolationNetwork,
// workerRuntime).
func attemptConfinement(d *messages.Dispatch, conf Confinement) (Confinement, error) {
	asked := d.Sandbox.Isolation
	if asked == messages.IsolationRunc && gVisorFloor(conf) {
		return Confinement{}, failure.New(failure.SandboxIsolationBelowFloor,
			"sandbox.isolation runc is below this runner's gvisor isolation floor (--isolation); omit sandbox.isolation or ask for gvisor")
	}
	required := d.Sandbox.ExecutionPolicy == messages.PolicySandboxRequired && conf.RequiredIsolation == messages.IsolationGVisor
	if gVisorFloor(conf) || (asked != messages.IsolationGVisor && !required) {
		return conf, nil
	}
	why := "sandbox.isolation gvisor"
	if asked != messages.IsolationGVisor {
		why = "sandbox_required under --sandbox-required-isolation gvisor"
	}
	if asked == messages.IsolationGVisor && !required && !conf.OfferGVisor {
		return Confinement{}, failure.New(failure.SandboxIsolationUnavailable,
			"%s is not offered by this runner, whose isolation floor is runc: ask a runner that allows it (--allow-gvisor-dispatch) or omit sandbox.isolation", why)
	}
	if conf.GVisorRuntime == "" {
		return Confinement{}, failure.New(failure.SandboxIsolationUnavailable,
			"%s needs gVisor, which does not work on this runner: %s; see forged preflight and docs/gvisor.md", why, conf.GVisorErr)
	}
	conf.Isolation, conf.Runtime = messages.IsolationGVisor, conf.GVisorRuntime
	return conf, nil
}

// serviceRuntime is the OCI runtime of an attempt's service containers
// under conf: its network runtime (runsc-net) when the attempt runs under
// gVisor and the operator chose to run services there too
// (GVisorServices); "" (the engine's default, runc) otherwise. Readiness
// probes and the egress proxy always run under the default. A service
// under gVisor gets its pids limit translated as the worker's
// (dockerops.GVisorPIDsLimit).
func serviceRuntime(conf Confinement) string {
	if gVisorFloor(conf) && conf.GVisorServices {
		return conf.NetworkRuntime
	}
	return ""
}

// createdRuntime is the OCI runtime registration the attempt's worker
// container was created with, once it exists ("": not created, or the
// engine's default runtime). The outcome, the ledger and inspect report it.
func (a *attemptActor) createdRuntime() string {
	if a.worker.containerID == "" {
		return ""
	}
	return a.worker.runtime
}
