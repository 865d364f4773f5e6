package reaper

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/state/ledger"
)

func TestDecideAdoption(t *testing.T) {
	now := time.Date(2030, 6, 1, 12, 0, 0, 0, time.UTC)
	known := func(v int) bool { return v == 1 }
	base := func() ledger.Entry {
		return ledger.Entry{
			AttemptID: uuid(), State: ledger.Active, ExpiresAt: now.Add(time.Hour),
			Planned: []ledger.Resource{
				{Type: ledger.ResourceContainer, Name: "forge-x-agent", Role: "agent"},
				{Type: ledger.ResourceVolume, Name: "forge-x-workspace", Role: "workspace"},
				{Type: ledger.ResourceVolume, Name: "forge-x-cargo", Role: "cache:cargo"},
			},
			Adoption: &ledger.Adoption{WorkerProtocol: 1},
		}
	}
	running := WorkerFacts{Found: true, Running: true}
	cases := []struct {
		name   string
		mutate func(e *ledger.Entry)
		worker WorkerFacts
		adopt  bool
		code   failure.Code
	}{
		{"running worker, valid lease", func(*ledger.Entry) {}, running, true, ""},
		{"worker finished while away", func(*ledger.Entry) {}, WorkerFacts{Found: true}, true, ""},
		{"worker gone", func(*ledger.Entry) {}, WorkerFacts{}, false, failure.SandboxReadoptWorkerGone},
		{"worker created, never started", func(*ledger.Entry) {}, WorkerFacts{NeverStarted: true}, false, CodeRunnerRestarted},
		{"lease expired", func(e *ledger.Entry) { e.ExpiresAt = now }, running, false, failure.SandboxReadoptLeaseExpired},
		{"no adoption record", func(e *ledger.Entry) { e.Adoption = nil }, running, false, failure.SandboxReadoptLedgerDamaged},
		{"unknown protocol", func(e *ledger.Entry) { e.Adoption.WorkerProtocol = 2 }, running, false, failure.SandboxReadoptProtocol},
		{"still provisioning", func(e *ledger.Entry) { e.State = ledger.Starting }, running, false, CodeRunnerRestarted},
		{"past running", func(e *ledger.Entry) { e.Adoption.ExitSeen = true }, WorkerFacts{Found: true}, false, CodeRunnerRestarted},
		{"tearing down", func(e *ledger.Entry) { e.State = ledger.Releasing }, running, false, CodeRunnerRestarted},
		{"degraded", func(e *ledger.Entry) { e.State = ledger.Degraded }, running, false, CodeRunnerRestarted},
		{"its own credentials volume", func(e *ledger.Entry) {
			e.Planned = append(e.Planned, ledger.Resource{Type: ledger.ResourceVolume, Name: "forge-x-credentials", Role: "credentials"})
		}, running, true, ""},
		{"services on the internal network", func(e *ledger.Entry) {
			e.Planned = append(e.Planned, ledger.Resource{Type: ledger.ResourceNetwork, Name: "forge-x-net", Role: "internal"},
				ledger.Resource{Type: ledger.ResourceVolume, Name: "forge-x-secrets-postgres", Role: "secrets:postgres"},
				ledger.Resource{Type: ledger.ResourceContainer, Name: "forge-x-postgres", Role: "service:postgres"})
		}, running, true, ""},
		{"an open_public network", func(e *ledger.Entry) {
			e.Planned = append(e.Planned, ledger.Resource{Type: ledger.ResourceNetwork, Name: "forge-x-net", Role: "open"})
		}, running, false, failure.SandboxReadoptUnsupported},
		{"an open_public netns holder", func(e *ledger.Entry) {
			e.Planned = append(e.Planned, ledger.Resource{Type: ledger.ResourceContainer, Name: "forge-x-holder", Role: "netns_holder"})
		}, running, false, failure.SandboxReadoptUnsupported},
		{"an egress proxy beside services", func(e *ledger.Entry) {
			e.Planned = append(e.Planned, ledger.Resource{Type: ledger.ResourceNetwork, Name: "forge-x-net", Role: "internal"},
				ledger.Resource{Type: ledger.ResourceContainer, Name: "forge-x-postgres", Role: "service:postgres"},
				ledger.Resource{Type: ledger.ResourceNetwork, Name: "forge-x-egress", Role: "egress"},
				ledger.Resource{Type: ledger.ResourceContainer, Name: "forge-x-egress-proxy", Role: "egress_proxy"})
		}, running, true, ""},
		{"a service role on a volume", func(e *ledger.Entry) {
			e.Planned = append(e.Planned, ledger.Resource{Type: ledger.ResourceVolume, Name: "forge-x-postgres", Role: "service:postgres"})
		}, running, false, failure.SandboxReadoptUnsupported},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := base()
			c.mutate(&e)
			v := DecideAdoption(e, c.worker, known, now)
			assert.Equal(t, c.adopt, v.Adopt)
			assert.Equal(t, c.code, v.Code)
			if !c.adopt {
				assert.NotEmpty(t, v.Reason)
			}
		})
	}
}
