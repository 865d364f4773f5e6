package worker

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/failure"
)

// The checkout is what git's own would be: the same files, modes and
// links, gitlinks as empty directories, and an index git takes as clean
// without hashing anything again (status and diff-files see nothing).
func TestCheckoutIsWhatGitChecksOut(t *testing.T) {
	requireGit(t)
	f := newFixture(t)
	f.host.write("bin/run.sh", "#!/bin/sh\necho run\n")
	require.NoError(t, os.Chmod(filepath.Join(f.host.dir, "bin/run.sh"), 0o755))
	f.host.write("deep/a/b/c/d.txt", "deep\n")
	// Blobs the walk writes itself (over maxQueuedBlobBytes) and one go-git
	// streams from the pack (over largeObjectThreshold).
	f.host.write("big/queued-limit.bin", strings.Repeat("0123456789abcdef", maxQueuedBlobBytes/16+1))
	f.host.write("big/large.bin", strings.Repeat("fedcba9876543210", largeObjectThreshold/16*2+3))
	f.host.write("empty", "")
	require.NoError(t, os.Symlink("../deep/a/b/c/d.txt", filepath.Join(f.host.dir, "bin", "link")))
	f.host.git("add", "-A")
	f.host.git("update-index", "--add", "--cacheinfo", "160000,0123456789abcdef0123456789abcdef01234567,vendor/lib")
	f.host.git("commit", "-q", "-m", "shapes")
	f.input = f.host.git("rev-parse", "HEAD")
	f.pkt.Identity.InputCommitSHA = f.input
	f.bundleInput(f.input)

	ws, err := materialize(f.cfg, f.pkt.Identity)
	require.NoError(t, err)
	git := &hostRepo{t: t, dir: ws.dir, env: f.host.env}
	assert.Equal(t, f.host.git("ls-tree", "-r", "--full-tree", f.input), lsFilesAsTree(git.git("ls-files", "-s")),
		"the index lists the input's tree")
	assert.Empty(t, git.git("status", "--porcelain", "--ignore-submodules=none"), "git sees a clean checkout")
	assert.Empty(t, git.git("diff-files", "--name-only"), "the stat data matches: nothing to hash again")
	for _, name := range []string{"big/queued-limit.bin", "big/large.bin", "empty"} {
		want, err := os.ReadFile(filepath.Join(f.host.dir, name))
		require.NoError(t, err)
		got, err := os.ReadFile(filepath.Join(ws.dir, name))
		require.NoError(t, err)
		assert.Equal(t, want, got, name)
	}
	target, err := os.Readlink(filepath.Join(ws.dir, "bin", "link"))
	require.NoError(t, err)
	assert.Equal(t, "../deep/a/b/c/d.txt", target)
	fi, err := os.Stat(filepath.Join(ws.dir, "bin", "run.sh"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o755), fi.Mode().Perm())
	entries, err := os.ReadDir(filepath.Join(ws.dir, "vendor", "lib"))
	require.NoError(t, err)
	assert.Empty(t, entries, "a gitlink is an empty directory")
}

// lsFilesAsTree renders `ls-files -s` lines ("mode hash stage\tpath") as
// `ls-tree -r` lines ("mode type hash\tpath").
func lsFilesAsTree(out string) string {
	var lines []string
	for _, line := range strings.Split(out, "\n") {
		meta, path, _ := strings.Cut(line, "\t")
		f := strings.Fields(meta)
		typ := "blob"
		if f[0] == "160000" {
			typ = "commit"
		}
		lines = append(lines, f[0]+" "+typ+" "+f[1]+"\t"+path)
	}
	return strings.Join(lines, "\n")
}

// An input tree holding a .git look-alike (made past git's own checks) is
// refused before anything is written under that name: the checkout cannot
// be made to write into the workspace's repository.
func TestCheckoutRefusesAGitDirectoryInTheTree(t *testing.T) {
	requireGit(t)
	for _, name := range []string{".git", ".GIT", ".git. "} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			blob, err := gitStdin(f.host, "#!/bin/sh\necho pwned\n", "hash-object", "-w", "--stdin")
			require.NoError(t, err, blob)
			hooks := mktreeLiteral(t, f.host, "100644 blob "+blob+"\tpre-commit")
			evil := mktreeLiteral(t, f.host, "040000 tree "+hooks+"\thooks")
			root := mktreeLiteral(t, f.host, "040000 tree "+evil+"\t"+name, "100644 blob "+blob+"\tREADME.md")
			commit := f.host.git("commit-tree", "-m", "evil", root)
			f.pkt.Identity.InputCommitSHA = commit
			f.bundleInput(commit)

			_, err = materialize(f.cfg, f.pkt.Identity)
			require.Error(t, err)
			assert.Equal(t, failure.SandboxInputFailed, failure.CodeOf(err), "%v", err)
			assert.NoFileExists(t, filepath.Join(f.cfg.WorkspaceDir, ".git", "hooks", "pre-commit"))
		})
	}
}

// mktreeLiteral writes a tree of the given ls-tree lines, past fsck.
func mktreeLiteral(t *testing.T, h *hostRepo, lines ...string) string {
	t.Helper()
	out, err := gitStdin(h, strings.Join(lines, "\n")+"\n", "mktree", "--missing")
	require.NoError(t, err, out)
	return out
}

// gitStdin runs git in h's repository with stdin.
func gitStdin(h *hostRepo, stdin string, args ...string) (string, error) {
	cmd := exec.Command("git", append([]string{"-C", h.dir}, args...)...)
	cmd.Env = h.env
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}
