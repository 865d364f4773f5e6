package gitops

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/worker"
)

// policyFixture is a publish fixture whose result is built by build, on
// top of the input, in the host repository.
func policyFixture(t *testing.T, build func(repo string)) (*publishFixture, PublishRequest) {
	t.Helper()
	f := newPublishFixture(t)
	gitT(t, f.repo, "reset", "--quiet", "--hard", f.input)
	build(f.repo)
	f.result = gitT(t, f.repo, "rev-parse", "HEAD")
	req := f.request()
	req.Policy = DefaultPublishPolicy()
	return f, req
}

// A result that adds a workflow (or touches any protected path, in any
// commit, through any route) is refused before the remote is contacted:
// the remote is untouched and the fence was never asked.
func TestPublishPolicyRefusesCIConfiguration(t *testing.T) {
	cases := map[string]func(repo string){
		"workflow": func(repo string) { commitFile(t, repo, ".github/workflows/x.yml", "on: push\n", "ci") },
		"workflow in an earlier commit, deleted later": func(repo string) {
			commitFile(t, repo, ".github/workflows/x.yml", "on: push\n", "ci")
			gitT(t, repo, "rm", "--quiet", "-r", ".github")
			gitT(t, repo, "commit", "--quiet", "-m", "hide it")
		},
		"case variant": func(repo string) { commitFile(t, repo, ".GitHub/Workflows/x.yml", "on: push\n", "ci") },
		"gitlab":       func(repo string) { commitFile(t, repo, ".gitlab-ci.yml", "job: {}\n", "ci") },
		"circleci":     func(repo string) { commitFile(t, repo, ".circleci/config.yml", "x\n", "ci") },
		"codeowners":   func(repo string) { commitFile(t, repo, ".github/CODEOWNERS", "* @me\n", "owners") },
		".github made a symlink": func(repo string) {
			require.NoError(t, symlink("ci", filepath.Join(repo, ".github")))
			gitT(t, repo, "add", ".github")
			gitT(t, repo, "commit", "--quiet", "-m", "link")
		},
		"workflow brought in by a merge": func(repo string) {
			base := gitT(t, repo, "rev-parse", "HEAD")
			side := commitFile(t, repo, ".github/workflows/x.yml", "on: push\n", "side")
			gitT(t, repo, "reset", "--quiet", "--hard", base)
			commitFile(t, repo, "main.txt", "main\n", "main")
			gitT(t, repo, "merge", "--quiet", "--no-edit", side)
		},
	}
	for name, build := range cases {
		t.Run(name, func(t *testing.T) {
			f, req := policyFixture(t, build)
			res, err := Publish(context.Background(), NewRunner(), req)
			require.Error(t, err)
			assert.Equal(t, failure.SandboxOutputPublishPolicy, failure.CodeOf(err), err.Error())
			assert.False(t, res.Pushed)
			assert.Empty(t, f.remoteBranch(t), "nothing reached the remote")
			assert.Zero(t, f.assertCalls, "refused before the fence and the remote")
		})
	}
}

func TestPublishPolicyAllowsOtherPathsAndCanBeLoosened(t *testing.T) {
	f, req := policyFixture(t, func(repo string) {
		commitFile(t, repo, "docs/github/workflows.md", "prose\n", "docs")
		commitFile(t, repo, "src/.github-like", "x\n", "src")
	})
	res, err := Publish(context.Background(), NewRunner(), req)
	require.NoError(t, err)
	assert.True(t, res.Pushed)
	assert.Equal(t, f.result, f.remoteBranch(t))

	f, req = policyFixture(t, func(repo string) { commitFile(t, repo, ".github/workflows/x.yml", "on: push\n", "ci") })
	req.Policy.ForbiddenPaths = nil // the operator allows CI changes
	_, err = Publish(context.Background(), NewRunner(), req)
	require.NoError(t, err)
	assert.Equal(t, f.result, f.remoteBranch(t))
}

