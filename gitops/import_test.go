package gitops

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/failure"
)

const testKey = "forge/task"

// importFixture is a host repository whose main is the input commit, a
// sandbox clone detached at it, and a state root.
type importFixture struct {
	repo, sandbox, state, input string
	commits                     int // made by work so far
}

func newImportFixture(t *testing.T) *importFixture {
	t.Helper()
	repo := newRepo(t)
	input := commitFile(t, repo, "src.txt", "v1\n", "second")
	sandbox := cloneRepo(t, repo)
	gitT(t, sandbox, "checkout", "--quiet", "--detach", input)
	return &importFixture{repo: repo, sandbox: sandbox, state: t.TempDir(), input: input}
}

// work makes n commits in the sandbox, each adding new-<i>.txt (i counts
// from 0 over the fixture's life), and returns the last.
func (f *importFixture) work(t *testing.T, n int) string {
	t.Helper()
	var sha string
	for range n {
		i := f.commits
		f.commits++
		sha = commitFile(t, f.sandbox, fmt.Sprintf("new-%d.txt", i), fmt.Sprintf("agent %d\n", i), fmt.Sprintf("agent work %d", i))
	}
	return sha
}

// bundle writes a bundle of from..tip with tip under
// refs/forge/results/<attemptHex>, as the worker does: prerequisite from,
// and a self-contained pack (offset deltas only) of the objects tip needs
// and from does not.
func (f *importFixture) bundle(t *testing.T, from, tip string) string {
	t.Helper()
	return writeBundle(t, f.sandbox, []string{from}, tip, "refs/forge/results/"+testAttemptHex, tip+"\n^"+from+"\n")
}

// writeBundle writes a v2 bundle whose pack is
// `git pack-objects --revs --delta-base-offset` of revs in dir.
func writeBundle(t *testing.T, dir string, prerequisites []string, tip, ref, revs string) string {
	t.Helper()
	var header strings.Builder
	header.WriteString("# v2 git bundle\n")
	for _, p := range prerequisites {
		header.WriteString("-" + gitT(t, dir, "rev-parse", p) + " \n")
	}
	header.WriteString(tip + " " + ref + "\n\n")
	cmd := exec.Command("git", "-C", dir, "pack-objects", "--revs", "--stdout", "--delta-base-offset", "-q")
	cmd.Stdin = strings.NewReader(revs)
	cmd.Stderr = os.Stderr
	pack, err := cmd.Output()
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "result.bundle")
	require.NoError(t, os.WriteFile(path, append([]byte(header.String()), pack...), 0o600))
	return path
}

func runImport(ctx context.Context, git *Runner, req ImportRequest) error {
	_, err := ImportResult(ctx, git, req)
	return err
}

func (f *importFixture) request(result, bundle string) ImportRequest {
	return ImportRequest{
		RepoPath:        f.repo,
		StateRoot:       f.state,
		AttemptID:       testAttemptID,
		WorktreeKey:     testKey,
		InputCommitSHA:  f.input,
		ResultCommitSHA: result,
		BundlePath:      bundle,
	}
}

// assertTidy checks that no quarantine and no temporary ref is left.
func (f *importFixture) assertTidy(t *testing.T) {
	t.Helper()
	assert.NoDirExists(t, filepath.Join(f.state, "quarantine", testAttemptHex))
	assert.Empty(t, gitT(t, f.repo, "for-each-ref", "refs/forge/"))
}

func (f *importFixture) addWorktree(t *testing.T) string {
	t.Helper()
	wt := filepath.Join(t.TempDir(), "wt")
	gitT(t, f.repo, "worktree", "add", "--quiet", "-b", testKey, wt, f.input)
	return wt
}

func TestImportCreatesAbsentBranch(t *testing.T) {
	t.Parallel()
	f := newImportFixture(t)
	result := f.work(t, 2)
	calls := 0
	req := f.request(result, f.bundle(t, f.input, result))
	req.AssertCurrent = func() error {
		calls++
		gitT(t, f.repo, "cat-file", "-e", result+"^{commit}") // objects are in before the move
		assert.Empty(t, refOf(t, f.repo, "refs/heads/"+testKey))
		return nil
	}
	require.NoError(t, runImport(testCtx(t), NewRunner(), req))
	assert.Equal(t, 1, calls)
	assert.Equal(t, result, refOf(t, f.repo, "refs/heads/"+testKey))
	assert.Equal(t, f.input, refOf(t, f.repo, "refs/heads/main"))
	gitT(t, f.repo, "fsck", "--strict", "--no-dangling")
	f.assertTidy(t)
}

