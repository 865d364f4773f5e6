package actors

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/forgedev/forged/dockerops"
	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/gitops"
	"github.com/forgedev/forged/internal/kit/atomicfile"
	"github.com/forgedev/forged/internal/kit/strictjson"
	"github.com/forgedev/forged/internal/sandbox/contract"
	"github.com/forgedev/forged/internal/sandbox/egress"
	"github.com/forgedev/forged/internal/sandbox/services"
	"github.com/forgedev/forged/internal/state/ledger"
	"github.com/forgedev/forged/messages"
)

// Re-adoption: a forged process that starts while a worker of a previous
// process still runs (or finished while no forged was there) takes the
// attempt over instead of reaping it. What it needs is in two places:
//
//   - the ledger's adoption record (ledger.Adoption): the container, the
//     image, the lease's renewal state, the sealed control key, the time
//     limits' start, the event sequence reached, the worker protocol
//     version, and the digest of
//   - the attempt's state file (adoptionStateFile in its work directory):
//     the dispatch (resources, publication request, task), the prepared
//     input's identity and the contract source, too large for a ledger.
//
// LoadAdoption checks both against each other and against the state root's
// host key; AdoptedAttemptProps starts an attempt actor from what it
// loaded, in phase running, with its worker actor re-attached.

// adoptionStateFile is the state file's name in the attempt's work
// directory (STATE_ROOT/attempts/<hex>/).
const adoptionStateFile = "adoption.json"

// maxAdoptionStateBytes bounds the state file: a dispatch, a contract and
// a few ids.
const maxAdoptionStateBytes = messages.MaxDispatchBytes + 512<<10

// adoptionState is the state file's content.
type adoptionState struct {
	Dispatch        json.RawMessage `json:"dispatch"`
	InputCommitSHA  string          `json:"inputCommitSha"`
	ConfigCommitSHA string          `json:"configCommitSha"`
	ContextDigest   string          `json:"contextDigest"`
	ContractSource  []byte          `json:"contractSource"`
	Security        []string        `json:"security"`
}

// writeAdoptionState writes the state file of an attempt whose input was
// prepared, and returns its digest for the ledger.
func writeAdoptionState(workDir string, d *messages.Dispatch, p *gitops.Prepared, security []string) (string, error) {
	raw, err := json.Marshal(d)
	if err != nil {
		return "", err
	}
	data, err := json.Marshal(adoptionState{Dispatch: raw, InputCommitSHA: p.InputCommitSHA, ConfigCommitSHA: p.ConfigCommitSHA,
		ContextDigest: p.ContextDigest, ContractSource: p.ContractSource, Security: security})
	if err != nil {
		return "", err
	}
	if err := atomicfile.Write(filepath.Join(workDir, adoptionStateFile), data, 0o600); err != nil {
		return "", failure.Wrap(failure.SandboxInputFailed, err, "write the attempt's adoption state")
	}
	return sha256Digest(data), nil
}

