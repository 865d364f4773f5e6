package worker

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestValidTreeName(t *testing.T) {
	for _, name := range []string{"README.md", ".gitignore", ".github", ".gitattributes", ".gitmodules", "git", "gitx", ".gitx", "git~2", "a.git", "gi7eba~1"} {
		assert.True(t, validTreeName(name, 0), name)
	}
	for _, name := range []string{"", ".", "..", ".git", ".GIT", ".Git", ".git.", ".git  .", ".git:stream", ".git\\x", "git~1", "GIT~1", "git~1 .",
		".g\u200cit", "\ufeff.git", ".gi\u200dt"} {
		assert.False(t, validTreeName(name, 0), "%q", name)
	}
	for _, name := range []string{".gitmodules", ".GITMODULES", ".gitmodules .", "gitmod~1", "GITMOD~4", "gi7eba~1", "gi7eb~12", ".g\u200citmodules"} {
		assert.True(t, validTreeName(name, 0), "regular %q", name)
		assert.False(t, validTreeName(name, fs.ModeSymlink), "symlink %q", name)
	}
	assert.True(t, validTreeName("gitmod~5", fs.ModeSymlink))
	assert.True(t, validTreeName(".gitmodulesx", fs.ModeSymlink))
}

func TestSortTreeEntriesLikeGit(t *testing.T) {
	// Covered end to end (git fsck --strict rejects unsorted trees) in
	// TestMainTreeChanges; here the tricky order itself.
	f := newFixture(t, sh("mkdir a; echo 1 > a/x; echo 2 > a.b; echo 3 > a-b; echo 4 > a0; mkdir a.c; echo 5 > a.c/y")...)
	res := f.run()
	require.Equal(t, ExitOK, res.code, "stderr: %s", res.stderr)
	sha := f.fetchResult()
	names := f.host.git("ls-tree", "--name-only", sha)
	assert.Equal(t, "README.md\na-b\na.b\na.c\na\na0\nold.txt\nrun.sh\nsub", names)
}

func TestMainRefusedNames(t *testing.T) {
	f := newFixture(t, sh(`mkdir .GIT; echo x > .GIT/config; echo y > git~1; echo z > '.git .'
mkdir nested; echo n > nested/.git; echo inner > nested/file
ln -s README.md .gitmodules; echo ok > fine.txt`)...)
	res := f.run()
	require.Equal(t, ExitOK, res.code, "stderr: %s", res.stderr)
	sha := f.fetchResult() // fsck --strict passes
	assert.Equal(t, "README.md\nfine.txt\nnested/file\nold.txt\nrun.sh\nsub/keep.txt",
		strings.ReplaceAll(f.host.git("ls-tree", "-r", "--name-only", sha), "\"", ""))
	assert.Contains(t, res.stderr, `not committed: git refuses the name ".GIT"`)
	assert.Contains(t, res.stderr, `"git~1"`)
	assert.Contains(t, res.stderr, `".git ."`)
	assert.Contains(t, res.stderr, `".gitmodules"`, "a symlinked .gitmodules is refused")
	_, r := f.outputs()
	assert.Contains(t, r.Summary, "4 path(s) not committed")
}

func TestMainGitignore(t *testing.T) {
	f := newFixture(t, sh(`echo changed > keep.log; echo new > new.log
mkdir -p build; echo out > build/out.bin; echo changed > build/tracked.txt
echo fresh > build/fresh.txt; mkdir -p deep/dir; echo x > deep/dir/ignored.tmp; echo y > deep/dir/kept.txt`)...)
	f.host.write(".gitignore", "*.log\nbuild/\n")
	f.host.write("deep/.gitignore", "*.tmp\n")
	f.host.write("keep.log", "tracked\n")
	f.host.write("build/tracked.txt", "tracked\n")
	f.host.git("add", "-f", ".gitignore", "deep/.gitignore", "keep.log", "build/tracked.txt")
	f.host.git("commit", "-q", "-m", "ignores")
	f.input = f.host.git("rev-parse", "HEAD")
	f.pkt.Identity.InputCommitSHA = f.input
	f.bundleInput(f.input)
	res := f.run()
	require.Equal(t, ExitOK, res.code, "stderr: %s", res.stderr)
	sha := f.fetchResult()
	assert.Equal(t, "M\tbuild/tracked.txt\nA\tdeep/dir/kept.txt\nM\tkeep.log",
		f.host.git("diff", "--name-status", f.input, sha))
}

func TestMainLargeFile(t *testing.T) {
	f := newFixture(t, sh("head -c 3000000 /dev/urandom > big.bin; cp big.bin copy.bin")...)
	res := f.run()
	require.Equal(t, ExitOK, res.code, "stderr: %s", res.stderr)
	sha := f.fetchResult()
	size := f.host.git("cat-file", "-s", sha+":big.bin")
	assert.Equal(t, "3000000", size)
	want, err := os.ReadFile(filepath.Join(f.cfg.WorkspaceDir, "big.bin"))
	require.NoError(t, err)
	got := f.host.git("rev-parse", sha+":copy.bin")
	assert.Equal(t, f.host.git("hash-object", filepath.Join(f.cfg.WorkspaceDir, "big.bin")), got)
	assert.Len(t, want, 3000000)
}

func TestMainDeletesEverything(t *testing.T) {
	f := newFixture(t, sh("rm -rf README.md old.txt run.sh sub")...)
	res := f.run()
	require.Equal(t, ExitOK, res.code, "stderr: %s", res.stderr)
	sha := f.fetchResult()
	assert.Equal(t, "4b825dc642cb6eb9a060e54bf8d69288fbee4904", f.host.git("rev-parse", sha+"^{tree}"))
}
