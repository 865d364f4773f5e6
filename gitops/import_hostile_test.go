package gitops

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/messages"
)

// These tests attack the import as a hostile task would: every bundle is
// built with the real git in the sandbox clone, or by hand where git would
// not write such a thing, and the host repository must refuse it with
// nothing moved, or take it within its bounds.

// refuseImport runs an import that must fail with SandboxOutputInvalid and
// a message containing want, moving nothing in the host.
func refuseImport(t *testing.T, f *importFixture, req ImportRequest, want string) {
	t.Helper()
	before := allRefs(t, f.repo)
	called := false
	req.AssertCurrent = func() error { called = true; return nil }
	err := runImport(testCtx(t), NewRunner(), req)
	t.Log(err)
	requireCode(t, err, failure.SandboxOutputInvalid, want)
	assert.False(t, called, "AssertCurrent runs only after validation")
	assert.Equal(t, before, allRefs(t, f.repo), "the host's refs are unchanged")
	f.assertTidy(t)
}

// mktree writes a tree from `git mktree` lines ("<mode> <type> <id>\t<name>"),
// missing objects allowed.
func mktree(t *testing.T, dir string, lines ...string) string {
	t.Helper()
	return gitStdin(t, dir, strings.Join(lines, "\n")+"\n", "mktree", "--missing")
}

// packOf writes a bundle whose pack holds exactly the given objects (no
// walk), prerequisite input, head tip.
func packOf(t *testing.T, f *importFixture, tip string, objects ...string) string {
	t.Helper()
	cmd := exec.Command("git", "-C", f.sandbox, "pack-objects", "--stdout", "-q")
	cmd.Stdin = strings.NewReader(strings.Join(objects, "\n") + "\n")
	cmd.Stderr = os.Stderr
	pack, err := cmd.Output()
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "result.bundle")
	header := "# v2 git bundle\n-" + f.input + " \n" + tip + " refs/forge/results/" + testAttemptHex + "\n\n"
	require.NoError(t, os.WriteFile(path, append([]byte(header), pack...), 0o600))
	return path
}

func TestImportReportsTheCommits(t *testing.T) {
	t.Parallel()
	f := newImportFixture(t)
	result := f.work(t, 3)
	report, err := ImportResult(testCtx(t), NewRunner(), f.request(result, f.bundle(t, f.input, result)))
	require.NoError(t, err)
	assert.Equal(t, 3, report.Commits)
	require.Len(t, report.Newest, 3)
	assert.Equal(t, messages.ResultCommit{SHA: result, Subject: "agent work 2"}, report.Newest[0])
	assert.Equal(t, "agent work 0", report.Newest[2].Subject)
	assert.Equal(t, result, refOf(t, f.repo, "refs/heads/"+testKey))
	assert.Equal(t, "3", gitT(t, f.repo, "rev-list", "--count", f.input+".."+testKey), "the agent's own commits are kept")
}

func TestImportReportIsBounded(t *testing.T) {
	t.Parallel()
	f := newImportFixture(t)
	result := f.work(t, messages.MaxReportedCommits+2)
	report, err := ImportResult(testCtx(t), NewRunner(), f.request(result, f.bundle(t, f.input, result)))
	require.NoError(t, err)
	assert.Equal(t, messages.MaxReportedCommits+2, report.Commits)
	assert.Len(t, report.Newest, messages.MaxReportedCommits)
}

func TestImportSquashMode(t *testing.T) {
	t.Parallel()
	f := newImportFixture(t)
	result := f.work(t, 1)
	req := f.request(result, f.bundle(t, f.input, result))
	req.Squash = true
	require.NoError(t, runImport(testCtx(t), NewRunner(), req))

	g := newImportFixture(t)
	result = g.work(t, 2)
	req = g.request(result, g.bundle(t, g.input, result))
	req.Squash = true
	refuseImport(t, g, req, "squash result must be one commit")
}

