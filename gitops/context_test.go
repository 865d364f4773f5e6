package gitops

import (
	"archive/tar"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// tarEntries reads a tar into its headers and regular files' contents.
func tarEntries(t *testing.T, path string) (map[string]*tar.Header, map[string]string) {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	headers, files := map[string]*tar.Header{}, map[string]string{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return headers, files
		}
		require.NoError(t, err)
		headers[h.Name] = h
		if h.Typeflag == tar.TypeReg {
			data, err := io.ReadAll(tr)
			require.NoError(t, err)
			files[h.Name] = string(data)
		}
	}
}

// A config commit whose .gitattributes asks for export-subst on the
// Dockerfile and a filter driver on every file: the context carries the
// blobs as committed (the Dockerfile the policy checked, byte for byte),
// no commit message is spliced in, and the repository's filter program
// never runs. Modes, symlinks and directories are kept.
func TestPrepareContextIsTheTreeAsCommitted(t *testing.T) {
	t.Parallel()
	repo := newRepo(t)
	marker := filepath.Join(t.TempDir(), "filter-ran")
	gitT(t, repo, "config", "filter.evil.smudge", "touch "+marker+"; cat")
	gitT(t, repo, "config", "filter.evil.clean", "cat")
	dockerfile := "FROM scratch\nRUN true $Format:%B$\n"
	writeFile(t, filepath.Join(repo, DockerfilePath), dockerfile)
	writeFile(t, filepath.Join(repo, ".gitattributes"), DockerfilePath+" export-subst\nREADME.md export-subst filter=evil\n")
	writeFile(t, filepath.Join(repo, "README.md"), "version $Format:%H$\n")
	writeFile(t, filepath.Join(repo, "bin", "tool.sh"), "#!/bin/sh\n")
	require.NoError(t, os.Chmod(filepath.Join(repo, "bin", "tool.sh"), 0o755))
	require.NoError(t, os.Symlink("../README.md", filepath.Join(repo, "bin", "readme")))
	gitT(t, repo, "add", "-A")
	gitT(t, repo, "commit", "--quiet", "-m", "config\n\nADD http://127.0.0.1:9/x /x\nFROM evil:latest")
	require.NoFileExists(t, marker, "setting up must not run the filter")

	p, err := Prepare(testCtx(t), NewRunner(), prepareRequest(t, repo))
	require.NoError(t, err)
	headers, files := tarEntries(t, contextTar(t, p))

	assert.Equal(t, dockerfile, files[DockerfilePath], "the Dockerfile built is the one checked")
	assert.Equal(t, string(p.Dockerfile), files[DockerfilePath])
	assert.Equal(t, "version $Format:%H$\n", files["README.md"])
	assert.NoFileExists(t, marker, "no filter driver runs")
	assert.Equal(t, int64(0o775), headers["bin/tool.sh"].Mode)
	assert.Equal(t, int64(0o664), headers["README.md"].Mode)
	require.Contains(t, headers, "bin/readme")
	assert.Equal(t, byte(tar.TypeSymlink), headers["bin/readme"].Typeflag)
	assert.Equal(t, "../README.md", headers["bin/readme"].Linkname)
	require.Contains(t, headers, "bin/")
	assert.Equal(t, byte(tar.TypeDir), headers["bin/"].Typeflag)
	assert.Equal(t, int64(0), int64(headers["README.md"].Uid))

	// The same tree gives the same context.
	again, err := Prepare(testCtx(t), NewRunner(), prepareRequest(t, repo))
	require.NoError(t, err)
	assert.Equal(t, p.ContextDigest, again.ContextDigest)
}
