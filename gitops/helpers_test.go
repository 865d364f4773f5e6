package gitops

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const (
	testAttemptID  = "0b6f3c8e-9d1a-4e2b-8c3d-5f6a7b8c9d0e"
	testAttemptHex = "0b6f3c8e9d1a4e2b8c3d5f6a7b8c9d0e"
	testContract   = "version: 1\nimage: build\n"
	testDockerfile = "FROM scratch\n"
)

func TestMain(m *testing.M) {
	if os.Getenv(lockHelperEnv) != "" {
		os.Exit(lockHelperMain())
	}
	// Hermetic git: no user or system configuration, fixed identities.
	for k, v := range map[string]string{
		"GIT_CONFIG_GLOBAL":   os.DevNull,
		"GIT_CONFIG_NOSYSTEM": "1",
		"GIT_AUTHOR_NAME":     "Forge Test",
		"GIT_AUTHOR_EMAIL":    "test@forge.invalid",
		"GIT_COMMITTER_NAME":  "Forge Test",
		"GIT_COMMITTER_EMAIL": "test@forge.invalid",
	} {
		if err := os.Setenv(k, v); err != nil {
			panic(err)
		}
	}
	os.Exit(m.Run())
}

// testCtx is a context bounded well below the test binary's timeout.
func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// gitTry runs git in dir and returns trimmed stdout and an error carrying
// stderr.
func gitTry(t *testing.T, dir string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return strings.TrimSpace(string(out)), fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	return strings.TrimSpace(string(out)), nil
}

// gitT runs git in dir, failing the test on error.
func gitT(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := gitTry(t, dir, args...)
	require.NoError(t, err)
	return out
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
}

// newRepo creates a repository on branch main whose only commit holds the
// .forge files and a README.
func newRepo(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "repo")
	gitT(t, "", "init", "--quiet", "-b", "main", dir)
	writeFile(t, filepath.Join(dir, ContractPath), testContract)
	writeFile(t, filepath.Join(dir, DockerfilePath), testDockerfile)
	writeFile(t, filepath.Join(dir, "README.md"), "hello\n")
	gitT(t, dir, "add", "-A")
	gitT(t, dir, "commit", "--quiet", "-m", "init")
	return dir
}

// commitFile writes rel in the worktree dir, commits it and returns HEAD.
func commitFile(t *testing.T, dir, rel, content, msg string) string {
	t.Helper()
	writeFile(t, filepath.Join(dir, rel), content)
	gitT(t, dir, "add", "--", rel)
	gitT(t, dir, "commit", "--quiet", "-m", msg)
	return gitT(t, dir, "rev-parse", "HEAD")
}

// refOf returns the exact ref's value, "" when absent.
func refOf(t *testing.T, dir, ref string) string {
	t.Helper()
	for _, line := range strings.Split(gitT(t, dir, "for-each-ref", "--format=%(objectname) %(refname)", ref), "\n") {
		if sha, name, ok := strings.Cut(line, " "); ok && name == ref {
			return sha
		}
	}
	return ""
}

// cloneRepo clones src into a fresh directory.
func cloneRepo(t *testing.T, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "clone")
	gitT(t, "", "clone", "--quiet", src, dst)
	return dst
}

// allRefs lists every ref of the repository with its value, HEAD included,
// to compare before and after an operation that must not move anything.
func allRefs(t *testing.T, dir string) string {
	t.Helper()
	head, _ := gitTry(t, dir, "rev-parse", "--verify", "--quiet", "HEAD")
	return "HEAD " + head + "\n" + gitT(t, dir, "for-each-ref", "--format=%(refname) %(objectname)")
}
