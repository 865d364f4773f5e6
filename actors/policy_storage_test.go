package actors

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/forgedev/forged/actortest"
	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/messages"
)

// unboundedHost's preflight found no way to bound attempt volumes.
func unboundedHost(t *testing.T) (*fakeHost, func(*AttemptConfig)) {
	host := newFakeHost(t.TempDir())
	return host, func(c *AttemptConfig) {
		c.Confinement = func() Confinement {
			conf := host.confinementFacts()
			conf.Storage = failure.New(failure.SandboxStorageUnbounded, "attempt volumes are not bounded on this runner (a rootless engine cannot mount filesystem images)")
			return conf
		}
	}
}

func TestUnboundedStoragePolicy(t *testing.T) {
	t.Run("sandbox_required is refused before anything is created", func(t *testing.T) {
		host, unbounded := unboundedHost(t)
		d := testDispatch(time.Now().Add(time.Hour))
		d.Sandbox.ExecutionPolicy = messages.PolicySandboxRequired
		out := newHarnessWith(t, host, nil, unbounded).run(t, d)
		assert.Equal(t, messages.StatusFailed, out.Status)
		assert.Equal(t, string(failure.SandboxStorageUnbounded), out.Code, out.Message)
		assert.Contains(t, out.Message, "rootless engine")
		assert.Zero(t, host.called("prepare")+host.called("volume")+host.called("create"))
	})
	t.Run("adoption is refused when the operator requires bounded storage", func(t *testing.T) {
		host, unbounded := unboundedHost(t)
		out := newHarnessWith(t, host, nil, func(c *AttemptConfig) {
			unbounded(c)
			c.RequireBoundedStorage = true
		}).run(t, testDispatch(time.Now().Add(time.Hour)))
		assert.Equal(t, string(failure.SandboxStorageUnbounded), out.Code, out.Message)
		assert.Zero(t, host.called("prepare")+host.called("volume"))
	})
	t.Run("adoption runs, and its events say workspaceBytes is not enforced", func(t *testing.T) {
		host, unbounded := unboundedHost(t)
		d := testDispatch(time.Now().Add(time.Hour))
		d.Sandbox.RequestedResources.WorkspaceBytes = 256 << 20
		probe := newHarnessWith(t, host, nil, unbounded).submit(t, d)
		out := actortest.Expect[messages.AttemptFinished](t, probe, within).Outcome
		assert.Equal(t, messages.StatusSucceeded, out.Status, out.Message)
		var warned *messages.Event
		for _, ev := range actortest.All[messages.AttemptEvent](probe) {
			if ev.Event.EventType == "sandbox_storage_unbounded" {
				warned = &ev.Event
			}
		}
		if assert.NotNil(t, warned, "the attempt's events say its storage is unbounded") {
			assert.Contains(t, warned.Content, "workspaceBytes (268435456) is not enforced")
		}
	})
	t.Run("bounded storage: no refusal, no warning", func(t *testing.T) {
		host := newFakeHost(t.TempDir())
		d := testDispatch(time.Now().Add(time.Hour))
		probe := newHarnessWith(t, host, nil, func(c *AttemptConfig) { c.RequireBoundedStorage = true }).submit(t, d)
		out := actortest.Expect[messages.AttemptFinished](t, probe, within).Outcome
		assert.Equal(t, messages.StatusSucceeded, out.Status, out.Message)
		assert.NotContains(t, eventTypes(probe), "sandbox_storage_unbounded")
	})
}

// TestUnknownConfinementRefusesUnboundedStorage: without a preflight
// report, volumes count as unbounded.
func TestUnknownConfinementRefusesUnboundedStorage(t *testing.T) {
	assert.True(t, failure.Is(unknownConfinement().Storage, failure.SandboxStorageUnbounded))
}
