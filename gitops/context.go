package gitops

import (
	"archive/tar"
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/kit/text"
	"github.com/forgedev/forged/messages"
)

// The build context is written from the config commit's tree objects, not
// by `git archive`.
//
// Why: the build policy checks the .forge/Dockerfile blob, so the context
// must carry exactly that blob. `git archive` applies the commit's own
// .gitattributes: export-subst splices commit metadata (a commit message,
// say, with an `ADD http://…` line in it) into a file, and filter drivers
// from the repository's configuration run host programs over every file.
// Neither can be switched off from the command line for the archived
// tree's own attributes, so the alternative (archive, then compare the
// archived Dockerfile with the checked blob) would still run the filters
// and refuse honest repositories that use export-subst elsewhere. Here
// `git ls-tree -r -t -z` lists the tree and `git cat-file --batch` streams
// the raw blobs (it applies no attribute, conversion or filter unless asked
// with --filters or --textconv), which writeContext puts into a tar of its
// own: the context holds every file exactly as committed, so the Dockerfile
// built is, byte for byte, the Dockerfile checked.
//
// The tar mirrors `git archive --format=tar`'s layout with the default
// tar.umask (002): directories 0775, files 0664 or 0775, symlinks with the
// blob as target, a submodule as an empty directory, owner root, the commit
// time as every entry's mtime. Files stored through a filter (Git LFS, say)
// are in the context as committed: the pointer, not the content.

// Bounds of the build context.
const (
	// MaxContextBytes bounds the blobs streamed into the build context.
	MaxContextBytes int64 = 8 << 30
	// maxTreeListing bounds the config commit's recursive tree listing.
	maxTreeListing = 256 << 20
	// maxSymlinkTarget bounds a symbolic link's target.
	maxSymlinkTarget = 4 << 10
	contextTimeout   = 5 * time.Minute
)

var errContextWritten = errors.New("build context written")

// contextEntry is one entry of the config commit's recursive tree listing.
type contextEntry struct {
	mode, typ, oid, path string
}

// writeContext writes the build context of commit, the tar described
// above, to w, with when as every entry's mtime. Errors are
// failure.SandboxInputFailed.
func writeContext(ctx context.Context, git *Runner, repo, commit string, when time.Time, w io.Writer) error {
	entries, err := listContext(ctx, git, repo, commit)
	if err != nil {
		return err
	}
	return streamContext(ctx, git, repo, entries, when, w)
}

// listContext lists commit's tree recursively, trees included, in tree
// order, refusing a path that is not a clean relative path.
func listContext(ctx context.Context, git *Runner, repo, commit string) ([]contextEntry, error) {
	out, err := git.Run(ctx, repo, RunOpts{Timeout: contextTimeout, MaxOutput: maxTreeListing, Code: failure.SandboxInputFailed},
		"ls-tree", "-r", "-t", "-z", "--full-tree", commit)
	if err != nil {
		return nil, err
	}
	var entries []contextEntry
	for _, rec := range strings.Split(out, "\x00") {
		if rec == "" {
			continue
		}
		meta, p, ok := strings.Cut(rec, "\t")
		f := strings.Fields(meta)
		if !ok || len(f) != 3 {
			return nil, failure.New(failure.SandboxInputFailed, "config commit %s: unreadable tree listing entry %q", commit, text.Ellipsis(rec, 80))
		}
		if !cleanTreePath(p) {
			return nil, failure.New(failure.SandboxInputFailed, "config commit %s holds the path %q, which is not a clean relative path", commit, text.Ellipsis(p, 120))
		}
		entries = append(entries, contextEntry{mode: f[0], typ: f[1], oid: f[2], path: p})
	}
	return entries, nil
}

// cleanTreePath reports whether p is relative, with no empty, "." or ".."
// component (git itself refuses such trees; a crafted object may not).
func cleanTreePath(p string) bool {
	if p == "" {
		return false
	}
	for _, part := range strings.Split(p, "/") {
		if part == "" || part == "." || part == ".." {
			return false
		}
	}
	return true
}

// commitTreeTime returns commit's root tree and its commit time, the two
// the build context depends on.
func commitTreeTime(ctx context.Context, git *Runner, repo, commit string) (string, time.Time, error) {
	out, err := git.Run(ctx, repo, RunOpts{Timeout: shortTimeout, Code: failure.SandboxInputFailed},
		"show", "-s", "--no-show-signature", "--format=%T %ct", commit, "--")
	if err != nil {
		return "", time.Time{}, err
	}
	tree, ct, ok := strings.Cut(strings.TrimSpace(out), " ")
	secs, err := strconv.ParseInt(ct, 10, 64)
	if !ok || err != nil || !messages.IsFullSHA(tree) {
		return "", time.Time{}, failure.New(failure.SandboxInputFailed, "config commit %s: unreadable tree and commit time %q", commit, text.Ellipsis(out, 120))
	}
	return tree, time.Unix(secs, 0).UTC(), nil
}