func TestImportMovesBranchAtInput(t *testing.T) {
	t.Parallel()
	f := newImportFixture(t)
	gitT(t, f.repo, "branch", testKey, f.input)
	result := f.work(t, 1)
	require.NoError(t, runImport(testCtx(t), NewRunner(), f.request(result, f.bundle(t, f.input, result))))
	assert.Equal(t, result, refOf(t, f.repo, "refs/heads/"+testKey))
	f.assertTidy(t)
}

func TestImportAcceptsHeadNamedBundle(t *testing.T) {
	t.Parallel()
	f := newImportFixture(t)
	result := f.work(t, 1)
	bundle := filepath.Join(t.TempDir(), "b.bundle")
	gitT(t, f.sandbox, "bundle", "create", "--quiet", bundle, f.input+"..HEAD")
	require.NoError(t, runImport(testCtx(t), NewRunner(), f.request(result, bundle)))
	assert.Equal(t, result, refOf(t, f.repo, "refs/heads/"+testKey))
	f.assertTidy(t)
}

func TestImportConflictWhenBranchMoved(t *testing.T) {
	t.Parallel()
	f := newImportFixture(t)
	elsewhere := gitT(t, f.repo, "commit-tree", "-p", f.input, "-m", "someone else", f.input+"^{tree}")
	gitT(t, f.repo, "branch", testKey, elsewhere)
	result := f.work(t, 1)
	before := allRefs(t, f.repo)
	err := runImport(testCtx(t), NewRunner(), f.request(result, f.bundle(t, f.input, result)))
	requireCode(t, err, failure.SandboxOutputConflict, "changed after the sandbox input was captured")
	assert.Equal(t, elsewhere, refOf(t, f.repo, "refs/heads/"+testKey))
	assert.Equal(t, before, allRefs(t, f.repo), "the host's refs are unchanged")
	f.assertTidy(t)
}

func TestImportAssertCurrentFailureMovesNothing(t *testing.T) {
	t.Parallel()
	for _, code := range []failure.Code{failure.SandboxOutputStale, failure.SandboxLeaseExpired, failure.SandboxCancelled} {
		for _, existing := range []bool{false, true} {
			f := newImportFixture(t)
			if existing {
				gitT(t, f.repo, "branch", testKey, f.input)
			}
			result := f.work(t, 1)
			stale := failure.New(code, "attempt no longer current")
			req := f.request(result, f.bundle(t, f.input, result))
			req.AssertCurrent = func() error { return stale }
			before := allRefs(t, f.repo)
			err := runImport(testCtx(t), NewRunner(), req)
			require.Error(t, err)
			assert.True(t, errors.Is(err, stale), "the error is returned as is: %v", err)
			want := ""
			if existing {
				want = f.input
			}
			assert.Equal(t, want, refOf(t, f.repo, "refs/heads/"+testKey))
			assert.Equal(t, before, allRefs(t, f.repo), "the host's refs are unchanged")
			f.assertTidy(t)
		}
	}
}

// TestImportBranchMovedDuringAttempt moves the managed branch at the last
// moment, from the fence check right before the move: the compare-and-swap
// must refuse and keep the concurrent value.
func TestImportBranchMovedDuringAttempt(t *testing.T) {
	t.Parallel()
	for _, existing := range []bool{false, true} {
		t.Run(map[bool]string{false: "created meanwhile", true: "moved meanwhile"}[existing], func(t *testing.T) {
			t.Parallel()
			f := newImportFixture(t)
			if existing {
				gitT(t, f.repo, "branch", testKey, f.input)
			}
			result := f.work(t, 1)
			elsewhere := gitT(t, f.repo, "commit-tree", "-p", f.input, "-m", "someone else", f.input+"^{tree}")
			req := f.request(result, f.bundle(t, f.input, result))
			var before string
			req.AssertCurrent = func() error {
				gitT(t, f.repo, "update-ref", "refs/heads/"+testKey, elsewhere)
				// The temporary import ref exists now and is gone afterwards
				// (assertTidy); every other ref must stay.
				before = strings.ReplaceAll(allRefs(t, f.repo),
					"\n"+importRefPrefix+testAttemptHex+" "+result, "")
				return nil
			}
			err := runImport(testCtx(t), NewRunner(), req)
			requireCode(t, err, failure.SandboxOutputConflict, "changed after the sandbox input was captured")
			assert.Equal(t, elsewhere, refOf(t, f.repo, "refs/heads/"+testKey))
			assert.Equal(t, before, allRefs(t, f.repo), "nothing moved after the concurrent update")
			f.assertTidy(t)
		})
	}
}

