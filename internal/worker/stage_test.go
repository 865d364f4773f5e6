package worker

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing/format/gitignore"
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

// What a task took its own permissions from is still staged, and the
// patterns of an unreadable .gitignore still apply: a directory the worker
// cannot read or search, a file it cannot read, a .gitignore without read
// permission, each at any depth. Root reads them anyway: the test shows
// something only as another user, as the worker runs (10001); for example
// setpriv --reuid=65534 --regid=65534 --clear-groups on the test binary,
// with TMPDIR writable by that user.
func TestStageFixesPermissionsBeforeReading(t *testing.T) {
	f := newFixture(t)
	ws, err := materialize(f.cfg, f.pkt.Identity)
	require.NoError(t, err)
	write := func(name, content string, perm os.FileMode) {
		p := filepath.Join(ws.dir, filepath.FromSlash(name))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
		require.NoError(t, os.Chmod(p, perm))
	}
	write("deep/er/.gitignore", "*.log\n", 0)
	write("deep/er/noise.log", "noise\n", 0o644)
	write("deep/er/kept.txt", "kept\n", 0)
	write("closed/inside.txt", "inside\n", 0o644)
	require.NoError(t, os.Chmod(filepath.Join(ws.dir, "closed"), 0))
	require.NoError(t, os.Chmod(filepath.Join(ws.dir, "sub", "keep.txt"), 0o200))
	t.Cleanup(func() { _ = os.Chmod(filepath.Join(ws.dir, "closed"), 0o755) })

	res, err := ws.commitResult(testAttemptID, f.pkt.Task, func(string, ...any) {})
	require.NoError(t, err)
	git := &hostRepo{t: t, dir: ws.dir, env: f.host.env}
	commit := res.commit.String()
	assert.Equal(t, "kept", git.git("show", commit+":deep/er/kept.txt"))
	assert.Equal(t, "inside", git.git("show", commit+":closed/inside.txt"))
	assert.Equal(t, "*.log", git.git("show", commit+":deep/er/.gitignore"))
	assert.Equal(t, "keep", git.git("show", commit+":sub/keep.txt"))
	assert.NotContains(t, git.git("ls-tree", "-r", "--name-only", commit), "noise.log")
}

// readIgnorePatterns reads what go-git's gitignore.ReadPatterns reads: the
// same patterns in the same order, including those of nested directories
// and not those of ignored ones.
func TestReadIgnorePatternsIsGoGits(t *testing.T) {
	f := newFixture(t)
	ws, err := materialize(f.cfg, f.pkt.Identity)
	require.NoError(t, err)
	for name, content := range map[string]string{
		".gitignore":           "*.tmp\n# comment\n\nbuild/\n!keep.tmp\n",
		"a/.gitignore":         "*.o\n/only-here\n",
		"a/b/.gitignore":       "!x.o\n",
		"build/.gitignore":     "never-read\n",
		"z/y/.gitignore":       "deep\n",
		".git/info/exclude":    "excluded\n",
		"a/.git/info/exclude":  "nested-exclude\n",
		"a/b/c/d/e/.gitignore": "e-only\n",
		"a/b/c/d/e/f/g.txt":    "g\n",
		"plain/file.txt":       "file\n",
		"plain/sub/.gitignore": "#only a comment\n",
	} {
		p := filepath.Join(ws.dir, filepath.FromSlash(name))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	}
	want, err := gitignore.ReadPatterns(ws.fs, nil)
	require.NoError(t, err)
	got := readIgnorePatterns(ws, nil)
	require.Len(t, got, len(want))
	for _, p := range [][]string{{"x.tmp"}, {"keep.tmp"}, {"build"}, {"a", "x.o"}, {"a", "b", "x.o"}, {"a", "only-here"},
		{"only-here"}, {"z", "y", "deep"}, {"excluded"}, {"a", "nested-exclude"}, {"a", "b", "c", "d", "e", "e-only"}, {"never-read"}} {
		for _, dir := range []bool{false, true} {
			assert.Equal(t, gitignore.NewMatcher(want).Match(p, dir), gitignore.NewMatcher(got).Match(p, dir), "%v (dir %v)", p, dir)
		}
	}
}
