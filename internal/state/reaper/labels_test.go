package reaper

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/dockerops"
	"github.com/forgedev/forged/internal/state/ledger"
)

func TestLabelRules(t *testing.T) {
	type setup struct {
		w   *world
		cfg *Config
	}
	old := func(w *world) time.Time { return w.now.Add(-time.Hour) }
	// object builds the one object of a case.
	object := func(a attempt, created time.Time, mutate func(l map[string]string)) Object {
		labels := a.labels()
		if mutate != nil {
			mutate(labels)
		}
		return Object{Kind: KindVolume, ID: "vol-" + a.owner.AttemptID, Labels: labels, Created: created}
	}
	cases := []struct {
		name   string
		build  func(s setup) Object
		reason SkipReason // "" means removed
	}{
		{"own instance, old, not live", func(s setup) Object { return object(s.w.mine(), old(s.w), nil) }, ""},
		{"foreign runner", func(s setup) Object {
			return object(newAttempt(uuid(), uuid(), s.w.now.Add(-time.Hour)), old(s.w), nil)
		}, SkipForeignRunner},
		{"foreign runner id in upper case", func(s setup) Object {
			return object(s.w.mine(), old(s.w), func(l map[string]string) { l[dockerops.LabelRunnerID] = strings.ToUpper(s.w.runner) })
		}, SkipForeignRunner},
		{"fencing token missing", func(s setup) Object {
			return object(s.w.mine(), old(s.w), func(l map[string]string) { delete(l, dockerops.LabelFencingToken) })
		}, SkipIncompleteLabels},
		{"lease ids disagree", func(s setup) Object {
			return object(s.w.mine(), old(s.w), func(l map[string]string) { l[dockerops.LabelResourceLeaseID] = uuid() })
		}, SkipIncompleteLabels},
		{"instance id truncated", func(s setup) Object {
			return object(s.w.mine(), old(s.w), func(l map[string]string) { l[dockerops.LabelRunnerInstanceID] = s.w.instance[:8] })
		}, SkipIncompleteLabels},
		{"attempt id missing", func(s setup) Object {
			return object(s.w.mine(), old(s.w), func(l map[string]string) { delete(l, dockerops.LabelAttemptID) })
		}, SkipIncompleteLabels},
		{"too young", func(s setup) Object { return object(s.w.mine(), s.w.now.Add(-time.Minute), nil) }, SkipTooYoung},
		{"created after the round began", func(s setup) Object {
			s.cfg.Grace = NoGrace
			return object(s.w.mine(), s.w.now.Add(time.Second), nil)
		}, SkipNotBeforeSweep},
		{"whole-second time in the round's own second", func(s setup) Object {
			s.cfg.Grace = NoGrace
			return object(s.w.mine(), s.w.now.Truncate(time.Second), nil)
		}, SkipNotBeforeSweep},
		{"no grace, created just before", func(s setup) Object {
			s.cfg.Grace = NoGrace
			return object(s.w.mine(), s.w.now.Add(-time.Millisecond), nil)
		}, ""},
		{"unknown creation time", func(s setup) Object { return object(s.w.mine(), time.Time{}, nil) }, SkipUnknownAge},
		{"live", func(s setup) Object {
			a := s.w.mine()
			s.cfg.Live = func(id string) bool { return id == a.owner.AttemptID }
			return object(a, old(s.w), nil)
		}, SkipLive},
		{"own instance held by the server", func(s setup) Object {
			a := s.w.mine()
			s.cfg.SnapshotAvailable = true
			s.cfg.ServerSnapshot = []ServerAttempt{{AttemptID: a.owner.AttemptID, FencingToken: a.owner.FencingToken, RunnerInstanceID: s.w.instance, ExpiresAt: s.w.now.Add(time.Minute)}}
			return object(a, old(s.w), nil)
		}, SkipServerHolds},
		{"other instance, initial lease not over, no snapshot", func(s setup) Object {
			return object(s.w.dead(), old(s.w), nil)
		}, SkipForeignInstance},
		{"other instance, initial lease label unreadable", func(s setup) Object {
			return object(s.w.dead(), old(s.w), func(l map[string]string) { l[dockerops.LabelInitialExpiresAt] = "soon" })
		}, SkipForeignInstance},
		{"other instance, initial lease over", func(s setup) Object {
			return object(newAttempt(s.w.runner, uuid(), s.w.now.Add(-time.Minute)), old(s.w), nil)
		}, ""},
		{"other instance, snapshot without it", func(s setup) Object {
			s.cfg.SnapshotAvailable = true
			return object(s.w.dead(), old(s.w), nil)
		}, ""},
		{"other instance held by the server for that instance", func(s setup) Object {
			a := s.w.dead()
			s.cfg.SnapshotAvailable = true
			s.cfg.ServerSnapshot = []ServerAttempt{{AttemptID: a.owner.AttemptID, FencingToken: a.owner.FencingToken, RunnerInstanceID: a.owner.RunnerInstanceID, ExpiresAt: s.w.now.Add(time.Minute)}}
			return object(a, old(s.w), nil)
		}, SkipServerHolds},
		{"other instance whose server lease expired", func(s setup) Object {
			a := s.w.dead()
			s.cfg.SnapshotAvailable = true
			s.cfg.ServerSnapshot = []ServerAttempt{{AttemptID: a.owner.AttemptID, FencingToken: a.owner.FencingToken, RunnerInstanceID: a.owner.RunnerInstanceID, ExpiresAt: s.w.now}}
			return object(a, old(s.w), nil)
		}, ""},
		{"other instance that left a ledger here", func(s setup) Object {
			a := s.w.dead()
			other := newAttempt(s.w.runner, a.owner.RunnerInstanceID, a.expiresAt) // same dead instance
			require.NoError(t, s.w.store.Write(other.entry(ledger.Active)))
			return object(a, old(s.w), nil)
		}, ""},
		{"kept by a current ledger", func(s setup) Object {
			a := s.w.mine()
			require.NoError(t, s.w.store.Write(a.entry(ledger.Active)))
			return object(a, old(s.w), func(l map[string]string) { l[dockerops.LabelFencingToken] = uuid() })
		}, SkipLeaseCurrent},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := newWorld(t)
			cfg := w.config()
			obj := c.build(setup{w, &cfg})
			w.docker.add(obj)
			round := w.run(cfg)
			if c.reason == "" {
				require.Equal(t, []string{obj.ID}, objectIDs(round.Removed))
				require.False(t, w.docker.has(obj.ID))
				require.Len(t, round.Reports, 1)
				require.Equal(t, ledger.SourceReaper, round.Reports[0].Source)
				require.Equal(t, obj.Labels[dockerops.LabelAttemptID], round.Reports[0].Actions[0].DispatchAttemptID)
				return
			}
			require.Empty(t, round.Removed)
			require.True(t, w.docker.has(obj.ID))
			var reasons []SkipReason
			for _, s := range round.Skipped {
				if s.Object.ID == obj.ID {
					reasons = append(reasons, s.Reason)
				}
			}
			require.Equal(t, []SkipReason{c.reason}, reasons)
		})
	}
}

