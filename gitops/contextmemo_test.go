package gitops

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/failure"
)

// goldenContextDigest is the digest of fixedContextRepo's build context as
// Prepare wrote it to input/context.tar before the context became lazy
// (commit aab5727): the lazy writer must produce the very same bytes, or
// every cached image key would change.
const goldenContextDigest = "08d762b657f60c4b6ae822839fd51cd0dfd28a59e257fb30db5e5b95dc896764"

// fixedContextRepo is a repository whose config commit has a fixed tree and
// commit time: regular files, an executable, a symlink, nested directories.
func fixedContextRepo(t *testing.T) string {
	t.Helper()
	dir := newRepo(t)
	writeFile(t, filepath.Join(dir, "bin", "tool.sh"), "#!/bin/sh\necho tool\n")
	require.NoError(t, os.Chmod(filepath.Join(dir, "bin", "tool.sh"), 0o755))
	require.NoError(t, os.Symlink("../README.md", filepath.Join(dir, "bin", "readme")))
	writeFile(t, filepath.Join(dir, "src", "a", "b", "deep.txt"), "deep\n")
	writeFile(t, filepath.Join(dir, "empty"), "")
	gitT(t, dir, "add", "-A")
	cmd := exec.Command("git", "-C", dir, "commit", "--quiet", "--amend", "-m", "fixed")
	cmd.Env = append(os.Environ(), "GIT_COMMITTER_DATE=1700000000 +0000", "GIT_AUTHOR_DATE=1700000000 +0000")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, string(out))
	require.Equal(t, "e26de91c6e13195045dfd80387cfd37feb0a2fa3", gitT(t, dir, "rev-parse", "HEAD^{tree}"))
	return dir
}

// contextTar writes p's build context through OpenContext to a file of
// the test's and returns its path.
func contextTar(t *testing.T, p *Prepared) string {
	t.Helper()
	f, err := OpenContext(testCtx(t), NewRunner(), p, filepath.Join(t.TempDir(), "contexts"))
	require.NoError(t, err)
	defer f.Close()
	path := filepath.Join(t.TempDir(), "context.tar")
	out, err := os.Create(path)
	require.NoError(t, err)
	_, err = io.Copy(out, f)
	require.NoError(t, err)
	require.NoError(t, out.Close())
	return path
}

func memoRequest(t *testing.T, repo, memoDir string) PrepareRequest {
	req := prepareRequest(t, repo)
	req.ContextMemoDir = memoDir
	return req
}

func fileDigest(t *testing.T, path string) string {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:])
}

// The lazy context is the context Prepare wrote before, byte for byte,
// with the memo or without; Prepare itself writes no tar.
func TestContextLazyIsTheGoldenTar(t *testing.T) {
	t.Parallel()
	repo := fixedContextRepo(t)
	for _, memoDir := range []string{"", filepath.Join(t.TempDir(), "memo")} {
		p, err := Prepare(testCtx(t), NewRunner(), memoRequest(t, repo, memoDir))
		require.NoError(t, err)
		assert.Equal(t, goldenContextDigest, p.ContextDigest)
		assert.Equal(t, goldenContextDigest, fileDigest(t, contextTar(t, p)))
		entries, err := os.ReadDir(filepath.Join(filepath.Dir(p.BundlePath)))
		require.NoError(t, err)
		require.Len(t, entries, 1, "the input directory holds the bundle only")
	}
}

// A miss computes and memoizes the digest; a hit takes it from the memo
// without reading a blob (shown by a memo whose digest is another's: the
// hit returns it as it is) and the build, which writes the real tar,
// refuses it and removes the memo; the next preparation recomputes.
func TestContextMemoHitMissAndWrongMemo(t *testing.T) {
	t.Parallel()
	repo := fixedContextRepo(t)
	memoDir := filepath.Join(t.TempDir(), "memo")

	miss, err := Prepare(testCtx(t), NewRunner(), memoRequest(t, repo, memoDir))
	require.NoError(t, err)
	require.False(t, miss.context.memoized)
	memoPath := filepath.Join(memoDir, miss.context.memo.name())
	var m contextMemo
	raw, err := os.ReadFile(memoPath)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, &m))
	assert.Equal(t, goldenContextDigest, m.Digest)
	assert.Equal(t, "e26de91c6e13195045dfd80387cfd37feb0a2fa3", m.Tree)
	assert.Equal(t, int64(1700000000), m.MTime)

	hit, err := Prepare(testCtx(t), NewRunner(), memoRequest(t, repo, memoDir))
	require.NoError(t, err)
	assert.True(t, hit.context.memoized)
	assert.Equal(t, goldenContextDigest, hit.ContextDigest)
	assert.Equal(t, goldenContextDigest, fileDigest(t, contextTar(t, hit)), "a right memo builds")

	// A well-formed memo with a wrong digest: the image key is made of it,
	// and the build refuses loudly.
	wrong := m
	wrong.Digest = "0000000000000000000000000000000000000000000000000000000000000000"
	raw, err = json.Marshal(wrong)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(memoPath, raw, 0o600))
	bad, err := Prepare(testCtx(t), NewRunner(), memoRequest(t, repo, memoDir))
	require.NoError(t, err)
	require.Equal(t, wrong.Digest, bad.ContextDigest, "a hit reads no blob")
	contexts := filepath.Join(t.TempDir(), "contexts")
	f, err := OpenContext(testCtx(t), NewRunner(), bad, contexts)
	require.Error(t, err)
	assert.Nil(t, f)
	assert.Equal(t, failure.SandboxInputFailed, failure.CodeOf(err))
	assert.Contains(t, err.Error(), goldenContextDigest)
	assert.Contains(t, err.Error(), "refusing to build")
	assert.NoFileExists(t, memoPath, "the wrong memo is removed")
	left, err := os.ReadDir(contexts)
	require.NoError(t, err)
	assert.Empty(t, left, "no tar is left behind")

	again, err := Prepare(testCtx(t), NewRunner(), memoRequest(t, repo, memoDir))
	require.NoError(t, err)
	assert.False(t, again.context.memoized)
	assert.Equal(t, goldenContextDigest, again.ContextDigest)
}

