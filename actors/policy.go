package actors

import (
	"github.com/forgedev/forged/caches"
	"github.com/forgedev/forged/contract"
	"github.com/forgedev/forged/dockerops"
	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/messages"
)

// Memory every sandbox reserves beyond its worker, as the seed requires.
const (
	serviceMemoryPerService = 1 << 30
	minRuntimeOverhead      = 128 << 20
)

// Confinement is what the engine and host guarantee, from the latest
// preflight report (AttemptConfig.Confinement).
type Confinement struct {
	// Security is what the engine enforces (seccomp, LSMs).
	Security dockerops.EngineSecurity
	// NetworkIsolation is nil when an attempt may be given an isolated
	// network (dockerops.CreateIsolatedNetwork); otherwise it is the
	// refusal, with code failure.SandboxNetworkIsolation.
	NetworkIsolation error
}

// unknownConfinement is assumed without preflight facts: nothing that
// needs them is admitted.
func unknownConfinement() Confinement {
	return Confinement{NetworkIsolation: failure.New(failure.SandboxNetworkIsolation, "no preflight report says whether attempt networks can be isolated from the host")}
}

// checkDispatchSupported refuses, before anything is created, what this
// runner cannot honour yet or may not run. An attempt that would need a
// network (egress) is refused first when this host cannot isolate one.
func checkDispatchSupported(d *messages.Dispatch, canPublish bool, conf Confinement) error {
	switch d.Sandbox.NetworkPolicy.Mode {
	case messages.NetworkPublicAllowlist:
		if conf.NetworkIsolation != nil {
			return conf.NetworkIsolation
		}
		return failure.New(failure.SandboxEgressUnsupported, "public_allowlist egress needs the egress proxy, which this runner does not provide yet")
	case messages.NetworkOpenPublic:
		return failure.New(failure.PolicyMismatch, "open_public sandbox networking is not permitted by this runner policy")
	}
	if d.Sandbox.PublicationMode == messages.PublicationBridgePush && !canPublish {
		return failure.New(failure.SandboxOutputPublishForbid, "this runner has no publication grant redeemer configured")
	}
	return nil
}

// checkContractSupported refuses contracts this runner cannot honour
// (caches in a mode the operator's policy forbids, with
// failure.SandboxCachesUnsupported; services are checked against the
// catalogue in the prepare step), and checks the dispatch reserved enough
// memory for the contract (as the seed's validateSandboxMemoryReservation;
// the egress proxy's share joins it with public_allowlist, which
// checkDispatchSupported refuses until the egress proxy exists). Services
// need an attempt network: they are refused first when this host cannot
// isolate one. (The supervisor's budget holds the dispatch's worker,
// service and overhead memory against the host at admission.)
func checkContractSupported(d *messages.Dispatch, c contract.Contract, conf Confinement, cachePolicy caches.Policy) error {
	if len(c.Services) > 0 && conf.NetworkIsolation != nil {
		return conf.NetworkIsolation
	}
	if err := cachePolicy.Check(c.Caches); err != nil {
		return err
	}
	r := d.Sandbox.RequestedResources
	needService := int64(len(c.Services)) * serviceMemoryPerService
	needOverhead := int64(minRuntimeOverhead)
	if r.ServiceMemoryLimitBytes < needService || r.RuntimeOverheadBytes < needOverhead {
		return failure.New(failure.SandboxCapacityProfile,
			"reserved %d service bytes and %d runtime overhead bytes; the contract requires at least %d and %d",
			r.ServiceMemoryLimitBytes, r.RuntimeOverheadBytes, needService, needOverhead)
	}
	return nil
}