// TestImportRefusesADeltaBomb hands the import a bundle of a few kilobytes
// whose deltas resolve to 16 GiB. It is refused from the pack's delta
// headers: git is never asked to index it.
func TestImportRefusesADeltaBomb(t *testing.T) {
	t.Parallel()
	f := newImportFixture(t)
	entries := []packEntry{rawEntry(packBlob, make([]byte, 0x10000))}
	for i := 0; i < 16; i++ {
		entries = append(entries, ofsDeltaEntry(0x10000, 1<<30, 0))
	}
	fake := oid('c')
	path := filepath.Join(t.TempDir(), "bomb.bundle")
	header := "# v2 git bundle\n-" + f.input + " \n" + fake + " refs/forge/results/" + testAttemptHex + "\n\n"
	require.NoError(t, os.WriteFile(path, append([]byte(header), buildPack(t, entries...)...), 0o600))

	git, argvLog, _ := argvLoggingGit(t)
	before := allRefs(t, f.repo)
	req := f.request(fake, path)
	_, err := ImportResult(testCtx(t), git, req)
	requireCode(t, err, failure.SandboxOutputInvalid, "delta budget")
	for _, call := range readLog(t, argvLog) {
		assert.NotContains(t, call, "index-pack", "git never sees the bomb")
		assert.NotContains(t, call, "fetch")
	}
	assert.Equal(t, before, allRefs(t, f.repo))
	f.assertTidy(t)
}

// treeBomb commits, on top of parent, a tree holding bomb/: 8 levels of
// 16 subdirectories that all name the same tree, ending in 16 names for one
// blob: 9 trees and a blob, 16^8 (4.3 billion) paths once checked out.
func treeBomb(t *testing.T, dir, parent string) string {
	t.Helper()
	blob := gitStdin(t, dir, "boom\n", "hash-object", "-w", "--stdin")
	level := func(mode, typ, id string) string {
		lines := make([]string, 16)
		for i := range lines {
			lines[i] = fmt.Sprintf("%s %s %s\tx%02d", mode, typ, id, i)
		}
		return mktree(t, dir, lines...)
	}
	tree := level("100644", "blob", blob)
	for i := 0; i < 7; i++ {
		tree = level("040000", "tree", tree)
	}
	var root []string
	for _, line := range strings.Split(gitT(t, dir, "ls-tree", parent+"^{tree}"), "\n") {
		root = append(root, line)
	}
	root = append(root, "040000 tree "+tree+"\tbomb")
	return gitT(t, dir, "commit-tree", "-p", parent, "-m", "tree bomb", mktree(t, dir, root...))
}

// TestImportTreeBombLeavesTheCheckedOutWorktree: the tree bomb is a small,
// valid result; the branch moves, but the host worktree that has it checked
// out is measured first (capped) and left as it was.
func TestImportTreeBombLeavesTheCheckedOutWorktree(t *testing.T) {
	t.Parallel()
	f := newImportFixture(t)
	wt := f.addWorktree(t)
	result := treeBomb(t, f.sandbox, f.input)
	report, err := ImportResult(testCtx(t), NewRunner(), f.request(result, f.bundle(t, f.input, result)))
	require.NoError(t, err)
	assert.Equal(t, result, refOf(t, f.repo, "refs/heads/"+testKey), "the branch moves")
	assert.Equal(t, wt, report.WorktreeLeft)
	assert.Contains(t, report.WorktreeLeftReason, "more than 200000 entries")
	assert.NoDirExists(t, filepath.Join(wt, "bomb"), "nothing was written into the worktree")
	assert.FileExists(t, filepath.Join(wt, "src.txt"))
	f.assertTidy(t)

	// Without a checked-out worktree the bomb imports like any result.
	g := newImportFixture(t)
	result = treeBomb(t, g.sandbox, g.input)
	report, err = ImportResult(testCtx(t), NewRunner(), g.request(result, g.bundle(t, g.input, result)))
	require.NoError(t, err)
	assert.Empty(t, report.WorktreeLeft)
}

func TestImportWorktreeByteBound(t *testing.T) {
	t.Parallel()
	f := newImportFixture(t)
	wt := f.addWorktree(t)
	result := f.work(t, 1)
	req := f.request(result, f.bundle(t, f.input, result))
	req.Budget.MaxWorktreeBytes = 10
	report, err := ImportResult(testCtx(t), NewRunner(), req)
	require.NoError(t, err)
	assert.Equal(t, wt, report.WorktreeLeft)
	assert.Contains(t, report.WorktreeLeftReason, "more than 10 bytes")
	assert.NoFileExists(t, filepath.Join(wt, "new-0.txt"))
	assert.Equal(t, result, refOf(t, f.repo, "refs/heads/"+testKey))
}

