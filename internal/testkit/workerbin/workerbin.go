// Package workerbin builds the forged-worker binary (cmd/forged-worker) for
// tests: once per test process (Path), the way scripts/example.sh builds
// bin/forged-worker, so every test that needs a worker shares one build.
package workerbin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/forgedev/forged/internal/testkit/testbin"
)

// Package is the worker's main package.
const Package = "github.com/forgedev/forged/cmd/forged-worker"

// Name is the worker binary's file name: the daemon looks for it beside
// its own executable.
const Name = "forged-worker"

// BuildFlags make the build reproducible: the same source gives the same
// bytes wherever it lies and whatever commit it is at, so the binary's
// sha256 (the image key's worker digest) moves only with the worker's code.
var BuildFlags = []string{"-trimpath", "-buildvcs=false"}

// Build builds the static worker from the module in dir ("" for the one
// the test runs in) into out.
func Build(dir, out string) error {
	cmd := exec.Command("go", append(append([]string{"build"}, BuildFlags...), "-o", out, Package)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if output, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build forged-worker: %w: %s", err, output)
	}
	return nil
}

// Path builds the worker once per test process and returns its path. The
// binary lives in the test process's binaries directory (package testbin:
// removed once the process has ended).
func Path(t testing.TB) string {
	t.Helper()
	return testbin.Build(t, Name, "", append(slices.Clone(BuildFlags), Package)...)
}

// Place puts the worker beside a forged binary in dir, where the daemon
// finds it without --worker-binary, and returns its path there. A worker
// already there is left as it is (a running daemon may be executing it).
func Place(t testing.TB, dir string) string {
	t.Helper()
	src := Path(t)
	dst := filepath.Join(dir, Name)
	if _, err := os.Lstat(dst); err == nil {
		return dst
	}
	if err := os.Link(src, dst); err == nil {
		return dst
	}
	raw, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, raw, 0o755); err != nil {
		t.Fatal(err)
	}
	return dst
}