func TestImportRejectsInvalidResults(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		build   func(t *testing.T, f *importFixture) ImportRequest
		wantMsg string
	}{
		{"not descended from input", func(t *testing.T, f *importFixture) ImportRequest {
			sibling := gitT(t, f.sandbox, "commit-tree", "-p", f.input+"^", "-m", "sibling", f.input+"^{tree}")
			return f.request(sibling, f.bundle(t, f.input+"^", sibling))
		}, "not descended"},
		{"manifest names another commit", func(t *testing.T, f *importFixture) ImportRequest {
			first := f.work(t, 1)
			result := f.work(t, 1)
			return f.request(first, f.bundle(t, f.input, result))
		}, "no head at the manifest's result commit"},
		{"manifest names the input", func(t *testing.T, f *importFixture) ImportRequest {
			result := f.work(t, 1)
			return f.request(f.input, f.bundle(t, f.input, result))
		}, "no head"},
		{"missing prerequisites", func(t *testing.T, f *importFixture) ImportRequest {
			first := f.work(t, 1)
			result := f.work(t, 1)
			return f.request(result, f.bundle(t, first, result))
		}, "did not receive expected object"},
		{"not a bundle", func(t *testing.T, f *importFixture) ImportRequest {
			path := filepath.Join(t.TempDir(), "garbage.bundle")
			writeFile(t, path, "# v2 git bundle\n"+f.input+" refs/forge/results/x\n\nPACKgarbage")
			return f.request(f.input, path)
		}, "result pack"},
		{"corrupt object", func(t *testing.T, f *importFixture) ImportRequest {
			result := commitZeroPaddedTree(t, f.sandbox, f.input)
			return f.request(result, f.bundle(t, f.input, result))
		}, "zeroPaddedFilemode"},
		{"corrupted pack data", func(t *testing.T, f *importFixture) ImportRequest {
			result := f.work(t, 1)
			path := f.bundle(t, f.input, result)
			raw, err := os.ReadFile(path)
			require.NoError(t, err)
			pack := bytes.Index(raw, []byte("\n\nPACK")) + 2
			require.Greater(t, pack, 2)
			raw[pack+(len(raw)-pack)/2] ^= 0xff
			require.NoError(t, os.WriteFile(path, raw, 0o600))
			return f.request(result, path)
		}, ""},
		{"malformed commit", func(t *testing.T, f *importFixture) ImportRequest {
			result := gitStdin(t, f.sandbox, "tree "+gitT(t, f.sandbox, "rev-parse", f.input+"^{tree}")+"\nparent "+f.input+
				"\ncommitter Forge Test <test@forge.invalid> 0 +0000\n\nno author\n",
				"hash-object", "-t", "commit", "-w", "--stdin", "--literally")
			return f.request(result, f.bundle(t, f.input, result))
		}, "missingAuthor"},
		{"object budget", func(t *testing.T, f *importFixture) ImportRequest {
			result := f.work(t, 1)
			req := f.request(result, f.bundle(t, f.input, result))
			req.Budget.MaxObjects = 2
			return req
		}, "object-count budget"},
		{"byte budget", func(t *testing.T, f *importFixture) ImportRequest {
			result := f.work(t, 1)
			req := f.request(result, f.bundle(t, f.input, result))
			req.Budget.MaxExpandedBytes = 100
			return req
		}, "byte budget"},
		{"depth budget", func(t *testing.T, f *importFixture) ImportRequest {
			result := f.work(t, 3)
			req := f.request(result, f.bundle(t, f.input, result))
			req.Budget.MaxCommitDepth = 2
			return req
		}, "commit-depth budget"},
		{"relative bundle path", func(t *testing.T, f *importFixture) ImportRequest {
			result := f.work(t, 1)
			return f.request(result, "result.bundle")
		}, "absolute"},
		{"abbreviated result", func(t *testing.T, f *importFixture) ImportRequest {
			result := f.work(t, 1)
			return f.request(result[:12], f.bundle(t, f.input, result))
		}, "full object ids"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newImportFixture(t)
			req := tc.build(t, f)
			before := allRefs(t, f.repo)
			called := false
			req.AssertCurrent = func() error { called = true; return nil }
			err := runImport(testCtx(t), NewRunner(), req)
			t.Log(err)
			requireCode(t, err, failure.SandboxOutputInvalid, tc.wantMsg)
			assert.False(t, called, "AssertCurrent runs only after validation")
			assert.Empty(t, refOf(t, f.repo, "refs/heads/"+testKey))
			assert.Equal(t, before, allRefs(t, f.repo), "the host's refs are unchanged")
			f.assertTidy(t)
		})
	}
}

func TestImportNothingToImport(t *testing.T) {
	t.Parallel()
	f := newImportFixture(t)
	require.NoError(t, runImport(testCtx(t), NewRunner(), f.request("", "")))
	assert.Empty(t, refOf(t, f.repo, "refs/heads/"+testKey))
}