func TestDefaultGrace(t *testing.T) {
	w := newWorld(t)
	young, old := w.mine(), w.mine()
	w.docker.add(young.objects(w.now.Add(-DefaultGrace + 5*time.Second))...)
	w.docker.add(old.objects(w.now.Add(-DefaultGrace - 5*time.Second))...)
	round := w.run(w.config())
	require.Len(t, round.Removed, 3)
	for _, o := range round.Removed {
		require.Equal(t, old.owner.AttemptID, o.Labels[dockerops.LabelAttemptID])
	}
}

func TestLabelPhaseOrderAndReportChunks(t *testing.T) {
	w := newWorld(t)
	var all []Object
	for range 50 { // 150 objects: two reports of at most 128 actions
		all = append(all, w.mine().objects(w.now.Add(-time.Hour))...)
	}
	w.docker.add(all...)
	round := w.run(w.config())
	require.Len(t, round.Removed, 150)
	rank := func(id string) int {
		switch {
		case strings.HasPrefix(id, "ctr-"):
			return 0
		case strings.HasPrefix(id, "net-"):
			return 1
		}
		return 2
	}
	for i := 1; i < len(w.docker.removed); i++ {
		require.LessOrEqual(t, rank(w.docker.removed[i-1]), rank(w.docker.removed[i]), "containers, then networks, then volumes")
	}
	require.Len(t, round.Reports, 2)
	require.Len(t, round.Reports[0].Actions, ledger.MaxReportActions)
	pending, err := w.store.PendingReports()
	require.NoError(t, err)
	require.Len(t, pending, 2)
}