func sha256Digest(data []byte) string {
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Adopted is an attempt a previous forged process left running, loaded and
// checked for re-adoption.
type Adopted struct {
	Entry      ledger.Entry
	Dispatch   *messages.Dispatch
	prepared   *gitops.Prepared
	contract   *contract.Parsed
	security   []string
	controlKey string
	// EgressReported is how many sandbox_egress_request events of the
	// attempt the previous processes delivered (its caller counts them in
	// the attempt's kept event log): the re-attached proxy's access log
	// reports only the records after them.
	EgressReported int
	// WorkerExited: the worker finished while no forged ran (its caller
	// asked the engine). Its services are then not re-attached: they
	// served a task that is over, and the teardown removes them.
	WorkerExited bool
}

// User is the sandbox user the adopted attempt runs as, from its ledger:
// it keeps it, and so its slot's uid (zero: a ledger from before users were
// recorded, whose sandbox runs as messages.ImageUser).
func (ad *Adopted) User() messages.SandboxUser {
	if ad.Entry.Adoption == nil {
		return messages.SandboxUser{}
	}
	return ad.Entry.Adoption.User
}

// LoadAdoption reads and checks what re-adopting the attempt of e needs:
// its state file must match the ledger's digest, decode strictly, name
// the same attempt, lease and fence, and reproduce the recorded input and
// contract; the control key must open under hostKey. Any failure is
// failure.SandboxReadoptLedgerDamaged, naming what did not check out.
func LoadAdoption(stateRoot string, e ledger.Entry, hostKey []byte) (*Adopted, error) {
	damaged := func(format string, args ...any) error {
		return failure.New(failure.SandboxReadoptLedgerDamaged, "attempt %s: %s", e.AttemptID, fmt.Sprintf(format, args...))
	}
	rec := e.Adoption
	if rec == nil {
		return nil, damaged("the ledger has no adoption record")
	}
	names, err := dockerops.NamesFor(e.AttemptID)
	if err != nil {
		return nil, damaged("%v", err)
	}
	workDir := attemptWorkDir(stateRoot, names.AttemptHex)
	path := filepath.Join(workDir, adoptionStateFile)
	info, err := os.Lstat(path)
	if err != nil || !info.Mode().IsRegular() || info.Size() > maxAdoptionStateBytes {
		return nil, damaged("the state file %s is missing, not a regular file or too large", path)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, damaged("read the state file: %v", err)
	}
	if sha256Digest(data) != rec.StateDigest {
		return nil, damaged("the state file does not match the ledger's digest")
	}
	var st adoptionState
	if err := strictjson.Decode(data, &st); err != nil {
		return nil, damaged("decode the state file: %v", err)
	}
	d, err := messages.DecodeDispatch(bytes.NewReader(st.Dispatch))
	if err != nil {
		return nil, damaged("the recorded dispatch: %v", err)
	}
	switch {
	case d.AttemptID() != e.AttemptID, d.Sandbox.ExecutionLeaseID != e.ExecutionLeaseID, d.Lease.FencingToken != e.FencingToken,
		d.Execution.RunnerID != e.RunnerID, d.Sandbox.RunnerInstanceID != e.RunnerInstanceID:
		return nil, damaged("the recorded dispatch names another attempt, lease, fence or runner than the ledger")
	case st.InputCommitSHA != rec.InputCommitSHA:
		return nil, damaged("the recorded input commit differs from the ledger's")
	}
	parsed, err := contract.Parse(st.ContractSource)
	if err != nil || parsed.Digest != rec.ContractDigest {
		return nil, damaged("the recorded contract does not reproduce the ledger's contract digest")
	}
	if err := checkAdoptedSidecars(e, d, parsed); err != nil {
		return nil, damaged("%v", err)
	}
	key, err := ledger.Unseal(hostKey, rec.SealedControlKey, e.AttemptID)
	if err != nil {
		return nil, damaged("the control key: %v", err)
	}
	prepared := &gitops.Prepared{InputCommitSHA: st.InputCommitSHA, ConfigCommitSHA: st.ConfigCommitSHA, ContractSource: st.ContractSource,
		ContextDigest: st.ContextDigest, BundlePath: filepath.Join(workDir, "input", "repo.bundle")}
	return &Adopted{Entry: e, Dispatch: d, prepared: prepared, contract: parsed, security: st.Security, controlKey: string(key)}, nil
}

// AdoptedAttemptProps returns the props of an attempt actor that takes over
// the adopted attempt: like AttemptProps, but it starts in phase running
// with its worker re-attached (see startAdopted).
func AdoptedAttemptProps(ad *Adopted, subscriber, supervisor *actor.PID, cfg AttemptConfig, deps Deps) *actor.Props {
	cfg = cfg.withDefaults()
	cfg.User = ad.User()
	children := newChildSupervisor()
	return actor.PropsFromProducer(func() actor.Actor {
		return &attemptActor{cfg: cfg, deps: deps, d: ad.Dispatch, adopted: ad, subscriber: subscriber, supervisor: supervisor, children: children}
	}, actor.WithSupervisor(children))
}

// adoptionRecord is the ledger's adoption record, once the worker exists
// and the attempt can seal its key (nil otherwise: such an attempt is
// reaped, not re-adopted, after a restart).
func (a *attemptActor) adoptionRecord() *ledger.Adoption {
	if a.worker.containerID == "" || a.worker.sealedKey == "" || a.in.stateDigest == "" {
		return nil
	}
	return &ledger.Adoption{
		WorkerProtocol:   messages.WorkerProtocolVersion,
		ContainerID:      a.worker.containerID,
		Image:            a.image.id,
		Network:          a.sidecars.network,
		InputCommitSHA:   a.in.prepared.InputCommitSHA,
		ContractDigest:   a.in.contract.Digest,
		StateDigest:      a.in.stateDigest,
		SealedControlKey: a.worker.sealedKey,
		LeaseRenewals:    a.worker.renewals,
		LeaseRenewedAt:   a.worker.renewedAt,
		WorkerCreatedAt:  a.worker.createdAt,
		IdleSince:        a.timers.idleSince,
		Resources:        a.d.Sandbox.RequestedResources,
		PublicationMode:  a.d.Sandbox.PublicationMode,
		PublishGrant:     a.d.Sandbox.PublishGrant,
		EventSeq:         a.worker.eventSeq,
		ExitSeen:         a.worker.exit != nil,
		User:             a.cfg.User,
	}
}

// recordExitSeen writes the ledger saying the host saw the worker exit,
// and returns when it is durable; nil when the attempt is not re-adoptable.
func (a *attemptActor) recordExitSeen() <-chan error {
	if a.worker.sealedKey == "" || a.ledger.state != ledger.Active {
		return nil
	}
	return a.ledger.post(ledger.Active, a.ledgerEntry(ledger.Active))
}

// sealControlKey seals the control key for the ledger with the host key
// (AttemptConfig.HostKey); without one, the attempt is not re-adoptable.
func (a *attemptActor) sealControlKey() {
	if len(a.cfg.HostKey) == 0 {
		return
	}
	sealed, err := ledger.Seal(a.cfg.HostKey, []byte(a.worker.controlKey), a.d.AttemptID())
	if err == nil {
		a.worker.sealedKey = sealed
	}
}

// checkpointDone says the ledger write that recorded the event sequence
// up to seq is durable (or failed: it can be no more durable).
type checkpointDone struct{ seq uint64 }

// pendingEvent is an event held until the checkpoint covering it is
// durable: a worker event (seq, its Next) or a host event emitted after
// one (seq 0), held to keep the order.
type pendingEvent struct {
	ev  messages.Event
	seq uint64
}

// Exactly once across a restart: a worker event is delivered only once
// the ledger records a sequence number past it. So an event a client saw
// before forged died is below the recorded number, and the re-adopting
// process does not deliver it again; an event not yet delivered is at or
// above it, and is. One checkpoint write is in flight at a time; events
// arriving meanwhile wait for the next one (a write's latency, shared by
// every event of the batch).

// holdsEvents reports whether worker events wait for their checkpoint:
// the attempt is re-adoptable, its worker runs and its ledger is active.
func (a *attemptActor) holdsEvents() bool {
	return a.worker.sealedKey != "" && a.worker.pid != nil && a.ledger.state == ledger.Active && !a.tearingDown
}

// onWorkerEvent takes one worker event: delivered at once, or held until
// the checkpoint recording it is durable.
func (a *attemptActor) onWorkerEvent(ctx actor.Context, msg WorkerOutput) {
	if msg.Next > a.worker.eventSeq {
		a.worker.eventSeq = msg.Next
	}
	if !a.holdsEvents() || msg.Next == 0 {
		a.emit(ctx, msg.Event)
		return
	}
	a.worker.pending = append(a.worker.pending, pendingEvent{ev: msg.Event, seq: msg.Next})
	a.checkpointEvents(ctx)
}

// checkpointEvents records the event sequence reached in the ledger.
func (a *attemptActor) checkpointEvents(ctx actor.Context) {
	if a.worker.checkpointing {
		a.worker.checkpointDirty = true
		return
	}
	if !a.holdsEvents() {
		a.flushEvents(ctx, ^uint64(0))
		return
	}
	a.worker.checkpointing, a.worker.checkpointDirty = true, false
	seq := a.worker.eventSeq
	done := a.ledger.post(ledger.Active, a.ledgerEntry(ledger.Active))
	runAsync(ctx, context.Background(), "event checkpoint", func(context.Context) any {
		<-done
		return checkpointDone{seq: seq}
	})
}

// onCheckpointDone delivers the events the checkpoint covers, and writes
// the next one when events arrived meanwhile.
func (a *attemptActor) onCheckpointDone(ctx actor.Context, msg checkpointDone) {
	a.worker.checkpointing = false
	a.flushEvents(ctx, msg.seq)
	if a.worker.checkpointDirty || len(a.worker.pending) > 0 {
		a.worker.checkpointDirty = false
		a.checkpointEvents(ctx)
	}
}

// flushEvents delivers, in order, the held events up to the first worker
// event past seq.
func (a *attemptActor) flushEvents(ctx actor.Context, seq uint64) {
	n := 0
	for _, p := range a.worker.pending {
		if p.seq > seq {
			break
		}
		a.send(ctx, p.ev)
		n++
	}
	a.worker.pending = a.worker.pending[n:]
	if len(a.worker.pending) == 0 {
		a.worker.pending = nil
	}
}

// startAdopted is start for an adopted attempt: the fence and the
// watchdog from the ledger's lease, the worker re-attached at the event
// sequence recorded, the time limits continued (the hard wall from the
// worker's creation, the idle limit from the last output recorded),
// its sidecars re-attached and probed again (readoptSidecars), the
// sampler restarted, and a sandbox_readopted event.
func (a *attemptActor) startAdopted(ctx actor.Context) {
	ad, rec := a.adopted, a.adopted.Entry.Adoption
	a.fence = newFence(a.cfg.Clock, a.d.Lease.FencingToken, ad.Entry.ExpiresAt)
	a.ledger.writer = startLedgerWriter(ledger.Store{Root: a.cfg.StateRoot})
	a.ledger.state, a.ledger.written = ledger.Active, true
	a.watchdog = a.children.spawn(ctx, newLeaseWatchdogProps(ad.Entry.ExpiresAt, a.cfg.Clock), kindWatchdog)
	names, err := dockerops.NamesFor(a.d.AttemptID())
	if err != nil {
		a.phase = messages.PhaseRunning
		a.fail(err)
		a.advance(ctx)
		return
	}
	a.in.names, a.in.workDir = names, attemptWorkDir(a.cfg.StateRoot, names.AttemptHex)
	a.in.prepared, a.in.contract, a.in.security, a.in.provisioned = ad.prepared, ad.contract, ad.security, true
	a.in.stateDigest = rec.StateDigest
	a.in.isolation, a.worker.runtime = ad.Entry.Isolation, ad.Entry.WorkerRuntime
	a.image.id = rec.Image
	a.worker.containerID, a.worker.controlKey, a.worker.sealedKey = rec.ContainerID, ad.controlKey, rec.SealedControlKey
	a.worker.createdAt, a.worker.eventSeq, a.worker.renewals, a.worker.renewedAt = rec.WorkerCreatedAt, rec.EventSeq, rec.LeaseRenewals, rec.LeaseRenewedAt
	if rec.LeaseRenewals == 0 {
		a.worker.packetExpiry = a.d.Lease.ExpiresAt // else a renewal may not have reached the worker: push it again
	}
	if labels, err := dockerops.Labels(a.d, a.image.id, a.in.contract.Digest); err == nil {
		a.in.labels = labels
	}
	a.setPhase(ctx, messages.PhaseRunning)
	sampledSidecars := a.readoptSidecars(ctx, rec)
	sidecars := []map[string]string{}
	for _, c := range sampledSidecars {
		sidecars = append(sidecars, map[string]string{"id": c.ID, "name": c.Name, "role": c.Role})
	}
	a.emit(ctx, messages.RunnerEvent("sandbox_readopted", fmt.Sprintf("Re-adopted sandbox %s after a restart of forged.", names.AttemptHex), map[string]any{
		"agentContainer": map[string]string{"id": rec.ContainerID, "name": names.Container, "role": "agent"}, "sidecarContainers": sidecars,
		"eventSeq": rec.EventSeq, "expiresAt": ad.Entry.ExpiresAt.UTC().Format(time.RFC3339Nano),
		"workerCreatedAt": rec.WorkerCreatedAt.UTC().Format(time.RFC3339Nano), "runnerInstanceId": a.d.Sandbox.RunnerInstanceID,
	}))
	idleSince := rec.IdleSince // the worker's later output, logged while forged was away, moves it on
	if idleSince.IsZero() {
		idleSince = a.cfg.Clock.Now() // an older forged's record: the idle limit starts again
	}
	a.armTimeLimitsSince(ctx, rec.WorkerCreatedAt, idleSince)
	limits := a.limits()
	job := adoptedWorkerJob{
		containerID: rec.ContainerID,
		eventKey:    messages.EventKey(a.worker.controlKey),
		resumeAt:    rec.EventSeq,
		storageFull: a.storageFull(),
		runTimeout:  max(limits.HardWall+a.cfg.LimitGrace+runMargin-a.cfg.Clock.Now().Sub(rec.WorkerCreatedAt), runMargin),
	}
	a.worker.pid = a.children.spawn(ctx, newAdoptedWorkerProps(a.deps.Docker, job), kindWorker)
	a.sampler = a.children.spawn(ctx, newMemorySamplerProps(a.d.AttemptID(), a.deps.Docker, a.deps.Kernel, a.cfg.Clock, a.cfg.SampleInterval,
		append([]SampledContainer{{ID: rec.ContainerID, Name: names.Container, Role: roleAgent}}, sampledSidecars...), a.discardWorkspace()), kindSampler)
	a.writeLedger(ledger.Active)
}

// checkAdoptedSidecars checks that the ledger of an attempt with an
// attempt network recorded it, each declared service's container, and
// with public_allowlist the egress network and proxy: its worker ran only
// once they all existed and were ready.
func checkAdoptedSidecars(e ledger.Entry, d *messages.Dispatch, parsed *contract.Parsed) error {
	declared := parsed.Contract.ServiceTypes()
	allowlist := d.Sandbox.NetworkPolicy.Mode == messages.NetworkPublicAllowlist
	if len(declared) == 0 && !allowlist {
		return nil
	}
	if createdID(e, ledger.ResourceNetwork, "internal") == "" {
		return fmt.Errorf("the attempt has services or an egress proxy but the ledger records no attempt network")
	}
	for _, s := range declared {
		if createdID(e, ledger.ResourceContainer, serviceRole(s)) == "" {
			return fmt.Errorf("the contract declares service %s but the ledger records no container of it", s)
		}
	}
	if allowlist && (createdID(e, ledger.ResourceNetwork, "egress") == "" || createdID(e, ledger.ResourceContainer, roleEgressProxy) == "") {
		return fmt.Errorf("the network policy is public_allowlist but the ledger records no egress network or proxy")
	}
	return nil
}

// createdID is the id of the resource of type typ and role the ledger
// records as created, "" when none.
func createdID(e ledger.Entry, typ, role string) string {
	for _, r := range e.Created {
		if r.Type == typ && r.Role == role {
			return r.ID
		}
	}
	return ""
}

// readoptSidecars re-attaches the sidecars of an adopted attempt: the
// attempt network, each service container and the egress proxy from the
// ledger (checked by LoadAdoption), each watched by a sidecar actor in
// adopt mode that checks it still runs and probes it again as at start
// (sidecar.go); the proxy's access log is followed again from its start,
// reporting only the records the previous processes did not deliver
// (Adopted.EgressReported). The services of a worker that finished while
// forged was away are only kept in the ledger; its proxy is re-attached
// still, for the records logged meanwhile. It returns the containers for
// the memory sampler.
func (a *attemptActor) readoptSidecars(ctx actor.Context, rec *ledger.Adoption) []SampledContainer {
	declared := a.in.contract.Contract.ServiceTypes()
	allowlist := a.d.Sandbox.NetworkPolicy.Mode == messages.NetworkPublicAllowlist
	if len(declared) == 0 && !allowlist {
		return nil
	}
	e := a.adopted.Entry
	a.sidecars.network, a.sidecars.networkID = rec.Network, createdID(e, ledger.ResourceNetwork, "internal")
	if a.sidecars.network == "" {
		a.sidecars.network = a.in.names.Network
	}
	a.sidecars.runs = map[string]*sidecarRun{}
	within := a.cfg.ServiceReadyWithin
	var sampled []SampledContainer
	if len(declared) > 0 {
		shared := services.Attempt{
			Prefix: a.in.names.Prefix, Network: a.sidecars.network,
			Labels: a.in.labels, SecurityOpts: a.in.security,
			ServiceMemoryBytes: a.d.Sandbox.RequestedResources.ServiceMemoryLimitBytes, Count: len(declared),
		}
		for _, s := range declared {
			def, _ := services.DefinitionFor(s)
			id := createdID(e, ledger.ResourceContainer, serviceRole(s))
			if a.adopted.WorkerExited {
				// Kept for the ledger only: no actor, nothing to wait for.
				a.sidecars.runs[serviceRole(s)] = &sidecarRun{service: s, containerID: id, ready: true, done: true}
				continue
			}
			job := serviceJob(s, def.ContainerSpec(shared, ""), a.serviceProbe(def, s, within), within)
			job.adoptID = id
			a.spawnSidecar(ctx, job, s)
			a.sidecars.runs[job.role].containerID = id
			sampled = append(sampled, SampledContainer{ID: id, Name: services.ContainerName(a.in.names.Prefix, s), Role: serviceRole(s)})
		}
	}
	if allowlist {
		a.sidecars.egressNetworkID = createdID(e, ledger.ResourceNetwork, "egress")
		id := createdID(e, ledger.ResourceContainer, roleEgressProxy)
		spec := dockerops.EgressSpec{Name: egressContainerName(a.in.names), EgressNetwork: egressNetworkName(a.in.names), Alias: egress.Alias, MemoryBytes: egressProxyMemory}
		job := egressJob(spec, a.egressProbe(within), within)
		job.adoptID, job.skipReports = id, a.adopted.EgressReported
		a.spawnSidecar(ctx, job, "")
		a.sidecars.runs[job.role].containerID = id
		sampled = append(sampled, SampledContainer{ID: id, Name: spec.Name, Role: roleEgressProxy})
	}
	return sampled
}
