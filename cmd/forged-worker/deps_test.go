package main_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/internal/testkit/workerbin"
)

// The worker is small and apart from the daemon: neither cobra, nor a
// Docker client, nor the daemon's parts are linked into it. (The actor
// system's actor package still comes in through messages, whose
// SubmitAttempt names a subscriber *actor.PID; the worker runs no actor.)
func TestWorkerDependencies(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", workerbin.Package).Output()
	require.NoError(t, err)
	deps := strings.Fields(string(out))
	require.Contains(t, deps, "github.com/forgedev/forged/internal/worker", "go list names the worker's own packages")
	for _, dep := range deps {
		for _, banned := range []string{"github.com/spf13/cobra", "github.com/docker/", "github.com/forgedev/forged/dockerops",
			"github.com/forgedev/forged/actors", "github.com/forgedev/forged/supervisor", "github.com/forgedev/forged/internal/daemon/",
			"github.com/forgedev/forged/internal/host/"} {
			assert.False(t, strings.HasPrefix(dep, banned), "forged-worker depends on %s", dep)
		}
	}
}
