package worker

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestReadLines(t *testing.T) {
	collect := func(in string, max int) []string {
		var lines []string
		readLines(strings.NewReader(in), max, func(s string) { lines = append(lines, s) })
		return lines
	}
	assert.Nil(t, collect("", 10))
	assert.Equal(t, []string{"a", "", "b"}, collect("a\n\nb\n", 10))
	assert.Equal(t, []string{"a", "tail"}, collect("a\r\ntail", 10))
	assert.Equal(t, []string{"abc", "d"}, collect("abcdefgh\nd\n", 3))
	long := strings.Repeat("x", 200<<10)
	assert.Equal(t, []string{long[:1000], "y"}, collect(long+"\ny\n", 1000), "lines longer than the reader's buffer")
	assert.Equal(t, []string{"a", "b"}, collect("aé\nb\n", 2), "a cut never splits a rune")
}

func TestBoundLine(t *testing.T) {
	assert.Equal(t, "abc", boundLine("abc", 10))
	assert.Equal(t, "ab", boundLine("abc", 2))
	s := boundLine(strings.Repeat("é", 10), 5) // 2 bytes each
	assert.Equal(t, "éé", s)
	invalid := boundLine(string([]byte{0xff, 0xfe, 'a'}), 100)
	assert.True(t, utf8.ValidString(invalid))
	cut := boundLine(strings.Repeat("\xff", 100), 16)
	assert.True(t, utf8.ValidString(cut))
	assert.LessOrEqual(t, len(cut), 16)
}

func TestLookPath(t *testing.T) {
	p, err := lookPath("sh", TaskPath)
	require.NoError(t, err)
	assert.True(t, strings.HasSuffix(p, "/sh"))
	p, err = lookPath("./local/tool", TaskPath)
	require.NoError(t, err)
	assert.Equal(t, "./local/tool", p)
	_, err = lookPath("definitely-not-a-command-forge", TaskPath)
	assert.Error(t, err)

	// The task's PATH decides; relative and empty entries never resolve
	// to the working directory.
	dir := t.TempDir()
	tool := filepath.Join(dir, "forge-tool")
	require.NoError(t, os.WriteFile(tool, []byte("#!/bin/sh\n"), 0o755))
	p, err = lookPath("forge-tool", "/nonexistent:"+dir)
	require.NoError(t, err)
	assert.Equal(t, tool, p)
	t.Chdir(dir)
	_, err = lookPath("forge-tool", ":.:relative")
	assert.Error(t, err)
}

func TestTaskEnv(t *testing.T) {
	forged := []string{"HOME=/h", "TMPDIR=/t",
		"XDG_CACHE_HOME=/h/.cache", "XDG_CONFIG_HOME=/h/.config", "XDG_DATA_HOME=/h/.local/share", "XDG_STATE_HOME=/h/.local/state"}
	env := taskEnv(Config{HomeDir: "/h", TempDir: "/t", Environ: []string{
		"FORGE_A=1", "FORGE_A=2", "FORGE_lower=x", "FORGE_B=has=equals", "PATH=/opt/go/bin:/usr/bin", "PATH=/second",
		"HOME=/image-home", "TMPDIR=/image-tmp", "XDG_CACHE_HOME=/image-cache", "CARGO_HOME=/usr/local/cargo", "FORGE_NOVALUE",
		"1BAD=x", "BAD-NAME=x", "=x", "_ok=y",
	}})
	assert.Equal(t, append(append([]string{"PATH=/opt/go/bin:/usr/bin"}, forged...),
		"FORGE_A=1", "FORGE_lower=x", "FORGE_B=has=equals", "CARGO_HOME=/usr/local/cargo", "_ok=y"), env,
		"the image's environment passes, forged's own directories win")

	env = taskEnv(Config{HomeDir: "/h", TempDir: "/t", Environ: []string{"PATH=", "A=1"}})
	assert.Equal(t, append(append([]string{"PATH=" + TaskPath}, forged...), "A=1"), env, "no PATH: the default")
}

func TestPrepareTaskDirs(t *testing.T) {
	root := t.TempDir()
	cfg := Config{HomeDir: filepath.Join(root, "home"), TempDir: filepath.Join(root, "tmp")}
	require.NoError(t, prepareTaskDirs(cfg))
	for _, d := range []string{"home", "tmp", "home/.cache", "home/.config", "home/.local/share", "home/.local/state"} {
		fi, err := os.Lstat(filepath.Join(root, d))
		require.NoError(t, err, d)
		assert.True(t, fi.IsDir(), d)
	}
	require.NoError(t, prepareTaskDirs(cfg), "idempotent")

	// A link to a directory (as an image may ship ~/.cache) is kept; a
	// file where a directory belongs is refused.
	require.NoError(t, os.RemoveAll(filepath.Join(root, "home/.cache")))
	require.NoError(t, os.Symlink(filepath.Join(root, "tmp"), filepath.Join(root, "home/.cache")))
	require.NoError(t, prepareTaskDirs(cfg))
	require.NoError(t, os.Remove(filepath.Join(root, "home/.cache")))
	require.NoError(t, os.WriteFile(filepath.Join(root, "home/.cache"), nil, 0o600))
	assert.ErrorContains(t, prepareTaskDirs(cfg), "not a directory")
}

func TestTaskTimeoutSeconds(t *testing.T) {
	f := newFixture(t, "true")
	f.pkt.TaskTimeoutSeconds = 5
	f.pkt.Task.TimeoutSeconds = 7
	assert.Equal(t, 5, taskTimeoutSeconds(&f.pkt))
	f.pkt.TaskTimeoutSeconds = 0
	assert.Equal(t, 7, taskTimeoutSeconds(&f.pkt))
	f.pkt.Task.TimeoutSeconds = 0
	assert.Equal(t, 3600, taskTimeoutSeconds(&f.pkt))
}
