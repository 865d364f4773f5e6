package gitops

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/messages"
)

// prepareRequest is an adoption-policy request on repo with a fresh WorkDir.
func prepareRequest(t *testing.T, repo string) PrepareRequest {
	t.Helper()
	work := filepath.Join(t.TempDir(), "attempt")
	require.NoError(t, os.Mkdir(work, 0o700))
	return PrepareRequest{
		RepoPath:        repo,
		AttemptID:       testAttemptID,
		WorktreeKey:     "forge/task",
		DefaultBranch:   "main",
		ExecutionPolicy: messages.PolicyAdoption,
		WorkDir:         work,
	}
}

func tarNames(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var names []string
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return names
		}
		require.NoError(t, err)
		names = append(names, h.Name)
	}
}

func TestPrepareHappyPath(t *testing.T) {
	t.Parallel()
	repo := newRepo(t)
	config := gitT(t, repo, "rev-parse", "HEAD")
	gitT(t, repo, "checkout", "--quiet", "-b", "forge/task")
	input := commitFile(t, repo, "work.txt", "agent work\n", "task work")
	gitT(t, repo, "checkout", "--quiet", "main")

	req := prepareRequest(t, repo)
	p, err := Prepare(testCtx(t), NewRunner(), req)
	require.NoError(t, err)

	assert.Equal(t, input, p.InputCommitSHA)
	assert.Equal(t, config, p.ConfigCommitSHA)
	assert.Equal(t, []byte(testContract), p.ContractSource)
	assert.Equal(t, []byte(testDockerfile), p.Dockerfile)
	assert.Equal(t, filepath.Join(req.WorkDir, "input", "repo.bundle"), p.BundlePath)
	assert.NoFileExists(t, filepath.Join(req.WorkDir, "input", "context.tar"), "the build context is written by the build that needs it")

	info, err := os.Stat(filepath.Join(req.WorkDir, "input"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), info.Mode().Perm())

	// The bundle is self-contained: it verifies in an empty repository and
	// carries the input commit under the temporary ref.
	empty := filepath.Join(t.TempDir(), "empty")
	gitT(t, "", "init", "--quiet", empty)
	gitT(t, empty, "bundle", "verify", "--quiet", p.BundlePath)
	assert.Equal(t, input+" refs/forge/inputs/"+testAttemptHex, gitT(t, empty, "bundle", "list-heads", p.BundlePath))
	assert.Empty(t, gitT(t, repo, "for-each-ref", "refs/forge/"), "temporary input ref must be deleted")

	tarPath := contextTar(t, p)
	raw, err := os.ReadFile(tarPath)
	require.NoError(t, err)
	sum := sha256.Sum256(raw)
	assert.Equal(t, hex.EncodeToString(sum[:]), p.ContextDigest)
	names := tarNames(t, tarPath)
	assert.Contains(t, names, ".forge/forge.sandbox.yml")
	assert.Contains(t, names, "README.md")
	assert.NotContains(t, names, "work.txt", "the context comes from the config commit")
}

func TestPrepareFetchesOrigin(t *testing.T) {
	t.Parallel()
	upstream := newRepo(t)
	clone := cloneRepo(t, upstream)
	gitT(t, upstream, "checkout", "--quiet", "-b", "dev")
	dev := commitFile(t, upstream, "dev.txt", "dev\n", "dev work")

	req := prepareRequest(t, clone)
	req.BaseBranch = "dev"
	p, err := Prepare(testCtx(t), NewRunner(), req)
	require.NoError(t, err)
	assert.Equal(t, dev, p.InputCommitSHA, "input comes from origin/dev, fetched by Prepare")
}

func TestPrepareIgnoresUnreachableOrigin(t *testing.T) {
	t.Parallel()
	repo := newRepo(t)
	gitT(t, repo, "remote", "add", "origin", filepath.Join(t.TempDir(), "gone"))
	p, err := Prepare(testCtx(t), NewRunner(), prepareRequest(t, repo))
	require.NoError(t, err)
	assert.Equal(t, gitT(t, repo, "rev-parse", "main"), p.InputCommitSHA)
}

