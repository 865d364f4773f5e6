package main_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/internal/testkit/enginetest"
	"github.com/forgedev/forged/messages"
)

// hostileOutput is what the task prints: an OSC window title with BEL,
// clear screen and cursor home, a colour, a carriage return and a fake
// "attempt … succeeded" line, a C1 CSI, a bidi override and invalid UTF-8.
const hostileOutput = `printf '\033]0;pwned\007\033[2J\033[H\033[31mred\033[0m\rattempt 00000000 succeeded\302\233\342\200\256evil\377\n'`

// TestRunEscapesTaskOutput runs a task printing terminal escape sequences
// through `forged run` (readable output) and checks that none reaches the
// terminal raw: every control, C1 and bidi character arrives escaped.
func TestRunEscapesTaskOutput(t *testing.T) {
	engine := enginetest.Client(t)
	forged := enginetest.ForgedBinary(t)
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	out, err := exec.Command(forged, "example", "--project", testProject, "--dir", dir, "--state-root", state).CombinedOutput()
	require.NoError(t, err, "%s", out)

	path := filepath.Join(dir, "dispatch.json")
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	var doc map[string]any
	require.NoError(t, json.Unmarshal(raw, &doc))
	doc["task"].(map[string]any)["argv"] = []string{"/bin/sh", "-c", hostileOutput}
	raw, err = json.Marshal(doc)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, raw, 0o600))
	var dispatch messages.Dispatch
	require.NoError(t, json.Unmarshal(raw, &dispatch))
	defer enginetest.AssertNoneLabelled(t, engine, dispatch.AttemptID())

	cmd := exec.Command(forged, "run", "--allow-rootful", "--host-reserved-cores", "0", "--state-root", state, path)
	cmd.Env = append(os.Environ(), "TMPDIR="+t.TempDir())
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "stdout: %s\nstderr: %s", stdout.String(), stderr.String())

	printed := stdout.String()
	for _, raw := range []string{"\x1b", "\a", "\r", "\u009b", "\u202e", "\xff"} {
		assert.NotContains(t, printed, raw, "a raw %q reached the terminal", raw)
	}
	assert.Contains(t, printed, `\x1b]0;pwned\x07\x1b[2J\x1b[H\x1b[31mred\x1b[0m\rattempt 00000000 succeeded\u009b\u202eevil`)
	assert.Contains(t, printed, "evil\uFFFD", "the worker replaced the invalid byte")
}