// A spoofed author (or committer) is refused when the operator requires
// the sandbox's identity; the worker's own commits pass.
func TestPublishPolicyRequiresTheIdentity(t *testing.T) {
	sandbox := DefaultIdentity
	for name, tc := range map[string]struct {
		env  []string
		want bool
	}{
		"spoofed author":    {env: []string{"GIT_AUTHOR_NAME=Linus Torvalds", "GIT_AUTHOR_EMAIL=torvalds@linux-foundation.org"}},
		"spoofed committer": {env: []string{"GIT_COMMITTER_NAME=Release Bot", "GIT_COMMITTER_EMAIL=bot@example.com"}},
		"sandbox identity":  {want: true},
	} {
		t.Run(name, func(t *testing.T) {
			f, req := policyFixture(t, func(repo string) {
				writeFile(t, filepath.Join(repo, "work.txt"), "work\n")
				gitT(t, repo, "add", "work.txt")
				args := []string{"commit", "--quiet", "-m", "work"}
				env := append([]string{"GIT_AUTHOR_NAME=" + sandbox.Name, "GIT_AUTHOR_EMAIL=" + sandbox.Email,
					"GIT_COMMITTER_NAME=" + sandbox.Name, "GIT_COMMITTER_EMAIL=" + sandbox.Email}, tc.env...)
				gitWithEnv(t, repo, env, args...)
			})
			req.Policy.Author = AuthorRequire
			res, err := Publish(context.Background(), NewRunner(), req)
			if tc.want {
				require.NoError(t, err)
				assert.Equal(t, f.result, f.remoteBranch(t))
				return
			}
			require.Error(t, err)
			assert.Equal(t, failure.SandboxOutputPublishPolicy, failure.CodeOf(err), err.Error())
			assert.Contains(t, err.Error(), f.result)
			assert.False(t, res.Pushed)
			assert.Empty(t, f.remoteBranch(t))
		})
	}
	// The fixture's own result (authored by the test identity) is refused
	// too: every commit of input..result is checked.
	f := newPublishFixture(t)
	req := f.request()
	req.Policy = PublishPolicy{Author: AuthorRequire, Identity: DefaultIdentity}
	_, err := Publish(context.Background(), NewRunner(), req)
	assert.Equal(t, failure.SandboxOutputPublishPolicy, failure.CodeOf(err))
	assert.Empty(t, f.remoteBranch(t))
}

func TestDefaultIdentityIsTheWorkers(t *testing.T) {
	assert.Equal(t, Identity{Name: worker.CommitAuthorName, Email: worker.CommitAuthorEmail}, DefaultIdentity)
}

func TestPublishPolicyValidateAndParseIdentity(t *testing.T) {
	require.NoError(t, DefaultPublishPolicy().Validate())
	require.NoError(t, PublishPolicy{}.Validate())
	for _, bad := range []PublishPolicy{
		{ForbiddenPaths: []string{"/etc/x"}}, {ForbiddenPaths: []string{"a/../b"}}, {ForbiddenPaths: []string{"/"}},
		{ForbiddenPaths: []string{""}}, {Author: "rewrite"}, {Author: AuthorRequire},
	} {
		assert.Error(t, bad.Validate(), fmt.Sprint(bad))
	}
	id, err := ParseIdentity("forge sandbox <sandbox@forge.invalid>")
	require.NoError(t, err)
	assert.Equal(t, DefaultIdentity, id)
	for _, bad := range []string{"", "sandbox@forge.invalid", "<a@b>", "x <a@b> y"} {
		_, err := ParseIdentity(bad)
		assert.Error(t, err, bad)
	}
}

func symlink(target, path string) error { return os.Symlink(target, path) }

// gitWithEnv runs git in dir with extra environment, failing the test on error.
func gitWithEnv(t *testing.T, dir string, env []string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "git %v: %s", args, out)
}