func TestDryRunChangesNothing(t *testing.T) {
	w := newWorld(t)
	byLedger := w.dead()
	byLabel := w.mine()
	kept := w.mine()
	foreign := newAttempt(uuid(), uuid(), w.now.Add(-time.Hour))
	w.docker.add(byLedger.objects(w.now.Add(-time.Second))...) // young, but its ledger is reaped
	w.docker.add(byLabel.objects(w.now.Add(-time.Hour))...)
	w.docker.add(kept.objects(w.now.Add(-time.Hour))...)
	w.docker.add(foreign.objects(w.now.Add(-time.Hour))...)
	require.NoError(t, w.store.Write(byLedger.entry(ledger.Active)))
	require.NoError(t, w.store.Write(kept.entry(ledger.Active)))
	before := snapshotDir(t, w.store.LedgerDir())

	cfg := w.config()
	cfg.DryRun = true
	round := w.run(cfg)

	require.Equal(t, []string{byLedger.owner.AttemptID}, round.WouldReap)
	want := append(byLedger.objects(time.Time{}), byLabel.objects(time.Time{})...)
	require.ElementsMatch(t, objectIDs(want), objectIDs(round.WouldRemove))
	require.Empty(t, round.Reaped)
	require.Empty(t, round.Removed)
	require.Empty(t, round.Reports)
	require.Empty(t, w.docker.teardowns)
	require.Empty(t, w.docker.removed)
	require.Equal(t, before, snapshotDir(t, w.store.LedgerDir()), "no ledger is written")
	_, err := os.Stat(w.store.ReportDir())
	require.True(t, os.IsNotExist(err), "no report is stored")
}

// snapshotDir maps each file of dir to its content and modification time.
func snapshotDir(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	list, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range list {
		info, err := e.Info()
		require.NoError(t, err)
		data, err := os.ReadFile(dir + "/" + e.Name())
		require.NoError(t, err)
		out[e.Name()] = info.ModTime().String() + "\n" + string(data)
	}
	return out
}

// rendezvousDocker makes the first two container removals wait for each
// other: a round that removed one object at a time would never let the
// first one finish.
type rendezvousDocker struct {
	*fakeDocker
	mu      sync.Mutex
	started int
	both    chan struct{}
	waitErr error
}

func (r *rendezvousDocker) RemoveManaged(ctx context.Context, obj Object) error {
	if obj.Kind == KindContainer {
		r.mu.Lock()
		r.started++
		switch r.started {
		case 1:
			r.mu.Unlock()
			select {
			case <-r.both:
			case <-time.After(10 * time.Second):
				r.mu.Lock()
				r.waitErr = errors.New("the second container removal never started while the first ran")
				r.mu.Unlock()
			}
		case 2:
			close(r.both)
			r.mu.Unlock()
		default:
			r.mu.Unlock()
		}
	}
	return r.fakeDocker.RemoveManaged(ctx, obj)
}

func TestLabelPhaseRemovesOneKindInParallel(t *testing.T) {
	w := newWorld(t)
	for range 4 {
		w.docker.add(w.mine().objects(w.now.Add(-time.Hour))...)
	}
	docker := &rendezvousDocker{fakeDocker: w.docker, both: make(chan struct{})}
	round, err := Run(context.Background(), w.config(), w.store, docker)
	require.NoError(t, err)
	require.NoError(t, docker.waitErr)
	require.Len(t, round.Removed, 12)
	require.Empty(t, round.Degraded)
}
