package runner

import (
	"context"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/forgedev/forged/actors"
	"github.com/forgedev/forged/dockerops"
	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/state/ledger"
	"github.com/forgedev/forged/internal/state/reaper"
	"github.com/forgedev/forged/messages"
	"github.com/forgedev/forged/supervisor"
)

// adoptionPlan is the start-up decision over the ledgers a previous
// process left: the attempts re-adopted, and why each other one is reaped.
type adoptionPlan struct {
	adopted  []*actors.Adopted
	live     map[string]bool // adopted attempt ids
	liveHex  map[string]bool // the same, without hyphens (volume images)
	verdicts map[string]reaper.AdoptVerdict
}

// planAdoption decides, for every valid ledger of this runner id, whether
// its attempt is re-adopted (reaper.DecideAdoption on the engine's facts,
// then actors.LoadAdoption against the state file and the host key). It
// changes nothing: the start-up reaper round then reaps what is not
// adopted. Without a host key nothing is adopted.
func (r *Runner) planAdoption(ctx context.Context, runnerID string, hostKey []byte, now time.Time) adoptionPlan {
	plan := adoptionPlan{live: map[string]bool{}, liveHex: map[string]bool{}, verdicts: map[string]reaper.AdoptVerdict{}}
	entries, _, err := r.store.List()
	if err != nil {
		r.logger.Error("could not list the ledgers to re-adopt; every attempt left is reaped", "err", err)
		return plan
	}
	for _, e := range entries {
		if e.RunnerID != runnerID {
			continue
		}
		facts := r.workerFacts(ctx, e)
		v := reaper.DecideAdoption(e, facts, messages.KnownWorkerProtocol, now)
		if v.Adopt {
			ad, err := r.loadAdoption(e, hostKey)
			if err == nil {
				ad.WorkerExited = !facts.Running
				plan.adopted = append(plan.adopted, ad)
				plan.live[e.AttemptID] = true
				if names, err := dockerops.NamesFor(e.AttemptID); err == nil {
					plan.liveHex[names.AttemptHex] = true
				}
				r.logger.Info("re-adopting an attempt a previous process left running", "attempt", e.AttemptID, "container", e.Adoption.ContainerID)
				continue
			}
			v = reaper.AdoptVerdict{Code: failure.CodeOf(err), Reason: err.Error() + "; it was reaped, not re-adopted"}
		}
		plan.verdicts[e.AttemptID] = v
		r.logger.Info("not re-adopting an attempt a previous process left", "attempt", e.AttemptID, "code", v.Code, "reason", v.Reason)
	}
	return plan
}

func (r *Runner) loadAdoption(e ledger.Entry, hostKey []byte) (*actors.Adopted, error) {
	if len(hostKey) == 0 {
		return nil, failure.New(failure.SandboxReadoptLedgerDamaged, "the state root's host key is unavailable, so the attempt's control key cannot be opened")
	}
	return actors.LoadAdoption(r.store.Root, e, hostKey)
}

// workerFacts asks the engine about the worker container of e's adoption
// record. An engine error counts as a worker gone: the reaper round that
// follows decides what it can remove.
func (r *Runner) workerFacts(ctx context.Context, e ledger.Entry) reaper.WorkerFacts {
	if e.Adoption == nil {
		return reaper.WorkerFacts{}
	}
	state, err := r.docker.InspectState(ctx, e.Adoption.ContainerID)
	if err != nil {
		if !dockerops.IsNotFound(err) {
			r.logger.Warn("could not inspect a previous process's worker", "attempt", e.AttemptID, "err", err)
		}
		return reaper.WorkerFacts{}
	}
	if state.Status == "created" {
		// Created, never started: the worker never ran (forged died
		// between create and start), so there is nothing to re-adopt.
		return reaper.WorkerFacts{NeverStarted: true}
	}
	return reaper.WorkerFacts{Found: true, Running: state.Running}
}

// adoptions is the supervisor's Adopt: each adopted attempt gets its event
// log and subscriber, and its attempt actor's props.
func (r *Runner) adoptions(adopted []*actors.Adopted, props func(ad *actors.Adopted, subscriber, sup *actor.PID) *actor.Props) func(*actor.ActorSystem) []supervisor.Adoption {
	return func(system *actor.ActorSystem) []supervisor.Adoption {
		var out []supervisor.Adoption
		for _, ad := range adopted {
			log, ok := r.logs.resume(ad.Dispatch.AttemptID()) // its events go on from the previous process's
			if !ok {
				continue
			}
			ad.EgressReported = countEvents(log.Events(), "sandbox_egress_request")
			subscriber := system.Root.Spawn(r.metrics.Instrument(subscriberProps(log, r.metrics), "subscriber"))
			out = append(out, supervisor.Adoption{Dispatch: ad.Dispatch, User: ad.User(), Subscriber: subscriber,
				NewAttempt: func(sub, sup *actor.PID) *actor.Props { return props(ad, sub, sup) }})
		}
		return out
	}
}

// countEvents counts the events of type eventType: what a log delivered.
func countEvents(events []messages.Event, eventType string) int {
	n := 0
	for _, ev := range events {
		if ev.EventType == eventType {
			n++
		}
	}
	return n
}
