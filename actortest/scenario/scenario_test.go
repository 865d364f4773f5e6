package scenario_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/actortest/scenario"
	"github.com/forgedev/forged/example"
)

func git(t *testing.T, repo string, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", append([]string{"-C", repo}, args...)...).CombinedOutput()
	require.NoError(t, err, "git %v: %s", args, out)
	return strings.TrimSpace(string(out))
}

func TestAWholeAttemptLandsItsResult(t *testing.T) {
	s := scenario.New(t)
	a := s.Submit(s.Dispatch("sh", "-c", "echo 'hello from the fake engine' > hello.txt"))
	out := a.Outcome()
	s.Succeeded(out)
	assert.Equal(t, out.ResultCommitSHA, git(t, s.Repo, "rev-parse", "refs/heads/"+example.Branch))
	assert.Equal(t, "hello from the fake engine", git(t, s.Repo, "show", example.Branch+":hello.txt"))
	assert.Contains(t, a.EventTypes(), "sandbox_output_imported")
	s.AssertReleased(a)
}
