package runner_test

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/internal/daemon/runner"
	"github.com/forgedev/forged/messages"
)

// TestManyShortLinesStayWithinTheOutputBudget: an honest task that prints
// many one-byte lines succeeds. The worker and the host count the same
// bytes (the signed event lines on the worker's stdout), so the worker
// drops what is beyond its budget before the host's capture bound is met
// (issue 28, finding 9: the worker counted content bytes, the host wire
// bytes, 253 of them for a one-byte line, and 30k lines ended the attempt
// with sandbox_log_limit).
// It runs under runc and gVisor.
func TestManyShortLinesStayWithinTheOutputBudget(t *testing.T) {
	for _, iso := range isolations {
		t.Run(iso.floor, func(t *testing.T) { manyShortLines(t, iso.floor) })
	}
}

func manyShortLines(t *testing.T, floor string) {
	e := newE2E(t, runner.Config{Isolation: floor})
	for _, lines := range []int{30000, 100000} {
		t.Run(strconv.Itoa(lines), func(t *testing.T) {
			script := "i=0; while [ $i -lt " + strconv.Itoa(lines) + " ]; do echo x; i=$((i+1)); done"
			log := e.submit(e.dispatch([]string{"/bin/sh", "-c", script}, 0))
			out := e.wait(log)
			require.Equal(t, messages.StatusSucceeded, out.Status, "%s: %s", out.Code, out.Message)
			// The log keeps only its newest events: count them all by the
			// end index.
			_, _, total, _ := log.Read(0)
			t.Logf("%d events for %d lines", total, lines)
			if lines == 30000 {
				assert.Greater(t, total, lines, "every line is forwarded")
			} else {
				assert.Less(t, total, lines, "lines beyond the budget are dropped")
			}
		})
	}
}
