package actortest

import (
	"time"

	"github.com/forgedev/forged/internal/kit/ids"
	"github.com/forgedev/forged/messages"
)

// NewDispatch returns a valid adoption dispatch with fresh ids whose lease
// expires at expiresAt: no network, no publication, 256 MiB, one CPU,
// the task `true`, repository "r" at /srv/r on main. Change what a test
// is about after it.
func NewDispatch(expiresAt time.Time) *messages.Dispatch {
	return &messages.Dispatch{
		Session:    messages.SessionRef{ID: ids.NewUUID()},
		Execution:  messages.ExecutionRef{RunnerID: ids.NewUUID()},
		Repo:       messages.RepoRef{Name: "r", LocalPath: "/srv/r", DefaultBranch: "main"},
		BaseBranch: "main",
		Lease:      messages.Lease{WorktreeKey: "forge/t", ExpiresAt: expiresAt, FencingToken: ids.NewUUID()},
		Sandbox: messages.SandboxSpec{
			DispatchAttemptID: ids.NewUUID(), ExecutionLeaseID: ids.NewUUID(), RunnerInstanceID: ids.NewUUID(),
			ExecutionPolicy: messages.PolicyAdoption, NetworkPolicy: messages.NetworkPolicy{Mode: messages.NetworkNone},
			RequestedResources: messages.RequestedResources{WorkerMemoryLimitBytes: 256 << 20, CPUMillis: 1000, PIDs: 128, RuntimeOverheadBytes: 128 << 20},
			PublicationMode:    messages.PublicationNone,
		},
		Task: messages.Task{Argv: []string{"true"}},
	}
}
