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
