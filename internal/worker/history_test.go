package worker

import (
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/messages"
)

// agentGit is the prelude of task scripts that use git as an agent does.
const agentGit = `set -e
export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null
export GIT_AUTHOR_NAME=agent GIT_AUTHOR_EMAIL=agent@example.invalid GIT_COMMITTER_NAME=agent GIT_COMMITTER_EMAIL=agent@example.invalid
`

func requireGitTask(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git binary not available")
	}
}

func TestMainKeepsTheAgentsCommitsAndCommitsTheRest(t *testing.T) {
	requireGitTask(t)
	f := newFixture(t, sh(agentGit+`
for i in 1 2 3; do echo "$i" > "c$i.txt"; git add "c$i.txt"; git commit -q -m "agent commit $i" -m "body $i"; done
echo dirty > dirty.txt
echo changed > README.md`)...)
	f.pkt.Task.CommitMessage = "agent: leftovers\n\nWhat the agent did not commit."
	res := f.run()
	require.Equal(t, ExitOK, res.code, "stderr: %s", res.stderr)
	sha := f.fetchBundle()
	assert.Equal(t, "agent: leftovers\nagent commit 3\nagent commit 2\nagent commit 1",
		f.host.git("log", "--format=%s", f.input+".."+sha), "four commits, newest first, with their messages")
	assert.Equal(t, "agent: leftovers\n\nWhat the agent did not commit.", f.host.git("log", "-1", "--format=%B", sha))
	assert.Equal(t, "forge sandbox <sandbox@forge.invalid>", f.host.git("log", "-1", "--format=%an <%ae>", sha))
	assert.Equal(t, "agent <agent@example.invalid>", f.host.git("log", "-1", "--format=%an <%ae>", sha+"^"))
	assert.Equal(t, "body 2", f.host.git("log", "-1", "--format=%b", sha+"~2"))
	assert.Equal(t, f.input, f.host.git("rev-parse", sha+"~4"))
	assert.Equal(t, "dirty", f.show(sha, "dirty.txt"))
	assert.Equal(t, "changed", f.show(sha, "README.md"))

	ev := eventData(t, findEvent(t, res.events, "result_committed"))
	assert.Equal(t, sha, ev["resultCommitSha"])
	assert.Equal(t, float64(4), ev["commitCount"])
	commits := ev["commits"].([]any)
	require.Len(t, commits, 4)
	assert.Equal(t, map[string]any{"sha": sha, "subject": "agent: leftovers"}, commits[0])
	assert.Equal(t, "agent commit 1", commits[3].(map[string]any)["subject"])
}

func TestMainCleanHistoryIsTheResult(t *testing.T) {
	requireGitTask(t)
	f := newFixture(t, sh(agentGit+`echo a > a.txt; git add a.txt; git commit -q -m "only commit"`)...)
	res := f.run()
	require.Equal(t, ExitOK, res.code, "stderr: %s", res.stderr)
	sha := f.fetchBundle()
	assert.Equal(t, "only commit", f.host.git("log", "--format=%s", f.input+".."+sha), "no extra commit when nothing is left")
	assert.Equal(t, "agent <agent@example.invalid>", f.host.git("log", "-1", "--format=%an <%ae>", sha))
}

func TestMainReportIsBounded(t *testing.T) {
	requireGitTask(t)
	f := newFixture(t, sh(agentGit+`i=0; while [ $i -lt 25 ]; do git commit -q --allow-empty -m "c$i"; i=$((i+1)); done`)...)
	res := f.run()
	require.Equal(t, ExitOK, res.code, "stderr: %s", res.stderr)
	f.fetchBundle()
	ev := eventData(t, findEvent(t, res.events, "result_committed"))
	assert.Equal(t, float64(25), ev["commitCount"])
	assert.Len(t, ev["commits"].([]any), messages.MaxReportedCommits)
}

// TestMainPassesRewrittenHistoryThrough: the task resets below the input
// and commits. The worker does not judge: its bundle names what the
// branch grew from (the input's parent) and the host refuses it.
func TestMainPassesRewrittenHistoryThrough(t *testing.T) {
	requireGitTask(t)
	h := newHostRepo(t)
	h.write("second.txt", "2\n")
	h.git("add", "second.txt")
	h.git("commit", "-q", "-m", "second")
	f := newFixtureFrom(t, h, sh(agentGit+`git reset -q --hard HEAD~1; echo x > x.txt; git add x.txt; git commit -q -m rewritten`)...)
	res := f.run()
	require.Equal(t, ExitOK, res.code, "stderr: %s", res.stderr)
	parent := f.host.git("rev-parse", f.input+"~1")
	sha := f.fetchBundle(parent)
	assert.Equal(t, parent, f.host.git("rev-parse", sha+"^"))
	_, err := f.host.gitErr("merge-base", "--is-ancestor", f.input, sha)
	assert.Error(t, err, "the result does not descend from the input")
}