// streamContext writes entries as a tar to w: the blobs come from one
// `git cat-file --batch`, read while git writes them.
func streamContext(ctx context.Context, git *Runner, repo string, entries []contextEntry, when time.Time, w io.Writer) error {
	var oids strings.Builder
	for _, e := range entries {
		if e.typ == "blob" {
			oids.WriteString(e.oid + "\n")
		}
	}
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		_, err := git.Run(ctx, repo, RunOpts{Timeout: contextTimeout, MaxOutput: MaxContextBytes, Code: failure.SandboxInputFailed,
			Stdin: strings.NewReader(oids.String()), Stdout: pw}, "cat-file", "--batch")
		_ = pw.CloseWithError(err) // nil: the reader sees EOF
		done <- err
	}()
	tw := tar.NewWriter(w)
	err := writeEntries(tw, bufio.NewReaderSize(pr, 64<<10), entries, when)
	if err == nil {
		err = tw.Close()
	}
	_ = pr.CloseWithError(errContextWritten) // stops git if the tar ended early
	gitErr := <-done
	switch {
	case err != nil && failure.CodeOf(err) != "": // git's own error, through the pipe, or a refusal
		return err
	case err != nil:
		return failure.Wrap(failure.SandboxInputFailed, err, "write build context")
	}
	return gitErr // coded by Run
}

// writeEntries writes one tar entry per tree entry, reading each blob's
// raw content from the batch output r.
func writeEntries(tw *tar.Writer, r *bufio.Reader, entries []contextEntry, when time.Time) error {
	for _, e := range entries {
		h := &tar.Header{Name: e.path, ModTime: when, Uname: "root", Gname: "root", Format: tar.FormatPAX}
		switch {
		case e.typ == "tree" || e.typ == "commit": // a submodule is an empty directory, as in git archive
			h.Typeflag, h.Name, h.Mode = tar.TypeDir, e.path+"/", 0o775
			if err := tw.WriteHeader(h); err != nil {
				return err
			}
			continue
		case e.typ != "blob":
			return failure.New(failure.SandboxInputFailed, "build context: %s has the unknown object type %q", text.Ellipsis(e.path, 120), text.Ellipsis(e.typ, 20))
		}
		size, err := batchHeader(r, e.oid)
		if err != nil {
			return err
		}
		switch e.mode {
		case "100644", "100755":
			h.Typeflag, h.Size, h.Mode = tar.TypeReg, size, 0o664
			if e.mode == "100755" {
				h.Mode = 0o775
			}
			if err := tw.WriteHeader(h); err != nil {
				return err
			}
			if _, err := io.CopyN(tw, r, size); err != nil {
				return err
			}
		case "120000":
			if size > maxSymlinkTarget {
				return failure.New(failure.SandboxInputFailed, "build context: the symbolic link %s has a target of %d bytes", text.Ellipsis(e.path, 120), size)
			}
			target := make([]byte, size)
			if _, err := io.ReadFull(r, target); err != nil {
				return err
			}
			h.Typeflag, h.Linkname, h.Mode = tar.TypeSymlink, string(target), 0o777
			if err := tw.WriteHeader(h); err != nil {
				return err
			}
		default:
			return failure.New(failure.SandboxInputFailed, "build context: %s has the unknown mode %s", text.Ellipsis(e.path, 120), text.Ellipsis(e.mode, 10))
		}
		if b, err := r.ReadByte(); err != nil || b != '\n' {
			return fmt.Errorf("cat-file --batch: no newline after object %s", e.oid)
		}
	}
	return nil
}

// batchHeader reads "<oid> blob <size>\n" for oid and returns size.
func batchHeader(r *bufio.Reader, oid string) (int64, error) {
	line, err := r.ReadSlice('\n')
	if err != nil {
		return 0, fmt.Errorf("cat-file --batch: header of %s: %w", oid, err)
	}
	f := strings.Fields(string(line))
	if len(f) != 3 || f[0] != oid || f[1] != "blob" {
		return 0, failure.New(failure.SandboxInputFailed, "build context: object %s is missing or not a blob (%s)", oid, text.Ellipsis(strings.TrimSpace(string(line)), 120))
	}
	size, err := strconv.ParseInt(f[2], 10, 64)
	if err != nil || size < 0 {
		return 0, fmt.Errorf("cat-file --batch: bad size in %q", text.Ellipsis(string(line), 120))
	}
	return size, nil
}
