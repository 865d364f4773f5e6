package gitops

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"syscall"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/kit/strictjson"
	"github.com/forgedev/forged/internal/kit/text"
	"github.com/forgedev/forged/messages"
)

// Bounds on the worker's output files.
const (
	MaxManifestBytes = 1 << 20
	MaxResultBytes   = 16 << 20
	MaxBundleBytes   = 512 << 20
)

var outputName = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,255}$`)

// Output is a validated worker output directory.
type Output struct {
	Manifest messages.Manifest
	// ResultPath is the validated result.json (or whatever the manifest named).
	ResultPath string
	// BundlePath is the validated result bundle, "" when there is no result
	// commit.
	BundlePath string
}

// ValidateOutput validates the worker's untrusted output directory, copied
// out of the sandbox: manifest.json must be a bounded regular file holding
// exactly one strictly decoded Manifest whose identity and fence equal
// expected; the result commit and the bundle must be present together; and
// every file the manifest names must be a regular file directly in
// outputDir with the declared size (within bounds) and sha256. Files are
// opened without following symlinks and checked through the opened
// descriptor. A missing manifest is failure.SandboxOutputMissing, anything
// else failure.SandboxOutputInvalid.
func ValidateOutput(outputDir string, expected messages.SandboxIdentity) (*Output, error) {
	raw, err := readManifest(filepath.Join(outputDir, messages.ManifestFile))
	if err != nil {
		return nil, err
	}
	var m messages.Manifest
	if err := strictjson.Decode(raw, &m); err != nil {
		return nil, failure.Wrap(failure.SandboxOutputInvalid, err, "manifest is not a valid document")
	}
	if m.SandboxIdentity != expected {
		return nil, failure.New(failure.SandboxOutputInvalid, "manifest identity or fence mismatch")
	}
	if (m.ResultCommitSHA == nil) != (m.Bundle == nil) ||
		(m.ResultCommitSHA != nil && !messages.IsFullSHA(*m.ResultCommitSHA)) {
		return nil, failure.New(failure.SandboxOutputInvalid, "result commit and bundle must be present together, with a full commit id")
	}
	if m.Bundle != nil && m.Bundle.Path == m.Result.Path {
		return nil, failure.New(failure.SandboxOutputInvalid, "result and bundle must be different files")
	}
	out := &Output{Manifest: m}
	if out.ResultPath, err = validateOutputFile(outputDir, m.Result, MaxResultBytes); err != nil {
		return nil, err
	}
	if m.Bundle != nil {
		if out.BundlePath, err = validateOutputFile(outputDir, *m.Bundle, MaxBundleBytes); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// readManifest reads the manifest through a descriptor opened without
// following symlinks.
func readManifest(path string) ([]byte, error) {
	f, info, err := openRegular(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, failure.New(failure.SandboxOutputMissing, "sandbox worker did not produce %s", messages.ManifestFile)
	}
	if err != nil {
		return nil, failure.Wrap(failure.SandboxOutputInvalid, err, "manifest must be a regular file")
	}
	defer f.Close()
	if info.Size() > MaxManifestBytes {
		return nil, failure.New(failure.SandboxOutputInvalid, "manifest exceeds %d bytes", MaxManifestBytes)
	}
	raw, err := io.ReadAll(io.LimitReader(f, MaxManifestBytes+1))
	if err != nil {
		return nil, failure.Wrap(failure.SandboxOutputInvalid, err, "read manifest")
	}
	if len(raw) > MaxManifestBytes {
		return nil, failure.New(failure.SandboxOutputInvalid, "manifest exceeds %d bytes", MaxManifestBytes)
	}
	return raw, nil
}

// validateOutputFile checks one file the manifest names and returns its path.
func validateOutputFile(dir string, file messages.OutputFile, max int64) (string, error) {
	if !outputName.MatchString(file.Path) || file.Path == "." || file.Path == ".." {
		return "", failure.New(failure.SandboxOutputInvalid, "output path %q is invalid", text.Ellipsis(file.Path, 64))
	}
	path := filepath.Join(dir, file.Path)
	f, info, err := openRegular(path)
	if err != nil {
		return "", failure.Wrap(failure.SandboxOutputInvalid, err, "output file %s must be a regular file", file.Path)
	}
	defer f.Close()
	if file.Bytes < 0 || info.Size() != file.Bytes || info.Size() > max {
		return "", failure.New(failure.SandboxOutputInvalid,
			"output file %s has %d bytes, manifest declares %d (limit %d)", file.Path, info.Size(), file.Bytes, max)
	}
	h := sha256.New()
	n, err := io.Copy(h, io.LimitReader(f, max+1))
	if err != nil {
		return "", failure.Wrap(failure.SandboxOutputInvalid, err, "read output file %s", file.Path)
	}
	if n != file.Bytes || hex.EncodeToString(h.Sum(nil)) != file.SHA256 {
		return "", failure.New(failure.SandboxOutputInvalid, "output file %s does not match its declared sha256", file.Path)
	}
	return path, nil
}

// openRegular opens path read-only without following a final symlink
// (ELOOP) and without blocking on FIFOs, and checks through the descriptor
// that it is a regular file.
func openRegular(path string) (*os.File, fs.FileInfo, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, err
	}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !info.Mode().IsRegular() {
		f.Close()
		return nil, nil, errors.New("not a regular file")
	}
	return f, info, nil
}
