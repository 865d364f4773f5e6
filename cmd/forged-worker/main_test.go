package main_test

import (
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/internal/testkit/workerbin"
)

// The worker build is reproducible: built at two commits of a throwaway
// repository that differ only in the daemon (cmd/forged), the binary is
// the same byte for byte, and equal to the one built in place (the tree's
// location does not matter); a commit that changes internal/worker
// changes it. The revision is never stamped (-buildvcs=false), so the
// commits themselves leave no trace.
func TestWorkerBuildIsReproducible(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	root := moduleRoot(t)
	repo := filepath.Join(t.TempDir(), "forged")
	copyModule(t, root, repo)
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=forged-test", "-c", "user.email=test@forged.invalid", "-c", "commit.gpgsign=false"}, args...)...)
		cmd.Dir = repo
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "git %v: %s", args, out)
	}
	build := func() string {
		t.Helper()
		out := filepath.Join(t.TempDir(), workerbin.Name)
		require.NoError(t, workerbin.Build(repo, out))
		return digest(t, out)
	}
	git("init", "-q")
	git("add", "-A")
	git("commit", "-qm", "first")
	first := build()
	assert.Equal(t, digest(t, workerbin.Path(t)), first, "the worker built in place and in a copy differ")

	edit(t, filepath.Join(repo, "cmd", "forged", "main.go"), "// Command forged ", "// Command forged (a daemon-only change) ")
	git("commit", "-qam", "a daemon-only change")
	assert.Equal(t, first, build(), "a commit that does not touch the worker changed its digest")

	edit(t, filepath.Join(repo, "internal", "worker", "cli.go"), "forged-worker: usage:", "forged-worker: Usage:")
	git("commit", "-qam", "a worker change")
	assert.NotEqual(t, first, build(), "a commit that changes the worker left its digest")
}

// moduleRoot is the directory of the module under test.
func moduleRoot(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}").Output()
	require.NoError(t, err)
	return strings.TrimSpace(string(out))
}

// copyModule copies the module's regular files, without its git directory
// and build outputs, from src to dst.
func copyModule(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		if d.IsDir() {
			if rel == ".git" || rel == "bin" {
				return filepath.SkipDir
			}
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		if !d.Type().IsRegular() || rel == ".git" {
			return nil
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), raw, 0o644)
	})
	require.NoError(t, err)
}

// edit replaces old by new in the file at path, once, and fails when old
// is not there.
func edit(t *testing.T, path, old, new string) {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Contains(t, string(raw), old, path)
	require.NoError(t, os.WriteFile(path, []byte(strings.Replace(string(raw), old, new, 1)), 0o644))
}

// digest is the hex sha256 of the file at path: the image key's worker
// digest when path is the worker.
func digest(t *testing.T, path string) string {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:])
}