func TestPrepareInputRefPrecedence(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name           string
		managed, local bool
		base           string
		want           string // "managed", "local", "origin" or "" for failure
	}{
		{"managed branch first", true, true, "base", "managed"},
		{"then local base", false, true, "base", "local"},
		{"then origin base", false, false, "base", "origin"},
		{"nothing resolves", false, false, "missing", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			upstream := newRepo(t)
			gitT(t, upstream, "checkout", "--quiet", "-b", "base")
			shas := map[string]string{"origin": commitFile(t, upstream, "o.txt", "o\n", "origin base")}
			gitT(t, upstream, "checkout", "--quiet", "main")
			clone := cloneRepo(t, upstream)
			require.Empty(t, refOf(t, clone, "refs/heads/base"))
			if tc.local {
				gitT(t, clone, "checkout", "--quiet", "-b", "base", "origin/main")
				shas["local"] = commitFile(t, clone, "l.txt", "l\n", "local base")
			}
			if tc.managed {
				gitT(t, clone, "checkout", "--quiet", "-b", "forge/task", "origin/main")
				shas["managed"] = commitFile(t, clone, "m.txt", "m\n", "managed")
			}
			req := prepareRequest(t, clone)
			req.BaseBranch = tc.base
			p, err := Prepare(testCtx(t), NewRunner(), req)
			if tc.want == "" {
				require.Error(t, err)
				assert.True(t, failure.Is(err, failure.SandboxInputFailed), "%v", err)
				assert.Contains(t, err.Error(), "refs/remotes/origin/missing")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, shas[tc.want], p.InputCommitSHA)
		})
	}
}

func TestPrepareBaseDefaultsToDefaultBranch(t *testing.T) {
	t.Parallel()
	repo := newRepo(t)
	req := prepareRequest(t, repo)
	req.WorktreeKey = "forge/absent"
	p, err := Prepare(testCtx(t), NewRunner(), req)
	require.NoError(t, err)
	assert.Equal(t, gitT(t, repo, "rev-parse", "main"), p.InputCommitSHA)
}

func TestPrepareConfigSelection(t *testing.T) {
	t.Parallel()
	repo := newRepo(t)
	mainSHA := gitT(t, repo, "rev-parse", "HEAD")
	gitT(t, repo, "checkout", "--quiet", "-b", "cfg")
	approved := commitFile(t, repo, ContractPath, "version: 2\n", "new contract")
	gitT(t, repo, "tag", "-a", "-m", "approved", "v1", approved)
	tagObject := gitT(t, repo, "rev-parse", "v1")
	tree := gitT(t, repo, "rev-parse", "HEAD^{tree}")
	gitT(t, repo, "checkout", "--quiet", "main")

	tests := []struct {
		name         string
		policy       string
		approved     string
		wantSHA      string
		wantContract string
		wantCode     failure.Code
	}{
		{"adoption uses default branch", messages.PolicyAdoption, "", mainSHA, testContract, ""},
		{"approved commit", messages.PolicySandboxRequired, approved, approved, "version: 2\n", ""},
		{"approved commit normalised", messages.PolicySandboxRequired, " " + strings.ToUpper(approved) + " ", approved, "version: 2\n", ""},
		{"approved under adoption", messages.PolicyAdoption, approved, approved, "version: 2\n", ""},
		{"unapproved", messages.PolicySandboxRequired, "", "", "", failure.SandboxConfigUnapproved},
		{"abbreviated", messages.PolicySandboxRequired, approved[:12], "", "", failure.SandboxConfigInvalid},
		{"not hex", messages.PolicySandboxRequired, strings.Repeat("z", 40), "", "", failure.SandboxConfigInvalid},
		{"tag object peels elsewhere", messages.PolicySandboxRequired, tagObject, "", "", failure.SandboxConfigMismatch},
		{"unknown commit", messages.PolicySandboxRequired, strings.Repeat("1", 40), "", "", failure.SandboxInputFailed},
		{"tree is no commit", messages.PolicySandboxRequired, tree, "", "", failure.SandboxInputFailed},
	}
	for _, tc := range tests {
		// Sequential: the cases share one repository and attempt id.
		t.Run(tc.name, func(t *testing.T) {
			req := prepareRequest(t, repo)
			req.ExecutionPolicy = tc.policy
			req.ApprovedConfigSHA = tc.approved
			before := allRefs(t, repo)
			p, err := Prepare(testCtx(t), NewRunner(), req)
			assert.Equal(t, before, allRefs(t, repo), "the host's refs are unchanged")
			if tc.wantCode != "" {
				require.Error(t, err)
				assert.Equal(t, tc.wantCode, failure.CodeOf(err), "%v", err)
				assert.NoFileExists(t, filepath.Join(req.WorkDir, "input", "repo.bundle"))
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.wantSHA, p.ConfigCommitSHA)
			assert.Equal(t, tc.wantContract, string(p.ContractSource))
		})
	}
}

