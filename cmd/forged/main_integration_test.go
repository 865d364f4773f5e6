package main_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/internal/testkit/enginetest"
	"github.com/forgedev/forged/messages"
)

// TestExampleThenRun runs the README's main job through the built binary:
// `forged example` then `forged run --json`, and checks the exit statuses,
// the NDJSON stream and the managed branch.
func TestExampleThenRun(t *testing.T) {
	engine := enginetest.Client(t)
	forged := enginetest.ForgedBinary(t)
	dir := t.TempDir()

	out, err := exec.Command(forged, "example", "--project", testProject, "--dir", dir, "--state-root", filepath.Join(dir, "state")).CombinedOutput()
	require.NoError(t, err, "%s", out)

	var dispatch messages.Dispatch
	raw, err := os.ReadFile(filepath.Join(dir, "dispatch.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, &dispatch))
	defer enginetest.AssertNoneLabelled(t, engine, dispatch.AttemptID())

	cmd := exec.Command(forged, "run", "--json", "--allow-rootful", "--host-reserved-cores", "0",
		"--state-root", filepath.Join(dir, "state"), filepath.Join(dir, "dispatch.json"))
	cmd.Env = append(os.Environ(), "TMPDIR="+t.TempDir()) // a private context lock
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "stderr: %s", stderr.String())

	var outcome *messages.AttemptOutcome
	events := 0
	scanner := bufio.NewScanner(&stdout)
	scanner.Buffer(make([]byte, 1<<20), 1<<20)
	for scanner.Scan() {
		var line struct {
			Type    string                   `json:"type"`
			Event   *messages.Event          `json:"event"`
			Outcome *messages.AttemptOutcome `json:"outcome"`
		}
		require.NoError(t, json.Unmarshal(scanner.Bytes(), &line), scanner.Text())
		switch line.Type {
		case "event":
			events++
		case "finished":
			outcome = line.Outcome
		}
	}
	require.NotNil(t, outcome)
	assert.Equal(t, messages.StatusSucceeded, outcome.Status)
	assert.Positive(t, events)
	head, err := exec.Command("git", "-C", filepath.Join(dir, "repo"), "rev-parse", "forge/example-task").Output()
	require.NoError(t, err)
	assert.Equal(t, outcome.ResultCommitSHA, strings.TrimSpace(string(head)))
}

func TestRunRefusesAnInvalidDispatch(t *testing.T) {
	forged := enginetest.ForgedBinary(t)
	path := filepath.Join(t.TempDir(), "bad.json")
	require.NoError(t, os.WriteFile(path, []byte(`{"session":{"id":"nope"}}`), 0o600))
	out, err := exec.Command(forged, "run", path).CombinedOutput()
	var exit *exec.ExitError
	require.True(t, errors.As(err, &exit), "%v: %s", err, out)
	assert.Equal(t, 2, exit.ExitCode())
	assert.Contains(t, string(out), "dispatch_invalid")
}