// TestImportWithAMalformedOldHostObject: the host repository holds a
// malformed commit deep in its history (as a fetch without fsck would
// leave). Strict fsck of the host fails, yet imports go on: the quarantine
// checks only what the bundle brought.
func TestImportWithAMalformedOldHostObject(t *testing.T) {
	t.Parallel()
	repo := newRepo(t)
	bad := commitZeroPaddedTree(t, repo, gitT(t, repo, "rev-parse", "HEAD"))
	gitT(t, repo, "reset", "--quiet", "--hard", bad)
	input := commitFile(t, repo, "src.txt", "v1\n", "after the malformed commit")
	_, err := gitTry(t, repo, "fsck", "--strict", "--no-dangling")
	require.Error(t, err, "the host repository really holds a malformed object")

	sandbox := cloneRepo(t, repo)
	f := &importFixture{repo: repo, sandbox: sandbox, state: t.TempDir(), input: input}
	result := f.work(t, 2)
	require.NoError(t, runImport(testCtx(t), NewRunner(), f.request(result, f.bundle(t, f.input, result))))
	assert.Equal(t, result, refOf(t, f.repo, "refs/heads/"+testKey))
	f.assertTidy(t)
}

// TestImportRunsNoHostHookOrFsmonitor plants hooks in the host repository,
// a hooks directory and an fsmonitor in its config, checks that plain git
// would run them, and imports into a checked-out worktree (update-ref,
// status, read-tree, reset): none of them runs.
func TestImportRunsNoHostHookOrFsmonitor(t *testing.T) {
	t.Parallel()
	f := newImportFixture(t)
	wt := f.addWorktree(t)
	marker := filepath.Join(t.TempDir(), "ran")
	script := "#!/bin/sh\necho \"$0 $*\" >> '" + marker + "'\nexit 0\n"
	hooksDir := filepath.Join(t.TempDir(), "hooks")
	for _, dir := range []string{filepath.Join(f.repo, ".git", "hooks"), hooksDir} {
		for _, hook := range []string{"reference-transaction", "post-checkout", "post-merge", "post-rewrite", "pre-auto-gc", "post-index-change"} {
			writeFile(t, filepath.Join(dir, hook), script)
			require.NoError(t, os.Chmod(filepath.Join(dir, hook), 0o755))
		}
	}
	fsmonitor := filepath.Join(t.TempDir(), "fsmonitor")
	writeFile(t, fsmonitor, script)
	require.NoError(t, os.Chmod(fsmonitor, 0o755))

	// Plain git runs the planted hook.
	gitT(t, f.repo, "update-ref", "refs/probe", f.input)
	require.FileExists(t, marker, "the planted hook is live for plain git")
	gitT(t, f.repo, "update-ref", "-d", "refs/probe")
	require.NoError(t, os.Remove(marker))
	gitT(t, f.repo, "config", "core.hooksPath", hooksDir)
	gitT(t, f.repo, "config", "core.fsmonitor", fsmonitor)

	result := f.work(t, 1)
	require.NoError(t, runImport(testCtx(t), NewRunner(), f.request(result, f.bundle(t, f.input, result))))
	assert.Equal(t, result, gitT(t, wt, "rev-parse", "HEAD"))
	assert.NoFileExists(t, marker, "no hook and no fsmonitor ran")
}

