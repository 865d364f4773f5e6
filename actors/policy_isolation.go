package actors

import (
	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/sandbox/contract"
	"github.com/forgedev/forged/messages"
)

// Under the gvisor isolation floor a worker runs under runsc with no
// network: runsc's netstack does not start on forged's attempt networks
// (docs/gvisor.md). What needs a network is refused before anything is
// created: public_allowlist and open_public at dispatch, services once the
// contract is read (the prepare step, before Docker is touched).

// gVisorFloor reports whether conf's floor is gvisor.
func gVisorFloor(conf Confinement) bool { return conf.Isolation == messages.IsolationGVisor }

// checkIsolationNetwork refuses a network policy the floor cannot run.
func checkIsolationNetwork(mode string, conf Confinement) error {
	if !gVisorFloor(conf) {
		return nil
	}
	switch mode {
	case messages.NetworkPublicAllowlist, messages.NetworkOpenPublic:
		return failure.New(failure.SandboxIsolationNetworkUnsupport,
			"networkPolicy.mode %s needs an attempt network, which this runner's gvisor isolation floor (--isolation) does not run; use mode none or a runner whose floor is runc", mode)
	}
	return nil
}

// checkIsolationServices refuses a contract's services under the floor.
func checkIsolationServices(services []contract.Service, conf Confinement) error {
	if !gVisorFloor(conf) || len(services) == 0 {
		return nil
	}
	return failure.New(failure.SandboxIsolationNetworkUnsupport,
		"the contract declares %d service(s), which need an attempt network that this runner's gvisor isolation floor (--isolation) does not run; drop services or use a runner whose floor is runc", len(services))
}