func TestImportCheckedOutWorktree(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		mutate   func(t *testing.T, f *importFixture, wt string)
		wantCode failure.Code
	}{
		{"clean: moved and reset", nil, ""},
		{"tracked change", func(t *testing.T, _ *importFixture, wt string) {
			writeFile(t, filepath.Join(wt, "src.txt"), "local edit\n")
		}, failure.SandboxOutputConflict},
		{"staged change", func(t *testing.T, _ *importFixture, wt string) {
			writeFile(t, filepath.Join(wt, "staged.txt"), "x\n")
			gitT(t, wt, "add", "staged.txt")
		}, failure.SandboxOutputConflict},
		{"untracked file in the way", func(t *testing.T, _ *importFixture, wt string) {
			writeFile(t, filepath.Join(wt, "new-0.txt"), "mine\n")
		}, failure.SandboxOutputConflict},
		{"local commit", func(t *testing.T, _ *importFixture, wt string) {
			commitFile(t, wt, "local.txt", "local\n", "local commit")
		}, failure.SandboxOutputConflict},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newImportFixture(t)
			wt := f.addWorktree(t)
			writeFile(t, filepath.Join(wt, "untracked-elsewhere.txt"), "kept\n")
			if tc.mutate != nil {
				tc.mutate(t, f, wt)
			}
			before := refOf(t, f.repo, "refs/heads/"+testKey)
			refsBefore := allRefs(t, f.repo)
			status := gitT(t, wt, "status", "--porcelain")
			result := f.work(t, 1)

			err := runImport(testCtx(t), NewRunner(), f.request(result, f.bundle(t, f.input, result)))
			f.assertTidy(t)
			if tc.wantCode != "" {
				requireCode(t, err, tc.wantCode, "managed worktree")
				assert.Equal(t, before, refOf(t, f.repo, "refs/heads/"+testKey))
				assert.Equal(t, refsBefore, allRefs(t, f.repo), "the host's refs are unchanged")
				assert.Equal(t, status, gitT(t, wt, "status", "--porcelain"), "the worktree is untouched")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, result, refOf(t, f.repo, "refs/heads/"+testKey))
			assert.Equal(t, result, gitT(t, wt, "rev-parse", "HEAD"))
			assert.Equal(t, "?? untracked-elsewhere.txt", gitT(t, wt, "status", "--porcelain"))
			assert.FileExists(t, filepath.Join(wt, "new-0.txt"))
		})
	}
}

func TestImportRefusesUnmanagedBranches(t *testing.T) {
	t.Parallel()
	for _, key := range []string{"main", "forge", "feature/x", "forgery/x"} {
		f := newImportFixture(t)
		result := f.work(t, 1)
		req := f.request(result, f.bundle(t, f.input, result))
		req.WorktreeKey = key
		before := allRefs(t, f.repo)
		err := runImport(testCtx(t), NewRunner(), req)
		requireCode(t, err, failure.SandboxOutputInvalid, "not a managed branch")
		assert.Equal(t, before, allRefs(t, f.repo), key)
		assert.Empty(t, gitT(t, f.repo, "status", "--porcelain"))
	}
	f := newImportFixture(t)
	result := f.work(t, 1)
	req := f.request(result, f.bundle(t, f.input, result))
	req.WorktreeKey, req.ManagedNamespace = "agents/x", "refs/heads/agents/"
	require.NoError(t, runImport(testCtx(t), NewRunner(), req), "an operator's namespace")
	assert.Equal(t, result, refOf(t, f.repo, "refs/heads/agents/x"))
}

func TestImportRemovesStaleQuarantine(t *testing.T) {
	t.Parallel()
	f := newImportFixture(t)
	stale := filepath.Join(f.state, "quarantine", testAttemptHex)
	writeFile(t, filepath.Join(stale, "leftover"), "x")
	result := f.work(t, 1)
	require.NoError(t, runImport(testCtx(t), NewRunner(), f.request(result, f.bundle(t, f.input, result))))
	f.assertTidy(t)
}

// commitZeroPaddedTree commits, on top of parent, a tree whose entry mode
// is zero-padded: accepted by a bare bundle fetch, refused by strict fsck.
func commitZeroPaddedTree(t *testing.T, dir, parent string) string {
	t.Helper()
	blob := gitStdin(t, dir, "evil\n", "hash-object", "-w", "--stdin")
	raw, err := hex.DecodeString(blob)
	require.NoError(t, err)
	tree := gitStdin(t, dir, "0100644 f\x00"+string(raw), "hash-object", "-t", "tree", "-w", "--stdin", "--literally")
	return gitT(t, dir, "commit-tree", "-p", parent, "-m", "bad tree", tree)
}

func gitStdin(t *testing.T, dir, stdin string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	require.NoError(t, err)
	return strings.TrimSpace(string(out))
}
