package gitops

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/failure"
)

// Under --publish-author-policy rewrite, a bridge_push result whose
// commits claim somebody else's name (author and committer spoofed, one of
// them a merge) is imported with the operator's identity on every commit,
// trees, messages, dates and the history's shape kept; the managed branch
// and the remote then hold the same rewritten result. The same result
// imported as written is refused at publication, before the push.
func TestPublishPolicyRewritesIdentitiesAtImport(t *testing.T) {
	spoof := []string{"GIT_AUTHOR_NAME=Linus Torvalds", "GIT_AUTHOR_EMAIL=torvalds@linux-foundation.org",
		"GIT_AUTHOR_DATE=@1700000000 +0200", "GIT_COMMITTER_NAME=Release Bot", "GIT_COMMITTER_EMAIL=bot@example.com",
		"GIT_COMMITTER_DATE=@1700000100 -0500"}
	operator := Identity{Name: "Forge Operator", Email: "operator@example.com"}
	policy := PublishPolicy{Author: AuthorRewrite, Identity: operator}
	require.NoError(t, policy.Validate())

	for _, rewrite := range []bool{false, true} {
		f := newImportFixture(t)
		sb, repo := f.sandbox, f.repo
		result := spoofedResult(t, f, spoof)
		req := f.request(result, f.bundle(t, f.input, result))
		req.RewriteIdentity = policy.RewriteIdentity(rewrite)
		report, err := ImportResult(testCtx(t), NewRunner(), req)
		require.NoError(t, err)
		imported := report.ResultCommitSHA
		assert.Equal(t, imported, refOf(t, repo, "refs/heads/"+testKey))

		remote := filepath.Join(t.TempDir(), "remote.git")
		gitT(t, "", "init", "--quiet", "--bare", "-b", "main", remote)
		pub := PublishRequest{
			RepoPath: repo, Branch: testKey, InputCommitSHA: f.input, ResultCommitSHA: imported,
			Credential:    Credential{RemoteURL: remote, Username: testPublishUser, Secret: testPublishSecret, ExpiresAt: testNow.Add(time.Hour)},
			AssertCurrent: func() error { return nil }, ValidateRemote: localRemote, Now: func() time.Time { return testNow },
			Policy: policy,
		}
		res, err := Publish(context.Background(), NewRunner(), pub)
		if !rewrite {
			assert.Equal(t, result, imported)
			assert.Equal(t, failure.SandboxOutputPublishPolicy, failure.CodeOf(err), "%v", err)
			assert.False(t, res.Pushed)
			assert.Empty(t, refOf(t, remote, "refs/heads/"+testKey))
			continue
		}
		require.NoError(t, err)
		assert.True(t, res.Pushed)
		assert.NotEqual(t, result, imported)
		assert.Equal(t, imported, refOf(t, remote, "refs/heads/"+testKey), "the remote holds the managed branch's commit")
		assert.Equal(t, gitT(t, sb, "rev-parse", result+"^{tree}"), gitT(t, repo, "rev-parse", imported+"^{tree}"))
		assert.Len(t, report.Newest, 3)
		assert.Equal(t, imported, report.Newest[0].SHA)

		orig := strings.Split(gitT(t, sb, "log", "--topo-order", "--format=%T %P|%at %ad|%ct|%B", "--date=raw", f.input+".."+result), "\n")
		got := strings.Split(gitT(t, repo, "log", "--topo-order", "--format=%T %P|%at %ad|%ct|%B", "--date=raw", f.input+".."+imported), "\n")
		require.Len(t, got, len(orig))
		idents := gitT(t, repo, "log", "--format=%an <%ae>|%cn <%ce>", f.input+".."+imported)
		for _, line := range strings.Split(idents, "\n") {
			assert.Equal(t, operator.String()+"|"+operator.String(), line)
		}
		for i := range orig {
			// Parents differ (rewritten), the rest is kept: compare all
			// but the parent ids.
			o, g := strings.SplitN(orig[i], "|", 2), strings.SplitN(got[i], "|", 2)
			if len(o) == 2 && len(g) == 2 {
				assert.Equal(t, strings.Fields(o[0])[0], strings.Fields(g[0])[0], "tree of commit %d", i)
				assert.Equal(t, len(strings.Fields(o[0])), len(strings.Fields(g[0])), "parent count of commit %d", i)
				assert.Equal(t, o[1], g[1], "dates and message of commit %d", i)
			} else {
				assert.Equal(t, orig[i], got[i])
			}
		}
		gitT(t, repo, "fsck", "--strict", "--no-dangling")
		f.assertTidy(t)
	}
}

// spoofedResult makes, in f's sandbox, a side commit and a merge of
// another commit on top of the input, all under env's identities, and
// returns the merge.
func spoofedResult(t *testing.T, f *importFixture, env []string) string {
	t.Helper()
	sb := f.sandbox
	writeFile(t, filepath.Join(sb, "a.txt"), "a\n")
	gitT(t, sb, "add", "a.txt")
	gitWithEnv(t, sb, env, "commit", "--quiet", "-m", "first\n\nbody line")
	first := gitT(t, sb, "rev-parse", "HEAD")
	gitT(t, sb, "checkout", "--quiet", "--detach", f.input)
	writeFile(t, filepath.Join(sb, "b.txt"), "b\n")
	gitT(t, sb, "add", "b.txt")
	gitWithEnv(t, sb, env, "commit", "--quiet", "-m", "side")
	gitWithEnv(t, sb, env, "merge", "--quiet", "--no-ff", "-m", "merge", first)
	return gitT(t, sb, "rev-parse", "HEAD")
}

func TestParseCommitObjectRefusesMalformed(t *testing.T) {
	tree := strings.Repeat("a", 40)
	ok := "tree " + tree + "\nauthor A <a@x> 1 +0000\ncommitter C <c@x> 2 -0130\n\nmsg\n"
	c, err := parseCommitObject([]byte(ok))
	require.NoError(t, err)
	assert.Equal(t, "1 +0000", c.authorDate)
	assert.Equal(t, "2 -0130", c.committerDate)
	assert.Equal(t, "msg\n", string(c.message))
	for _, bad := range []string{
		"author A <a@x> 1 +0000\ncommitter C <c@x> 2 +0000\n\nm",
		"tree " + tree + "\nauthor A <a@x>\ncommitter C <c@x> 2 +0000\n\nm",
		"tree " + tree + "\nauthor A <a@x> 1 +00000\ncommitter C <c@x> 2 +0000\n\nm",
		"tree " + tree + "\nauthor A <a@x> 1 +0000\ncommitter C <c@x> x +0000\n\nm",
		"tree " + tree + "\nauthor A <a@x> 1 +0000\ncommitter C <c@x> 2 +0000\nencoding a=b\n\nm",
	} {
		_, err := parseCommitObject([]byte(bad))
		assert.Error(t, err, bad)
	}
}
