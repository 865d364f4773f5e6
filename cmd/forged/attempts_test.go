package main

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/client"
	"github.com/forgedev/forged/internal/daemon/runner"
	"github.com/forgedev/forged/messages"
)

func TestPrintAttemptsShowsStateOutcomeAndEscapes(t *testing.T) {
	var out bytes.Buffer
	at := time.Date(2030, 1, 1, 12, 0, 0, 0, time.Local)
	require.NoError(t, printAttempts(&out, []runner.AttemptSummary{
		{AttemptID: "a1", State: runner.StateFinished, SubmittedAt: at, Events: 12,
			Outcome: &messages.AttemptOutcome{Status: messages.StatusFailed, Code: "sandbox_worker_failed", Phase: "running\x1b[2J", FinishedAt: at.Add(time.Minute)}},
		{AttemptID: "a2", State: runner.StateRunning, SubmittedAt: at, Events: 3},
	}))
	text := out.String()
	assert.Regexp(t, `(?m)^a1\s+finished\s+failed\s+sandbox_worker_failed\s+running\\x1b\[2J\s+2030-01-01 12:00:00\s+2030-01-01 12:01:00\s+12$`, text)
	assert.Regexp(t, `(?m)^a2\s+running\s+-\s+-\s+-\s+2030-01-01 12:00:00\s+-\s+3$`, text)
	assert.NotContains(t, text, "\x1b")

	out.Reset()
	require.NoError(t, printAttempts(&out, nil))
	assert.Equal(t, "no attempts\n", out.String())
}

func TestPrintRenewalShowsTheExpiryOrTheRefusal(t *testing.T) {
	var out bytes.Buffer
	printRenewal(&out, "a1", messages.RenewLeaseReply{AttemptID: "a1", Accepted: true, ExpiresAt: time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)}, nil)
	assert.Equal(t, "lease of attempt a1 extended to 2031-01-01T00:00:00Z\n", out.String())
	out.Reset()
	printRenewal(&out, "a1", messages.RenewLeaseReply{}, &client.Error{Status: 409, Code: "lease_update_stale", Message: "not later\u001b[2J"})
	assert.Equal(t, "refused: lease_update_stale: not later\\x1b[2J\n", out.String())
	out.Reset()
	printRenewal(&out, "a1", messages.RenewLeaseReply{}, &client.Error{Status: 502, Message: "bad gateway\x07"})
	assert.NotContains(t, out.String(), "\x07")
}