// A memo that does not parse, names another key, or carries no digest is
// a miss, and is rewritten.
func TestContextMemoTamperedIsAMiss(t *testing.T) {
	t.Parallel()
	repo := fixedContextRepo(t)
	memoDir := filepath.Join(t.TempDir(), "memo")
	first, err := Prepare(testCtx(t), NewRunner(), memoRequest(t, repo, memoDir))
	require.NoError(t, err)
	memoPath := filepath.Join(memoDir, first.context.memo.name())
	other := first.context.memo
	other.Tree = "1111111111111111111111111111111111111111"
	other.Digest = "0000000000000000000000000000000000000000000000000000000000000000"
	otherKey, err := json.Marshal(other)
	require.NoError(t, err)
	noDigest := first.context.memo
	noDigest.Digest = "NOT-A-DIGEST"
	badDigest, err := json.Marshal(noDigest)
	require.NoError(t, err)
	for name, content := range map[string][]byte{
		"garbage": []byte("{not json"), "another key": otherKey, "no digest": badDigest, "huge": make([]byte, maxMemoBytes+10),
	} {
		require.NoError(t, os.WriteFile(memoPath, content, 0o600), name)
		p, err := Prepare(testCtx(t), NewRunner(), memoRequest(t, repo, memoDir))
		require.NoError(t, err, name)
		assert.False(t, p.context.memoized, name)
		assert.Equal(t, goldenContextDigest, p.ContextDigest, name)
		digest, ok := lookupContextMemo(memoDir, first.context.memo)
		assert.True(t, ok, name)
		assert.Equal(t, goldenContextDigest, digest, name, "the memo is rewritten")
	}
}

// The memo is keyed by the tree and the commit time: another commit of
// the same tree at the same time shares it; another time does not.
func TestContextMemoKey(t *testing.T) {
	t.Parallel()
	tree := "e26de91c6e13195045dfd80387cfd37feb0a2fa3"
	a := newContextMemo(tree, time.Unix(1700000000, 0))
	assert.Equal(t, a.name(), newContextMemo(tree, time.Unix(1700000000, 0).UTC()).name())
	assert.NotEqual(t, a.name(), newContextMemo(tree, time.Unix(1700000001, 0)).name())
	assert.NotEqual(t, a.name(), newContextMemo("1111111111111111111111111111111111111111", time.Unix(1700000000, 0)).name())
	b := a
	b.Version++
	assert.NotEqual(t, a.name(), b.name())
}

// The memo directory stays bounded.
func TestContextMemoPrunes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for i := range maxContextMemos + 1 {
		m := newContextMemo(fmt.Sprintf("%040x", i), time.Unix(1700000000, 0))
		m.Digest = goldenContextDigest
		require.NoError(t, storeContextMemo(dir, m))
	}
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, entries, keepContextMemos)
}

// A config commit whose objects are gone by the time the build writes the
// context fails with the input's code.
func TestOpenContextObjectsGone(t *testing.T) {
	t.Parallel()
	repo := fixedContextRepo(t)
	p, err := Prepare(testCtx(t), NewRunner(), prepareRequest(t, repo))
	require.NoError(t, err)
	require.NoError(t, os.RemoveAll(filepath.Join(repo, ".git", "objects")))
	require.NoError(t, os.MkdirAll(filepath.Join(repo, ".git", "objects", "pack"), 0o755))
	_, err = OpenContext(testCtx(t), NewRunner(), p, t.TempDir())
	require.Error(t, err)
	assert.Equal(t, failure.SandboxInputFailed, failure.CodeOf(err))
	assert.Contains(t, err.Error(), p.ConfigCommitSHA)
}
