package actors

import (
	"github.com/forgedev/forged/dockerops"
	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/sandbox/caches"
	"github.com/forgedev/forged/internal/sandbox/contract"
	"github.com/forgedev/forged/internal/sandbox/egress"
	"github.com/forgedev/forged/messages"
)

// Memory every sandbox reserves beyond its worker, as the seed requires:
// the egress proxy's share (its memory limit) joins the runtime overhead
// with public_allowlist.
const (
	serviceMemoryPerService = 1 << 30
	minRuntimeOverhead      = 128 << 20
	egressProxyMemory       = 256 << 20
)

// networkPolicyConfig is the operator's side of the network policy.
type networkPolicyConfig struct {
	egressEnabled   bool
	allowOpenPublic bool
}

// Confinement is what the engine and host guarantee, from the latest
// preflight report (AttemptConfig.Confinement).
type Confinement struct {
	// Security is what the engine enforces (seccomp, LSMs).
	Security dockerops.EngineSecurity
	// NetworkIsolation is nil when an attempt may be given an isolated
	// network (dockerops.CreateIsolatedNetwork); otherwise it is the
	// refusal, with code failure.SandboxNetworkIsolation.
	NetworkIsolation error
	// Storage is nil when attempt volumes are bounded (package quota);
	// otherwise it is why not, with code failure.SandboxStorageUnbounded
	// (see checkStorage).
	Storage error
	// Isolation is the operator's isolation floor (messages.IsolationRunc
	// or messages.IsolationGVisor; "" is runc) and Runtime the engine's
	// OCI runtime every worker runs under ("": the engine's default). See
	// checkIsolation.
	Isolation, Runtime string
	// NetworkRuntime is, under the gvisor floor, the engine's OCI runtime
	// the worker of an attempt with an attempt network (services,
	// public_allowlist) runs under: runsc with its own network stack. ""
	// when none works; NetworkRuntimeErr then says why.
	NetworkRuntime    string
	NetworkRuntimeErr string
	// OfferGVisor is the operator's permission for dispatches to ask for
	// gVisor on a runc-floor runner (--allow-gvisor-dispatch), and
	// RequiredIsolation the isolation sandbox_required dispatches demand
	// (--sandbox-required-isolation; "" or runc: the floor). GVisorRuntime
	// is runsc's registration when its probe passed ("" otherwise;
	// GVisorErr then says why). See attemptConfinement.
	OfferGVisor       bool
	RequiredIsolation string
	GVisorRuntime     string
	GVisorErr         string
	// GVisorServices is the operator's choice (--gvisor-services) to run
	// the services of an attempt under gVisor too, under NetworkRuntime,
	// when the attempt runs under gVisor (serviceRuntime).
	GVisorServices bool
}

// unknownConfinement is assumed without preflight facts: nothing that
// needs them is admitted.
func unknownConfinement() Confinement {
	return Confinement{NetworkIsolation: failure.New(failure.SandboxNetworkIsolation, "no preflight report says whether attempt networks can be isolated from the host"),
		Storage: failure.New(failure.SandboxStorageUnbounded, "no preflight report says whether attempt volumes are bounded")}
}

// checkDispatchSupported refuses, before anything is created, what this
// runner cannot honour or may not run. public_allowlist needs an isolated
// attempt network (refused first when this host cannot isolate one), the
// egress proxy enabled, and an allowlist the proxy accepts; open_public
// needs the operator's permission and is never run under
// sandbox_required.
func checkDispatchSupported(d *messages.Dispatch, canPublish bool, conf Confinement, net networkPolicyConfig) error {
	if err := checkIsolationNetwork(d.Sandbox.NetworkPolicy.Mode, conf); err != nil {
		return err
	}
	switch d.Sandbox.NetworkPolicy.Mode {
	case messages.NetworkPublicAllowlist:
		if conf.NetworkIsolation != nil {
			return conf.NetworkIsolation
		}
		if !net.egressEnabled {
			return failure.New(failure.SandboxEgressUnsupported, "public_allowlist needs the egress proxy, which this runner does not run (--egress)")
		}
		if _, err := egress.Domains(d.Sandbox.NetworkPolicy.AllowedHosts); err != nil {
			return err
		}
	case messages.NetworkOpenPublic:
		if d.Sandbox.ExecutionPolicy == messages.PolicySandboxRequired || !net.allowOpenPublic {
			return failure.New(failure.PolicyMismatch, "open_public sandbox networking is not permitted by this runner policy")
		}
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
// the egress proxy's share joins it with public_allowlist). Services
// need an attempt network: they are refused first when this host cannot
// isolate one. (The supervisor's budget holds the dispatch's worker,
// service and overhead memory against the host at admission.)
func checkContractSupported(d *messages.Dispatch, c contract.Contract, conf Confinement, cachePolicy caches.Policy) error {
	if err := checkIsolationServices(c.Services, conf); err != nil {
		return err
	}
	if len(c.Services) > 0 && conf.NetworkIsolation != nil {
		return conf.NetworkIsolation
	}
	if err := cachePolicy.Check(c.Caches); err != nil {
		return err
	}
	r := d.Sandbox.RequestedResources
	needService := int64(len(c.Services)) * serviceMemoryPerService
	needOverhead := int64(minRuntimeOverhead)
	if d.Sandbox.NetworkPolicy.Mode == messages.NetworkPublicAllowlist {
		needOverhead += egressProxyMemory
	}
	if r.ServiceMemoryLimitBytes < needService || r.RuntimeOverheadBytes < needOverhead {
		return failure.New(failure.SandboxCapacityProfile,
			"reserved %d service bytes and %d runtime overhead bytes; the contract requires at least %d and %d",
			r.ServiceMemoryLimitBytes, r.RuntimeOverheadBytes, needService, needOverhead)
	}
	return nil
}
