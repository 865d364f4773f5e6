package runner

import (
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// workerBinaryName is the worker binary's file name, looked up beside the
// running executable when no worker binary is configured.
const workerBinaryName = "forged-worker"

// defaultWorkerBinary is forged-worker beside the running executable.
func defaultWorkerBinary() (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("worker binary: %w", err)
	}
	return filepath.Join(filepath.Dir(self), workerBinaryName), nil
}

// resolveWorkerBinary returns the worker binary's path (defaultWorkerBinary
// when path is empty) and sha256, refusing a dynamically linked binary:
// the sandbox image has no libc to offer it.
func resolveWorkerBinary(path string) (string, string, error) {
	if path == "" {
		def, err := defaultWorkerBinary()
		if err != nil {
			return "", "", err
		}
		path = def
	}
	f, err := elf.Open(path)
	if err != nil {
		return "", "", fmt.Errorf("worker binary %s (build cmd/forged-worker there, or pass --worker-binary): %w", path, err)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			f.Close()
			return "", "", fmt.Errorf("worker binary %s is dynamically linked: build forged-worker with CGO_ENABLED=0", path)
		}
	}
	f.Close()
	digest, err := fileDigest(path)
	if err != nil {
		return "", "", fmt.Errorf("worker binary digest: %w", err)
	}
	return path, digest, nil
}

// fileDigest is the hex sha256 of the file at path: for the worker binary,
// the WorkerDigest of the sandbox image key.
func fileDigest(path string) (string, error) {
	file, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer file.Close()
	h := sha256.New()
	if _, err := io.Copy(h, file); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
