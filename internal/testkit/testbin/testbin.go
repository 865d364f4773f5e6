// Package testbin builds the binaries that tests run (forged,
// forged-worker, test clients) once per test process, into one directory
// per test process, and removes the
// directories of test processes that have ended. A test process has no
// exit hook outside TestMain, so the sweep runs when the next one starts
// building: the directories of the processes still running (packages the
// suite tests in parallel) are kept, every other one goes.
package testbin

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// parent holds one directory per test process, named by its pid.
const parent = "forged-test-bin"

var (
	once   sync.Once
	dir    string
	dirErr error
)

// Dir returns this test process's directory for built binaries, made on
// the first call, after the directories of ended test processes were
// removed.
func Dir() (string, error) {
	once.Do(func() {
		root := filepath.Join(os.TempDir(), parent)
		if err := os.MkdirAll(root, 0o700); err != nil {
			dirErr = fmt.Errorf("test binaries: %w", err)
			return
		}
		Sweep(root, Running)
		dir = filepath.Join(root, strconv.Itoa(os.Getpid()))
		if err := os.MkdirAll(dir, 0o700); err != nil {
			dirErr = fmt.Errorf("test binaries: %w", err)
		}
	})
	return dir, dirErr
}

// Sweep removes every directory of root named by the pid of a process
// that isRunning says has ended, and returns the names removed. Entries
// not named by a pid are left alone.
func Sweep(root string, isRunning func(pid int) bool) []string {
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil
	}
	var removed []string
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 0 || !e.IsDir() || isRunning(pid) {
			continue
		}
		if os.RemoveAll(filepath.Join(root, e.Name())) == nil {
			removed = append(removed, e.Name())
		}
	}
	return removed
}

// Running reports whether a process with pid exists (a pid reused by
// another process keeps what a sweep would remove until that one ends:
// harmless).
func Running(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// built is one binary's build, once per test process.
type built struct {
	once sync.Once
	path string
	err  error
}

var (
	buildsMu sync.Mutex
	builds   = map[string]*built{}
)

// Build builds the static Go binary name once per test process, with
// `go build -o DIR/name ARGS` run in workdir ("" for the test's own
// directory) and CGO_ENABLED=0, and returns its path. ARGS are the build
// flags followed by the package. A failed build fails the test, and every
// later one of the process.
func Build(t testing.TB, name, workdir string, args ...string) string {
	t.Helper()
	buildsMu.Lock()
	b, ok := builds[name]
	if !ok {
		b = &built{}
		builds[name] = b
	}
	buildsMu.Unlock()
	b.once.Do(func() {
		dir, err := Dir()
		if err != nil {
			b.err = err
			return
		}
		b.path = filepath.Join(dir, name)
		cmd := exec.Command("go", append([]string{"build", "-o", b.path}, args...)...)
		cmd.Dir = workdir
		cmd.Env = append(WithoutRace(os.Environ()), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("build %s: %w: %s", name, err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

// WithoutRace returns env with -race dropped from GOFLAGS: the binaries
// tests build run as separate processes, never instrumented by the race
// detector even when the tests themselves are (`go test -race` does not
// set GOFLAGS; a caller's GOFLAGS=-race would). The fleet's tests rely on
// it: Proto.Actor's cluster runs only in such processes (docs/fleet.md).
func WithoutRace(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		if flags, ok := strings.CutPrefix(kv, "GOFLAGS="); ok {
			var kept []string
			for _, f := range strings.Fields(flags) {
				if f != "-race" && f != "--race" && f != "-race=true" && f != "--race=true" {
					kept = append(kept, f)
				}
			}
			kv = "GOFLAGS=" + strings.Join(kept, " ")
		}
		out = append(out, kv)
	}
	return out
}