// TestImportRefusesHostObjectsOutsideTheInput: the host has a secret
// branch the input does not contain. A task that learnt its ids builds a
// result naming the secret blob in a tree, or the secret commit as a
// parent, without sending them. The host has the objects, so git alone
// would accept the result; the import refuses it.
func TestImportRefusesHostObjectsOutsideTheInput(t *testing.T) {
	t.Parallel()
	setup := func(t *testing.T) (*importFixture, string, string) {
		f := newImportFixture(t)
		gitT(t, f.repo, "checkout", "--quiet", "-b", "secret")
		secretCommit := commitFile(t, f.repo, "secret.txt", "the host's secret\n", "secret")
		gitT(t, f.repo, "checkout", "--quiet", "main")
		secretBlob := gitT(t, f.repo, "rev-parse", secretCommit+":secret.txt")
		_, err := gitTry(t, f.sandbox, "cat-file", "-e", secretBlob)
		require.Error(t, err, "the sandbox never had the secret")
		return f, secretBlob, secretCommit
	}
	t.Run("blob in a tree", func(t *testing.T) {
		t.Parallel()
		f, secretBlob, _ := setup(t)
		var root []string
		root = append(root, strings.Split(gitT(t, f.sandbox, "ls-tree", f.input+"^{tree}"), "\n")...)
		root = append(root, "100644 blob "+secretBlob+"\tleak.txt")
		tree := mktree(t, f.sandbox, root...)
		result := gitT(t, f.sandbox, "commit-tree", "-p", f.input, "-m", "leak", tree)
		refuseImport(t, f, f.request(result, packOf(t, f, result, result, tree)), "neither in the result bundle nor in the input commit's history")
		_, err := gitTry(t, f.repo, "cat-file", "-e", result)
		assert.Error(t, err, "nothing reached the host's objects")
	})
	t.Run("commit as a parent", func(t *testing.T) {
		t.Parallel()
		f, _, secretCommit := setup(t)
		tree := gitT(t, f.sandbox, "rev-parse", f.input+"^{tree}")
		// commit-tree wants the parent to exist; a task writes the object itself.
		result := gitStdin(t, f.sandbox, "tree "+tree+"\nparent "+f.input+"\nparent "+secretCommit+
			"\nauthor A <a@forge.invalid> 0 +0000\ncommitter A <a@forge.invalid> 0 +0000\n\nmerge the secret\n",
			"hash-object", "-t", "commit", "-w", "--stdin")
		refuseImport(t, f, f.request(result, packOf(t, f, result, result)), "neither in the result bundle nor in the input commit's history")
	})
	t.Run("prerequisite", func(t *testing.T) {
		t.Parallel()
		f, _, secretCommit := setup(t)
		result := f.work(t, 1)
		path := writeBundle(t, f.sandbox, []string{f.input}, result, "refs/forge/results/"+testAttemptHex, result+"\n^"+f.input+"\n")
		raw, err := os.ReadFile(path)
		require.NoError(t, err)
		raw = bytes.Replace(raw, []byte("# v2 git bundle\n"), []byte("# v2 git bundle\n-"+secretCommit+" \n"), 1)
		require.NoError(t, os.WriteFile(path, raw, 0o600))
		refuseImport(t, f, f.request(result, path), "not in the input commit's history")
	})
}

// TestImportRefusesADotGitEntry: a tree naming ".git" (which would plant a
// repository in any checkout) is refused by the quarantine's strict fsck.
func TestImportRefusesADotGitEntry(t *testing.T) {
	t.Parallel()
	f := newImportFixture(t)
	hooks := mktree(t, f.sandbox, "100755 blob "+gitStdin(t, f.sandbox, "#!/bin/sh\nid\n", "hash-object", "-w", "--stdin")+"\tpost-checkout")
	dotgit := mktree(t, f.sandbox, "040000 tree "+hooks+"\thooks")
	raw, err := hex.DecodeString(dotgit)
	require.NoError(t, err)
	tree := gitStdin(t, f.sandbox, "40000 .git\x00"+string(raw), "hash-object", "-t", "tree", "-w", "--stdin", "--literally")
	result := gitT(t, f.sandbox, "commit-tree", "-p", f.input, "-m", "plant .git", tree)
	refuseImport(t, f, f.request(result, f.bundle(t, f.input, result)), "hasDotgit")
}

// TestImportRefusesSixtyThousandAndOneCommits builds 60,001 commits on top
// of the input with git fast-import (seconds, not 60,001 git commit calls)
// and imports them under the default budget.
func TestImportRefusesSixtyThousandAndOneCommits(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds 60,001 commits")
	}
	f := newImportFixture(t)
	var stream bytes.Buffer
	const n = 60_001
	for i := 1; i <= n; i++ {
		msg := fmt.Sprintf("commit %d\n", i)
		fmt.Fprintf(&stream, "commit refs/heads/deep\nmark :%d\ncommitter Agent <agent@forge.invalid> %d +0000\ndata %d\n%s", i, 1_700_000_000+i, len(msg), msg)
		if i == 1 {
			fmt.Fprintf(&stream, "from %s\n", f.input)
		}
		stream.WriteString("\n")
	}
	cmd := exec.Command("git", "-C", f.sandbox, "fast-import", "--quiet")
	cmd.Stdin = &stream
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	tip := gitT(t, f.sandbox, "rev-parse", "refs/heads/deep")
	require.Equal(t, fmt.Sprint(n), gitT(t, f.sandbox, "rev-list", "--count", f.input+".."+tip))
	refuseImport(t, f, f.request(tip, f.bundle(t, f.input, tip)), "commit-depth budget (60001 commits, budget 50000)")
}