func TestPrepareMissingForgeFiles(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		mutate  func(t *testing.T, repo string)
		wantMsg string
	}{
		{"no contract", func(t *testing.T, repo string) { gitT(t, repo, "rm", "--quiet", ContractPath) }, "has no .forge/forge.sandbox.yml"},
		{"no Dockerfile", func(t *testing.T, repo string) { gitT(t, repo, "rm", "--quiet", DockerfilePath) }, "has no .forge/Dockerfile"},
		{"no .forge", func(t *testing.T, repo string) { gitT(t, repo, "rm", "-r", "--quiet", ".forge") }, "has no .forge/forge.sandbox.yml"},
		{"Dockerfile is a symlink", func(t *testing.T, repo string) {
			gitT(t, repo, "rm", "--quiet", DockerfilePath)
			require.NoError(t, os.Symlink("/etc/passwd", filepath.Join(repo, DockerfilePath)))
			gitT(t, repo, "add", DockerfilePath)
		}, ".forge/Dockerfile at config commit"},
		{"contract is a directory", func(t *testing.T, repo string) {
			gitT(t, repo, "rm", "--quiet", ContractPath)
			writeFile(t, filepath.Join(repo, ContractPath, "x"), "x")
			gitT(t, repo, "add", ContractPath)
		}, "is not a regular file"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			repo := newRepo(t)
			tc.mutate(t, repo)
			gitT(t, repo, "commit", "--quiet", "-m", "break config")
			_, err := Prepare(testCtx(t), NewRunner(), prepareRequest(t, repo))
			require.Error(t, err)
			assert.True(t, failure.Is(err, failure.SandboxInputFailed), "%v", err)
			assert.Contains(t, err.Error(), tc.wantMsg)
			assert.Empty(t, gitT(t, repo, "for-each-ref", "refs/forge/"))
		})
	}
}

func TestPrepareRejectsBadRequests(t *testing.T) {
	t.Parallel()
	repo := newRepo(t)
	tests := map[string]func(*PrepareRequest){
		"attempt id":     func(r *PrepareRequest) { r.AttemptID = "../x" },
		"relative repo":  func(r *PrepareRequest) { r.RepoPath = "repo" },
		"unclean work":   func(r *PrepareRequest) { r.WorkDir += "/../x" },
		"worktree key":   func(r *PrepareRequest) { r.WorktreeKey = "-x" },
		"base branch":    func(r *PrepareRequest) { r.BaseBranch = "a..b" },
		"default branch": func(r *PrepareRequest) { r.DefaultBranch = "" },
	}
	for name, mutate := range tests {
		t.Run(name, func(t *testing.T) {
			req := prepareRequest(t, repo)
			mutate(&req)
			_, err := Prepare(testCtx(t), NewRunner(), req)
			assert.True(t, failure.Is(err, failure.SandboxInputFailed), "%v", err)
		})
	}
}

func TestPrepareHonoursCancellation(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(testCtx(t))
	cancel()
	_, err := Prepare(ctx, NewRunner(), prepareRequest(t, newRepo(t)))
	require.Error(t, err)
	assert.ErrorIs(t, err, context.Canceled)
}

// A SHA-256 repository is refused with its own code before anything is
// prepared: the worker's git reads SHA-1 objects only.
func TestPrepareRefusesASHA256Repository(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "repo")
	gitT(t, "", "init", "--quiet", "--object-format=sha256", "-b", "main", dir)
	writeFile(t, filepath.Join(dir, ContractPath), testContract)
	writeFile(t, filepath.Join(dir, DockerfilePath), testDockerfile)
	gitT(t, dir, "add", "-A")
	gitT(t, dir, "commit", "--quiet", "-m", "init")
	req := prepareRequest(t, dir)
	_, err := Prepare(context.Background(), NewRunner(), req)
	require.Error(t, err)
	assert.Equal(t, failure.SandboxRepositoryUnsupported, failure.CodeOf(err), "%v", err)
	assert.Contains(t, err.Error(), "SHA-256")
	entries, err := os.ReadDir(req.WorkDir)
	require.NoError(t, err)
	assert.Empty(t, entries, "nothing was prepared")

	// A SHA-1 repository passes the check.
	require.NoError(t, checkObjectFormat(context.Background(), NewRunner(), newRepo(t)))
}