// TestMainDoesNotFilterTheAgentsTrees: a commit whose tree holds ".git"
// (written with git hash-object --literally, as a hostile task can) goes
// into the bundle as it is. Filtering is the host's job.
func TestMainDoesNotFilterTheAgentsTrees(t *testing.T) {
	requireGitTask(t)
	h := newHostRepo(t)
	// The raw objects, computed on the host (not written there): a blob, a
	// tree holding it as "config", and a tree naming that one ".git".
	dir := t.TempDir()
	blobID := h.git("hash-object", "--stdin", "--path=x") // of empty stdin
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
		return p
	}
	raw := func(id string) string {
		b, err := hex.DecodeString(id)
		require.NoError(t, err)
		return string(b)
	}
	inner := write("inner", "100644 config\x00"+raw(blobID))
	innerID := h.git("hash-object", "-t", "tree", "--literally", inner)
	outer := write("outer", "40000 .git\x00"+raw(innerID))
	f := newFixtureFrom(t, h, sh(agentGit+`
git hash-object -w --stdin < /dev/null > /dev/null
git hash-object -t tree -w --literally "`+inner+`" > /dev/null
tree=$(git hash-object -t tree -w --literally "`+outer+`")
commit=$(git commit-tree -p HEAD -m "plant .git" "$tree")
git update-ref "refs/heads/$(git symbolic-ref --short HEAD)" "$commit"`)...)
	res := f.run()
	require.Equal(t, ExitOK, res.code, "stderr: %s", res.stderr)
	ev := eventData(t, findEvent(t, res.events, "result_committed"))
	sha := ev["resultCommitSha"].(string)
	// Take the bundle raw (fsck off) to look inside.
	bundle := filepath.Join(f.cfg.OutputDir, messages.ResultBundleFile)
	f.host.git("-c", "transfer.fsckObjects=false", "-c", "fetch.fsckObjects=false", "fetch", "-q", bundle, resultRefPrefix+attemptHex(testAttemptID)+":refs/x/raw")
	require.Equal(t, sha, f.host.git("rev-parse", "refs/x/raw"))
	planted := f.host.git("rev-parse", sha+"^")
	assert.Equal(t, "plant .git", f.host.git("log", "-1", "--format=%s", planted))
	assert.Equal(t, "040000 tree "+innerID+"\t.git", f.host.git("ls-tree", planted), "the .git entry reached the bundle unfiltered")
	out, err := f.host.gitErr("fsck", "--strict", "--no-dangling")
	assert.Error(t, err, "strict fsck refuses it")
	assert.Contains(t, out, "hasDotgit")
}

// TestMainReadsPacksTheTaskWrote: the agent commits, then repacks (gc
// replaces the materialised pack). The worker reads the repository afresh.
func TestMainReadsPacksTheTaskWrote(t *testing.T) {
	requireGitTask(t)
	f := newFixture(t, sh(agentGit+`echo a > a.txt; git add a.txt; git commit -q -m "packed commit"; git gc -q --prune=now`)...)
	res := f.run()
	require.Equal(t, ExitOK, res.code, "stderr: %s", res.stderr)
	sha := f.fetchBundle()
	assert.Equal(t, "packed commit", f.host.git("log", "--format=%s", f.input+".."+sha))
}

// TestMainMergeOfAnOlderCommit: the agent branches from the input's parent,
// commits there and merges that into its branch. The bundle names both
// the input and the input's parent as prerequisites and carries only the
// two new commits' objects.
func TestMainMergeOfAnOlderCommit(t *testing.T) {
	requireGitTask(t)
	h := newHostRepo(t)
	h.write("second.txt", "2\n")
	h.git("add", "second.txt")
	h.git("commit", "-q", "-m", "second")
	f := newFixtureFrom(t, h, sh(agentGit+`git checkout -q -b side HEAD~1
echo x > x.txt; git add x.txt; git commit -q -m side
git checkout -q `+testBranch+`
git merge -q --no-edit side`)...)
	res := f.run()
	require.Equal(t, ExitOK, res.code, "stderr: %s", res.stderr)
	parent := f.host.git("rev-parse", f.input+"~1")
	sha := f.fetchBundle(f.input, parent)
	assert.Equal(t, "Merge branch 'side' into "+testBranch+"\nside", f.host.git("log", "--format=%s", f.input+".."+sha))
}
