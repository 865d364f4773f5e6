package dockerops

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"syscall"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/failure"
)

type fakeCopier struct {
	calls    int
	errs     []error
	received []byte
	dst      string
	out      io.ReadCloser
	outErr   error
}

func (f *fakeCopier) CopyToContainer(_ context.Context, _ string, dst string, content io.Reader, o container.CopyToContainerOptions) error {
	f.calls++
	f.dst = dst
	if o.CopyUIDGID || o.AllowOverwriteDirWithFile {
		panic("owners come from the archive; directories are never replaced")
	}
	if f.calls <= len(f.errs) && f.errs[f.calls-1] != nil {
		_, _ = io.CopyN(io.Discard, content, 100) // fail mid-stream
		return f.errs[f.calls-1]
	}
	var err error
	f.received, err = io.ReadAll(content)
	return err
}

func (f *fakeCopier) CopyFromContainer(context.Context, string, string) (io.ReadCloser, container.PathStat, error) {
	return f.out, container.PathStat{}, f.outErr
}

func TestCopyFileIntoBuildsOneEntryArchive(t *testing.T) {
	f := &fakeCopier{errs: []error{cerrdefs.ErrUnavailable}}
	body := strings.Repeat("bundle", 100)
	err := newClient(fastOptions(), f).CopyFileInto(context.Background(), "ctr", "/control/input", "repo.bundle",
		strings.NewReader(body), int64(len(body)), 10001, 10002, 0o640)
	require.NoError(t, err)
	assert.Equal(t, 2, f.calls, "a seekable source is re-sent after a transient failure")
	assert.Equal(t, "/control/input", f.dst)
	headers, bodies := readTar(t, bytes.NewReader(f.received))
	require.Len(t, headers, 1)
	h := headers["repo.bundle"]
	assert.Equal(t, byte(tar.TypeReg), h.Typeflag)
	assert.Equal(t, 10001, h.Uid)
	assert.Equal(t, 10002, h.Gid)
	assert.Equal(t, int64(0o640), h.Mode)
	assert.Equal(t, body, bodies["repo.bundle"])
}

func TestCopyFileIntoFailures(t *testing.T) {
	c := newClient(fastOptions(), &fakeCopier{})
	for _, name := range []string{"", ".", "..", "a/b", "nul\x00"} {
		err := c.CopyFileInto(context.Background(), "ctr", "/control/input", name, strings.NewReader("x"), 1, 0, 0, 0o600)
		assert.Equal(t, failure.SandboxInputFailed, failure.CodeOf(err), "%q", name)
	}
	err := c.CopyFileInto(context.Background(), "ctr", "relative", "f", strings.NewReader("x"), 1, 0, 0, 0o600)
	assert.Equal(t, failure.SandboxInputFailed, failure.CodeOf(err))

	// A short source is an error, not a truncated file.
	f := &fakeCopier{}
	err = newClient(fastOptions(), f).CopyFileInto(context.Background(), "ctr", "/d", "f", strings.NewReader("abc"), 10, 0, 0, 0o600)
	assert.Equal(t, failure.SandboxInputFailed, failure.CodeOf(err), err)

	// A plain reader cannot be replayed: no retry.
	f = &fakeCopier{errs: []error{dialRefused}}
	err = newClient(fastOptions(), f).CopyFileInto(context.Background(), "ctr", "/d", "f", io.MultiReader(strings.NewReader("abc")), 3, 0, 0, 0o600)
	assert.ErrorIs(t, err, syscall.ECONNREFUSED)
	assert.Equal(t, 1, f.calls)
}

func TestCopyDirOutWithFake(t *testing.T) {
	f := &fakeCopier{outErr: cerrdefs.ErrNotFound}
	err := newClient(fastOptions(), f).CopyDirOut(context.Background(), "ctr", "/control/output", t.TempDir(), 10, 10)
	assert.Equal(t, failure.SandboxOutputMissing, failure.CodeOf(err))

	f = &fakeCopier{out: io.NopCloser(archive(t, entry{name: "x", typ: tar.TypeSymlink, linkname: "/"}))}
	err = newClient(fastOptions(), f).CopyDirOut(context.Background(), "ctr", "/control/output", t.TempDir(), 10, 10)
	assert.Equal(t, failure.SandboxOutputInvalid, failure.CodeOf(err))

	f = &fakeCopier{out: io.NopCloser(io.MultiReader(strings.NewReader(strings.Repeat("\x01", 512)), errReader{}))}
	err = newClient(fastOptions(), f).CopyDirOut(context.Background(), "ctr", "/control/output", t.TempDir(), 10, 10)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "copy from container ctr:/control/output")
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("stream broke") }
