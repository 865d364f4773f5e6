package dockerops

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/kit/text"
)

// extractTar unpacks an archive produced from untrusted container content
// into hostDir. It accepts only regular files and directories with local
// relative names, bounds the file content to maxBytes and the entries to
// maxFiles, never overwrites, and ignores the archive's modes and owners.
// All file system access goes through an os.Root, so no name can escape
// hostDir.
func extractTar(r io.Reader, hostDir string, maxBytes int64, maxFiles int) error {
	return extractTarUnder(r, "", hostDir, maxBytes, maxFiles)
}

// extractTarUnder is extractTar for an archive of one directory named
// rootName (as the engine archives a path without a trailing "/."): its first
// entry must be that directory, and every other one lies below it and is
// extracted without the root's name. A root that is anything but a
// directory (a symbolic link the task put in its place) or an entry
// outside it is failure.SandboxOutputInvalid. An empty rootName is the
// archive of a directory's contents ("dir/."), as extractTar reads.
func extractTarUnder(r io.Reader, rootName, hostDir string, maxBytes int64, maxFiles int) error {
	if maxBytes < 0 || maxFiles <= 0 {
		return fmt.Errorf("extract: invalid bounds (%d bytes, %d files)", maxBytes, maxFiles)
	}
	if err := os.MkdirAll(hostDir, 0o700); err != nil {
		return fmt.Errorf("extract: %w", err)
	}
	root, err := os.OpenRoot(hostDir)
	if err != nil {
		return fmt.Errorf("extract: %w", err)
	}
	defer func() { _ = root.Close() }()

	var total int64
	entries := 0
	seenRoot := false
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("extract: read archive: %w", err)
		}
		raw := hdr.Name
		if rootName != "" {
			if raw, err = underRoot(raw, rootName, seenRoot); err != nil {
				return err
			}
			if !seenRoot && hdr.Typeflag != tar.TypeDir {
				return invalidOutput("the output directory is not a directory (type %q): the host follows no link out of it", string(hdr.Typeflag))
			}
			seenRoot = true
		}
		name, err := entryName(raw)
		if err != nil {
			return err
		}
		if name == "." {
			if hdr.Typeflag != tar.TypeDir {
				return invalidOutput("archive root is not a directory")
			}
			continue
		}
		entries++
		if entries > maxFiles {
			return invalidOutput("output has more than %d entries", maxFiles)
		}
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := mkdirAll(root, name); err != nil {
				return err
			}
		case tar.TypeReg:
			if hdr.Size < 0 || hdr.Size > maxBytes-total {
				return invalidOutput("output exceeds %d bytes at %q", maxBytes, name)
			}
			total += hdr.Size
			if err := writeFile(root, name, tr, hdr.Size); err != nil {
				return err
			}
		default:
			return invalidOutput("output entry %q has type %q; only regular files and directories are allowed", name, string(hdr.Typeflag))
		}
	}
}

// underRoot returns an entry's name relative to the archive's root
// directory root ("." for the root itself, which must come first).
func underRoot(raw, root string, seenRoot bool) (string, error) {
	name := strings.TrimPrefix(raw, "./")
	if strings.TrimSuffix(name, "/") == root {
		if seenRoot {
			return "", invalidOutput("output archive names its root twice")
		}
		return ".", nil
	}
	rest, ok := strings.CutPrefix(name, root+"/")
	if !ok || !seenRoot {
		return "", invalidOutput("output entry %q is outside the output directory", text.Clip(raw, 200))
	}
	return rest, nil
}

// entryName validates an archive name and returns it cleaned ("." for the
// archive root).
func entryName(raw string) (string, error) {
	name := strings.TrimPrefix(raw, "./")
	if raw == "." || raw == "./" || name == "" {
		return ".", nil
	}
	if strings.HasPrefix(name, "/") || strings.ContainsRune(name, 0) {
		return "", invalidOutput("output entry %q is not a relative path", text.Clip(raw, 200))
	}
	for _, part := range strings.Split(strings.TrimSuffix(name, "/"), "/") {
		if part == ".." {
			return "", invalidOutput("output entry %q escapes the output directory", text.Clip(raw, 200))
		}
	}
	cleaned := path.Clean(name)
	if !filepath.IsLocal(cleaned) {
		return "", invalidOutput("output entry %q is not a local path", text.Clip(raw, 200))
	}
	return cleaned, nil
}

func mkdirAll(root *os.Root, name string) error {
	err := root.MkdirAll(name, 0o700)
	if err != nil && (errors.Is(err, syscall.ENOTDIR) || errors.Is(err, fs.ErrExist)) {
		return invalidOutput("output directory %q collides with a file", name)
	}
	if err != nil {
		return fmt.Errorf("extract: %w", err)
	}
	return nil
}

func writeFile(root *os.Root, name string, src io.Reader, size int64) error {
	if dir := path.Dir(name); dir != "." {
		if err := mkdirAll(root, dir); err != nil {
			return err
		}
	}
	f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) || errors.Is(err, syscall.ENOTDIR) {
		return invalidOutput("output entry %q is duplicated or collides with a directory", name)
	}
	if err != nil {
		return fmt.Errorf("extract: %w", err)
	}
	n, err := io.Copy(f, io.LimitReader(src, size))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && n != size {
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		return fmt.Errorf("extract %q: %w", name, err)
	}
	return nil
}

func invalidOutput(format string, args ...any) error {
	return failure.New(failure.SandboxOutputInvalid, format, args...)
}
