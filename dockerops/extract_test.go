package dockerops

import (
	"archive/tar"
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/failure"
)

type entry struct {
	name     string
	typ      byte
	body     string
	linkname string
}

func archive(t *testing.T, entries ...entry) *bytes.Buffer {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		hdr := &tar.Header{Name: e.name, Typeflag: e.typ, Mode: 0o777, Linkname: e.linkname, Uid: 4242}
		if e.typ == tar.TypeReg {
			hdr.Size = int64(len(e.body))
		}
		require.NoError(t, tw.WriteHeader(hdr))
		if e.body != "" {
			_, err := tw.Write([]byte(e.body))
			require.NoError(t, err)
		}
	}
	require.NoError(t, tw.Close())
	return &buf
}

func TestExtractTarAcceptsFilesAndDirectories(t *testing.T) {
	dst := filepath.Join(t.TempDir(), "out")
	err := extractTar(archive(t,
		entry{name: "./", typ: tar.TypeDir},
		entry{name: "./manifest.json", typ: tar.TypeReg, body: "{}"},
		entry{name: "./logs/", typ: tar.TypeDir},
		entry{name: "./logs/a/b.log", typ: tar.TypeReg, body: "hello"},
		entry{name: "empty", typ: tar.TypeReg},
	), dst, 7, 10)
	require.NoError(t, err)
	for name, want := range map[string]os.FileMode{
		"": os.ModeDir | 0o700, "manifest.json": 0o600, "logs": os.ModeDir | 0o700,
		"logs/a": os.ModeDir | 0o700, "logs/a/b.log": 0o600, "empty": 0o600,
	} {
		fi, err := os.Lstat(filepath.Join(dst, name))
		require.NoError(t, err, name)
		assert.Equal(t, want, fi.Mode(), name)
	}
	data, err := os.ReadFile(filepath.Join(dst, "logs/a/b.log"))
	require.NoError(t, err)
	assert.Equal(t, "hello", string(data))
}

func TestExtractTarRejectsUnsafeEntries(t *testing.T) {
	cases := map[string][]entry{
		"symlink":          {{name: "link", typ: tar.TypeSymlink, linkname: "/etc/passwd"}},
		"relative symlink": {{name: "link", typ: tar.TypeSymlink, linkname: "file"}},
		"hard link":        {{name: "f", typ: tar.TypeReg, body: "x"}, {name: "link", typ: tar.TypeLink, linkname: "f"}},
		"char device":      {{name: "null", typ: tar.TypeChar}},
		"block device":     {{name: "sda", typ: tar.TypeBlock}},
		"fifo":             {{name: "pipe", typ: tar.TypeFifo}},
		"absolute":         {{name: "/etc/cron.d/x", typ: tar.TypeReg, body: "x"}},
		"dot-dot":          {{name: "../escape", typ: tar.TypeReg, body: "x"}},
		"inner dot-dot":    {{name: "a/../../escape", typ: tar.TypeReg, body: "x"}},
		"resolving dotdot": {{name: "a/../b", typ: tar.TypeReg, body: "x"}},
		"duplicate":        {{name: "f", typ: tar.TypeReg, body: "x"}, {name: "f", typ: tar.TypeReg, body: "y"}},
		"file then dir":    {{name: "f", typ: tar.TypeReg, body: "x"}, {name: "f/g", typ: tar.TypeReg, body: "y"}},
		"dir then file":    {{name: "d/", typ: tar.TypeDir}, {name: "d", typ: tar.TypeReg, body: "y"}},
		"root as file":     {{name: ".", typ: tar.TypeReg}},
		"too many bytes":   {{name: "a", typ: tar.TypeReg, body: "1234"}, {name: "b", typ: tar.TypeReg, body: "5678"}},
		"too many entries": {{name: "1/", typ: tar.TypeDir}, {name: "2/", typ: tar.TypeDir}, {name: "3/", typ: tar.TypeDir}, {name: "4/", typ: tar.TypeDir}},
	}
	for name, entries := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			err := extractTar(archive(t, entries...), filepath.Join(dir, "out"), 6, 3)
			require.Error(t, err)
			assert.Equal(t, failure.SandboxOutputInvalid, failure.CodeOf(err), err)
			_, statErr := os.Lstat(filepath.Join(dir, "escape"))
			assert.True(t, os.IsNotExist(statErr))
		})
	}
}

func TestExtractTarDoesNotFollowPlantedSymlinks(t *testing.T) {
	dir := t.TempDir()
	dst := filepath.Join(dir, "out")
	outside := filepath.Join(dir, "outside")
	require.NoError(t, os.MkdirAll(dst, 0o700))
	require.NoError(t, os.MkdirAll(outside, 0o700))
	require.NoError(t, os.Symlink(outside, filepath.Join(dst, "logs")))
	err := extractTar(archive(t, entry{name: "logs/x", typ: tar.TypeReg, body: "x"}), dst, 10, 10)
	require.Error(t, err)
	_, statErr := os.Lstat(filepath.Join(outside, "x"))
	assert.True(t, os.IsNotExist(statErr))
}

func TestExtractTarTruncatedArchive(t *testing.T) {
	buf := archive(t, entry{name: "f", typ: tar.TypeReg, body: "0123456789"})
	err := extractTar(bytes.NewReader(buf.Bytes()[:520]), t.TempDir(), 100, 10)
	require.Error(t, err)
	assert.Empty(t, failure.CodeOf(err), "a broken stream is not the worker's fault")
}

// The archive of a directory named by its own path (not "dir/."): its
// root must come first and be a directory, and every entry lies below it.
func TestExtractUnderRoot(t *testing.T) {
	dst := filepath.Join(t.TempDir(), "out")
	require.NoError(t, extractTarUnder(archive(t,
		entry{name: "output/", typ: tar.TypeDir},
		entry{name: "output/manifest.json", typ: tar.TypeReg, body: "m"},
		entry{name: "output/logs/", typ: tar.TypeDir},
		entry{name: "output/logs/x", typ: tar.TypeReg, body: "x"},
	), "output", dst, 10, 10))
	data, err := os.ReadFile(filepath.Join(dst, "logs", "x"))
	require.NoError(t, err)
	assert.Equal(t, "x", string(data))

	for name, entries := range map[string][]entry{
		"root is a link":        {{name: "output", typ: tar.TypeSymlink, linkname: "/run/forge-secrets"}},
		"root is a file":        {{name: "output", typ: tar.TypeReg, body: "x"}},
		"entry before root":     {{name: "output/x", typ: tar.TypeReg, body: "x"}, {name: "output/", typ: tar.TypeDir}},
		"entry outside root":    {{name: "output/", typ: tar.TypeDir}, {name: "secrets/x", typ: tar.TypeReg, body: "x"}},
		"sibling with prefix":   {{name: "output/", typ: tar.TypeDir}, {name: "output2/x", typ: tar.TypeReg, body: "x"}},
		"root twice":            {{name: "output/", typ: tar.TypeDir}, {name: "output/", typ: tar.TypeDir}},
		"escape below the root": {{name: "output/", typ: tar.TypeDir}, {name: "output/../x", typ: tar.TypeReg, body: "x"}},
	} {
		dst := filepath.Join(t.TempDir(), "out")
		err := extractTarUnder(archive(t, entries...), "output", dst, 10, 10)
		assert.Equal(t, failure.SandboxOutputInvalid, failure.CodeOf(err), "%s: %v", name, err)
		_, statErr := os.Stat(filepath.Join(dst, "x"))
		assert.True(t, os.IsNotExist(statErr), name)
	}
}
