package reaper

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/forgedev/forged/dockerops"
	"github.com/forgedev/forged/internal/state/ledger"
	"github.com/forgedev/forged/messages"
)

// uuid returns a random lowercase version-4 UUID.
func uuid() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// fakeDocker is an in-memory engine: objects by id, removal failures to
// inject, and a log of every teardown and removal.
type fakeDocker struct {
	mu        sync.Mutex
	objects   []Object
	failing   map[string]bool // object ids whose removal fails
	listErr   error
	teardowns []dockerops.Ownership
	removed   []string // ids, in removal order (teardown and Remove)
}

func (f *fakeDocker) add(objs ...Object) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.objects = append(f.objects, objs...)
}

func (f *fakeDocker) has(id string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.ContainsFunc(f.objects, func(o Object) bool { return o.ID == id })
}

func (f *fakeDocker) removeLocked(id string) error {
	if f.failing[id] {
		return errors.New("conflict: object " + id + " is in use\nby something")
	}
	f.objects = slices.DeleteFunc(f.objects, func(o Object) bool { return o.ID == id })
	f.removed = append(f.removed, id)
	return nil
}

// Teardown removes the objects matching owner exactly, kind by kind, as
// dockerops does, and fails when any removal failed.
func (f *fakeDocker) Teardown(_ context.Context, owner dockerops.Ownership, source string) (messages.CleanupReport, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.teardowns = append(f.teardowns, owner)
	report := messages.CleanupReport{ReportID: uuid(), Source: source, Actions: []messages.CleanupAction{}}
	var failed error
	for _, kind := range []string{KindContainer, KindNetwork, KindVolume} {
		for _, o := range slices.Clone(f.objects) {
			if o.Kind != kind || !owner.Matches(o.Labels) {
				continue
			}
			a := messages.CleanupAction{
				DispatchAttemptID: owner.AttemptID, FencingToken: owner.FencingToken, RunnerInstanceID: owner.RunnerInstanceID,
				ResourceType: kind, ResourceID: o.ID, Outcome: ledger.OutcomeRemoved, OccurredAt: time.Now().UTC(),
			}
			if err := f.removeLocked(o.ID); err != nil {
				a.Outcome, a.Message, failed = ledger.OutcomeFailed, failureMessage(err), err
				report.Remaining++
			}
			report.Actions = append(report.Actions, a)
		}
	}
	return report, failed
}

func (f *fakeDocker) ListManaged(context.Context) ([]Object, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.listErr != nil {
		return nil, f.listErr
	}
	var out []Object
	for _, o := range f.objects {
		if o.Labels[dockerops.LabelManaged] == "true" {
			out = append(out, o)
		}
	}
	return out, nil
}

func (f *fakeDocker) RemoveManaged(_ context.Context, obj Object) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.removeLocked(obj.ID)
}

// attempt is one attempt's identity in a test world.
type attempt struct {
	owner     dockerops.Ownership
	expiresAt time.Time
}

func newAttempt(runnerID, instanceID string, expiresAt time.Time) attempt {
	return attempt{
		owner: dockerops.Ownership{
			AttemptID: uuid(), ExecutionLeaseID: uuid(), RunnerID: runnerID,
			RunnerInstanceID: instanceID, FencingToken: uuid(),
		},
		expiresAt: expiresAt,
	}
}

// labels are the complete labels of the attempt's objects.
func (a attempt) labels() map[string]string {
	return map[string]string{
		dockerops.LabelManaged:          "true",
		dockerops.LabelSessionID:        "session",
		dockerops.LabelResourceLeaseID:  a.owner.ExecutionLeaseID,
		dockerops.LabelExecutionLeaseID: a.owner.ExecutionLeaseID,
		dockerops.LabelAttemptID:        a.owner.AttemptID,
		dockerops.LabelFencingToken:     a.owner.FencingToken,
		dockerops.LabelRunnerID:         a.owner.RunnerID,
		dockerops.LabelRunnerInstanceID: a.owner.RunnerInstanceID,
		dockerops.LabelInitialExpiresAt: a.expiresAt.UTC().Format(time.RFC3339Nano),
	}
}

// objects are a container, a network and a volume of the attempt,
// created at created.
func (a attempt) objects(created time.Time) []Object {
	hex := a.owner.AttemptID[:8]
	return []Object{
		{Kind: KindVolume, ID: "forge-" + hex + "-workspace", Labels: a.labels(), Created: created},
		{Kind: KindNetwork, ID: "net-" + hex, Labels: a.labels(), Created: created},
		{Kind: KindContainer, ID: "ctr-" + hex, Labels: a.labels(), Created: created},
	}
}

// entry is the attempt's ledger in state.
func (a attempt) entry(state ledger.State) ledger.Entry {
	return ledger.Entry{
		AttemptID: a.owner.AttemptID, ExecutionLeaseID: a.owner.ExecutionLeaseID, FencingToken: a.owner.FencingToken,
		RunnerID: a.owner.RunnerID, RunnerInstanceID: a.owner.RunnerInstanceID, WorktreeKey: "forge/task",
		ExpiresAt: a.expiresAt, State: state,
		Planned: []ledger.Resource{{Type: ledger.ResourceContainer, Name: "forge-agent-x", Role: "agent"}},
	}
}

// objectIDs lists the objects' ids.
func objectIDs(objs []Object) []string {
	out := make([]string, len(objs))
	for i, o := range objs {
		out[i] = o.ID
	}
	return out
}
