package dockerops

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v4"
	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/kit/text"
)

// copyAPI is the part of the engine API that copies files in and out.
type copyAPI interface {
	CopyToContainer(ctx context.Context, container, path string, content io.Reader, options container.CopyToContainerOptions) error
	CopyFromContainer(ctx context.Context, container, srcPath string) (io.ReadCloser, container.PathStat, error)
}

// CopyFileInto copies size bytes of src into the container as the regular
// file dstDir/name, owned by uid:gid with the given mode. The container
// need not be running; dstDir must exist (for a read-only root filesystem
// it must be on a volume). The copy is retried on transient failures only
// when src is an io.Seeker. Failures carry failure.SandboxInputFailed.
func (c *Client) CopyFileInto(ctx context.Context, containerID, dstDir, name string, src io.Reader, size int64, uid, gid int, mode int64) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") || !path.IsAbs(dstDir) || size < 0 {
		return failure.New(failure.SandboxInputFailed, "copy into container: invalid destination %q in %q or size %d", name, dstDir, size)
	}
	seeker, canRewind := src.(io.Seeker)
	var start int64
	if canRewind {
		var err error
		if start, err = seeker.Seek(0, io.SeekCurrent); err != nil {
			canRewind = false
		}
	}
	hdr := &tar.Header{
		Typeflag: tar.TypeReg,
		Name:     name,
		Size:     size,
		Mode:     mode & 0o7777,
		Uid:      uid,
		Gid:      gid,
		ModTime:  time.Now().UTC().Truncate(time.Second),
		Format:   tar.FormatPAX,
	}
	attempt := 0
	kind := onceCall
	if canRewind {
		kind = writeCall
	}
	err := callErr(ctx, c, c.opts.Timeouts.Copy, kind, func(ctx context.Context) error {
		attempt++
		if attempt > 1 {
			if _, err := seeker.Seek(start, io.SeekStart); err != nil {
				return backoff.Permanent(err)
			}
		}
		return c.copyTarInto(ctx, containerID, dstDir, hdr, src)
	})
	if err != nil {
		return opError(ctx, failure.SandboxInputFailed, err, "copy into container %s:%s", shortID(containerID), path.Join(dstDir, name))
	}
	return nil
}

// copyTarInto streams a one-entry tar archive into the container. The
// archive is produced by a goroutine that always ends before it returns.
func (c *Client) copyTarInto(ctx context.Context, containerID, dstDir string, hdr *tar.Header, src io.Reader) error {
	pr, pw := io.Pipe()
	produced := make(chan error, 1)
	go func() {
		tw := tar.NewWriter(pw)
		err := tw.WriteHeader(hdr)
		if err == nil {
			var n int64
			n, err = io.Copy(tw, io.LimitReader(src, hdr.Size))
			if err == nil && n != hdr.Size {
				err = fmt.Errorf("source ended after %d of %d bytes", n, hdr.Size)
			}
		}
		if err == nil {
			err = tw.Close()
		}
		_ = pw.CloseWithError(err)
		produced <- err
	}()
	err := c.copier.CopyToContainer(ctx, containerID, dstDir, pr, container.CopyToContainerOptions{})
	_ = pr.CloseWithError(errCopyFinished)
	if perr := <-produced; err == nil && perr != nil && !errors.Is(perr, errCopyFinished) {
		err = perr
	}
	return err
}

// errCopyFinished unblocks the archive producer once the engine is done.
var errCopyFinished = errors.New("copy finished")

// CopyDirOut copies the contents of srcDir in the container into hostDir
// (created 0700 when missing). srcDir itself must be a directory, not a
// link to one. Only regular files and directories are accepted; symbolic links, hard links, devices, absolute or escaping
// paths, duplicate entries and anything over maxBytes of file content or
// maxFiles entries fail with failure.SandboxOutputInvalid. Files are
// written 0600 and directories 0700 whatever the archive says. A missing
// srcDir is failure.SandboxOutputMissing. On failure hostDir may hold a
// partial copy and must be discarded by the caller.
func (c *Client) CopyDirOut(ctx context.Context, containerID, srcDir, hostDir string, maxBytes int64, maxFiles int) error {
	if !path.IsAbs(srcDir) {
		return failure.New(failure.SandboxOutputInvalid, "copy from container: source %q is not absolute", srcDir)
	}
	// The directory itself, not "srcDir/.": the engine resolves every
	// symbolic link of a path but its last component, so a task that put a
	// link in srcDir's place (to the secrets mount, say) would have its
	// target copied. Asked for srcDir, the engine archives the link itself,
	// which the extraction refuses, and says what it found in its stat.
	srcDir = path.Clean(srcDir)
	root := path.Base(srcDir)
	streamCtx, cancel := context.WithTimeout(ctx, c.opts.Timeouts.Copy)
	defer cancel()
	var stat container.PathStat
	rc, err := call(streamCtx, c, 0, readCall, func(ctx context.Context) (io.ReadCloser, error) {
		rc, st, err := c.copier.CopyFromContainer(ctx, containerID, srcDir)
		stat = st
		return rc, err
	})
	if err != nil {
		code := failure.Code("")
		if cerrdefs.IsNotFound(err) {
			code = failure.SandboxOutputMissing
		}
		return opError(ctx, code, err, "copy from container %s:%s", shortID(containerID), srcDir)
	}
	defer func() { _ = rc.Close() }()
	if stat.Name != "" && !stat.Mode.IsDir() {
		what := "not a directory"
		if stat.Mode&fs.ModeSymlink != 0 {
			what = "a symbolic link, not a directory"
		}
		return failure.New(failure.SandboxOutputInvalid, "copy from container %s:%s: it is %s, and the host follows no link out of the output directory",
			shortID(containerID), srcDir, what)
	}
	if srcDir == "/" {
		root = "" // the engine archives the root's contents
	}
	if err := extractTarUnder(rc, root, hostDir, maxBytes, maxFiles); err != nil {
		if failure.CodeOf(err) != "" {
			return err
		}
		return opError(ctx, "", err, "copy from container %s:%s", shortID(containerID), srcDir)
	}
	return nil
}

// shortID shortens a container id for messages.
func shortID(id string) string { return text.Clip(id, 12) }