// TestRunnerRefusesTransportsAndHonoursOwnership: protocol.allow=never
// keeps ext:: (a command) from running, and safe.directory names exactly
// the repository, so a repository owned by another user still works for
// forged while plain git refuses it.
func TestRunnerRefusesTransportsAndHonoursOwnership(t *testing.T) {
	t.Parallel()
	repo := newRepo(t)
	marker := filepath.Join(t.TempDir(), "ext-ran")
	_, err := NewRunner().Run(testCtx(t), repo, RunOpts{}, "fetch", "ext::sh -c touch% "+marker, "main")
	require.Error(t, err)
	assert.NoFileExists(t, marker)
	_, err = NewRunner().Run(testCtx(t), repo, RunOpts{}, "ls-remote", repo)
	require.Error(t, err, "even file:// is refused unless the call allows it")
	_, err = NewRunner().Run(testCtx(t), repo, RunOpts{Config: []string{"protocol.file.allow=always"}}, "ls-remote", repo)
	require.NoError(t, err)

	if os.Geteuid() != 0 {
		t.Skip("changing a repository's owner needs root")
	}
	require.NoError(t, exec.Command("chown", "-R", "12345:12345", repo).Run())
	_, err = gitTry(t, repo, "status")
	require.Error(t, err, "plain git refuses a repository of another owner")
	_, err = NewRunner().Run(testCtx(t), repo, RunOpts{}, "status", "--porcelain")
	require.NoError(t, err)
	_, err = NewRunner().Run(testCtx(t), filepath.Join(repo, ".forge"), RunOpts{}, "status", "--porcelain")
	require.Error(t, err, "safe.directory names exactly the repository, not its subdirectories")
}

// TestImportMergeOfAnOlderCommit: a result merging work that grew from the
// input's parent names both as prerequisites; both are in the input's
// history, so it imports.
func TestImportMergeOfAnOlderCommit(t *testing.T) {
	t.Parallel()
	f := newImportFixture(t)
	gitT(t, f.sandbox, "checkout", "--quiet", "-b", "side", f.input+"^")
	commitFile(t, f.sandbox, "side.txt", "side\n", "side work")
	gitT(t, f.sandbox, "checkout", "--quiet", "--detach", f.input)
	gitT(t, f.sandbox, "merge", "--quiet", "--no-edit", "side")
	tip := gitT(t, f.sandbox, "rev-parse", "HEAD")
	path := writeBundle(t, f.sandbox, []string{f.input, f.input + "^"}, tip, "refs/forge/results/"+testAttemptHex,
		tip+"\n^"+f.input+"\n^"+f.input+"^\n")
	report, err := ImportResult(testCtx(t), NewRunner(), f.request(tip, path))
	require.NoError(t, err)
	assert.Equal(t, 2, report.Commits)
	assert.Equal(t, tip, refOf(t, f.repo, "refs/heads/"+testKey))
}

// TestImportRunsNoFilterDriver: the host repository configures a filter
// driver (as git-lfs does) and the result's .gitattributes aims it at every
// file. Updating the checked-out worktree runs none of its commands.
func TestImportRunsNoFilterDriver(t *testing.T) {
	t.Parallel()
	f := newImportFixture(t)
	wt := f.addWorktree(t)
	marker := filepath.Join(t.TempDir(), "ran")
	driver := filepath.Join(t.TempDir(), "driver")
	writeFile(t, driver, "#!/bin/sh\necho \"$0 $*\" >> '"+marker+"'\ncat\n")
	require.NoError(t, os.Chmod(driver, 0o755))
	for _, kv := range [][2]string{{"filter.evil.smudge", driver + " smudge"}, {"filter.evil.clean", driver + " clean"}, {"filter.evil.required", "true"}} {
		gitT(t, f.repo, "config", kv[0], kv[1])
	}
	commitFile(t, f.sandbox, ".gitattributes", "* filter=evil\n", "aim the host's filter at everything")
	result := commitFile(t, f.sandbox, "payload.txt", "payload\n", "payload")
	// Plain git would run it when checking the result out.
	probe := filepath.Join(t.TempDir(), "probe")
	gitT(t, f.repo, "fetch", "-q", f.sandbox, result+":refs/probe")
	gitT(t, f.repo, "worktree", "add", "-q", "--detach", probe, result)
	require.FileExists(t, marker, "the driver is live for plain git")
	gitT(t, f.repo, "worktree", "remove", "--force", probe)
	gitT(t, f.repo, "update-ref", "-d", "refs/probe")
	require.NoError(t, os.Remove(marker))

	require.NoError(t, runImport(testCtx(t), NewRunner(), f.request(result, f.bundle(t, f.input, result))))
	assert.Equal(t, result, gitT(t, wt, "rev-parse", "HEAD"))
	payload, err := os.ReadFile(filepath.Join(wt, "payload.txt"))
	require.NoError(t, err)
	assert.Equal(t, "payload\n", string(payload))
	assert.NoFileExists(t, marker, "no filter command ran")
}
