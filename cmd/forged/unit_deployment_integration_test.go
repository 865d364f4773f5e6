//go:build linux

package main_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/host/preflight"
	"github.com/forgedev/forged/internal/host/quota"
	"github.com/forgedev/forged/internal/testkit/enginetest"
	"github.com/forgedev/forged/messages"
)

// The unit's user and groups (contrib/forged.service: User=forged,
// SupplementaryGroups=docker disk). scripts/ensure-forged-user.sh makes
// them on a test machine.
const (
	unitUser   = "forged"
	unitGroups = "docker,disk"
)

// TestUnitDeploymentBoundsAWriter runs forged the way the shipped unit
// does, beside the rootful engine, with the default settings (a rootful
// engine is accepted by default): as the unprivileged user forged, in the
// groups docker and disk, with no capability (setpriv drops the inherited
// and bounding sets; systemd's sandboxing itself, ProtectSystem and the
// rest, is not emulated). Preflight must report filesystem images, and a
// task that writes 2 GiB into its 256 MiB workspace must end
// sandbox_storage_exhausted while the attempt's storage on the host (its
// images, or the engine's plain volume directories were they unbounded)
// never exceeds the quota plus the control image.
func TestUnitDeploymentBoundsAWriter(t *testing.T) {
	engine := enginetest.Client(t)
	setpriv := requireUnitUser(t)
	forged := enginetest.ForgedBinary(t)

	// A tree the unit's user can reach: the binaries (root's, 0755) and its
	// own work directory (the state root, the sample repository).
	top, err := os.MkdirTemp("", "forged-unit-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(top) })
	require.NoError(t, os.Chmod(top, 0o755))
	bin := filepath.Join(top, "bin")
	require.NoError(t, os.Mkdir(bin, 0o755))
	for _, name := range []string{"forged", "forged-worker"} {
		copyExecutable(t, filepath.Join(filepath.Dir(forged), name), filepath.Join(bin, name))
	}
	uid, gid := lookupUnitUser(t)
	work := filepath.Join(top, "work")
	require.NoError(t, os.Mkdir(work, 0o700))
	require.NoError(t, os.Mkdir(filepath.Join(work, "tmp"), 0o700))
	require.NoError(t, os.Chown(work, uid, gid))
	require.NoError(t, os.Chown(filepath.Join(work, "tmp"), uid, gid))
	stateRoot := filepath.Join(work, "state")

	asUnit := func(args ...string) *exec.Cmd {
		argv := append([]string{"--reuid", unitUser, "--regid", unitUser, "--groups", unitGroups,
			"--inh-caps=-all", "--bounding-set=-all", "--", filepath.Join(bin, "forged")}, args...)
		cmd := exec.Command(setpriv, argv...)
		cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=" + work, "TMPDIR=" + filepath.Join(work, "tmp"),
			"LC_ALL=C", "FORGED_HOST_RESERVED_CORES=0"}
		cmd.Dir = work
		return cmd
	}

	out, err := asUnit("example", "--project", testProject, "--dir", filepath.Join(work, "example"), "--state-root", stateRoot).CombinedOutput()
	require.NoError(t, err, "%s", out)

	var report preflight.Report
	cmd := asUnit("preflight", "--json", "--state-root", stateRoot)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	raw, _ := cmd.Output() // exit 1 (unavailable) still prints the report
	require.NoError(t, json.Unmarshal(raw, &report), "preflight: %s %s", raw, stderr.String())
	assert.Equal(t, quota.MechanismImage, report.Storage.Mechanism, "preflight as the unit's user: %s", report.Storage.Reason)

	// The task writes 2 GiB into a 256 MiB workspace.
	const quotaBytes = 256 << 20
	dispatchPath := filepath.Join(work, "example", "dispatch.json")
	var d messages.Dispatch
	raw, err = os.ReadFile(dispatchPath)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, &d))
	d.Task.Argv = []string{"/bin/sh", "-c", "dd if=/dev/zero of=/workspace/big bs=1M count=2048; exit 1"}
	d.Sandbox.RequestedResources.WorkspaceBytes = quotaBytes
	raw, err = json.Marshal(&d)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(dispatchPath, raw, 0o600))
	require.NoError(t, os.Chown(dispatchPath, uid, gid))
	defer enginetest.AssertNoneLabelled(t, engine, d.AttemptID())

	info, err := engine.Info(t.Context())
	require.NoError(t, err)
	hex := strings.ReplaceAll(d.AttemptID(), "-", "")
	footprint := attemptFootprint{images: filepath.Join(stateRoot, quota.ImageDir), dockerRoot: info.DockerRootDir, prefix: "forge-" + hex}
	stop := footprint.sample()

	run := asUnit("run", "--json", "--state-root", stateRoot, dispatchPath)
	var stdout bytes.Buffer
	stderr.Reset()
	run.Stdout, run.Stderr = &stdout, &stderr
	runErr := run.Run()
	peak := stop()

	outcome := finishedOutcome(t, &stdout)
	require.NotNil(t, outcome, "forged run: %v: %s", runErr, stderr.String())
	slack := quota.ControlBytes(1<<20, quotaBytes)
	t.Logf("outcome %s %s: %s; peak host storage of the attempt: %d MiB (quota %d MiB + slack %d MiB)",
		outcome.Status, outcome.Code, outcome.Message, peak>>20, quotaBytes>>20, slack>>20)
	assert.Equal(t, messages.StatusFailed, outcome.Status)
	assert.Equal(t, string(failure.SandboxStorageExhausted), outcome.Code, outcome.Message)
	assert.Greater(t, peak, int64(quotaBytes)/2, "the sampler saw the task's writes (else the test proves nothing)")
	assert.LessOrEqual(t, peak, int64(quotaBytes)+slack, "the attempt took at most its images' size from the host")

	entries, err := os.ReadDir(footprint.images)
	if !os.IsNotExist(err) {
		require.NoError(t, err)
		assert.Empty(t, entries, "the teardown removed the images")
	}
	backing, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	for _, b := range backing {
		raw, _ := os.ReadFile(b)
		assert.NotContains(t, string(raw), stateRoot, "a loop device is still bound to an image: %s", b)
	}
}

// requireUnitUser returns setpriv's path once this test can run as the
// unit's user: root (to switch), setpriv, the user, and its groups.
// Without them the test skips, and fails under CI=true.
func requireUnitUser(t *testing.T) string {
	t.Helper()
	missing := func(format string, args ...any) {
		t.Helper()
		if os.Getenv("CI") == "true" {
			t.Fatalf(format+" (scripts/ensure-forged-user.sh sets it up)", args...)
		}
		t.Skipf(format, args...)
	}
	if os.Geteuid() != 0 {
		missing("the unit's deployment is emulated with setpriv, which needs root")
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		missing("setpriv is not installed (util-linux)")
	}
	u, err := user.Lookup(unitUser)
	if err != nil {
		missing("no user %s: %v", unitUser, err)
	}
	gids, err := u.GroupIds()
	require.NoError(t, err)
	for _, name := range strings.Split(unitGroups, ",") {
		g, err := user.LookupGroup(name)
		if err != nil || !slices.Contains(gids, g.Gid) {
			missing("user %s is not in group %s", unitUser, name)
		}
	}
	return setpriv
}

func lookupUnitUser(t *testing.T) (uid, gid int) {
	t.Helper()
	u, err := user.Lookup(unitUser)
	require.NoError(t, err)
	uid, err = strconv.Atoi(u.Uid)
	require.NoError(t, err)
	gid, err = strconv.Atoi(u.Gid)
	require.NoError(t, err)
	return uid, gid
}

func copyExecutable(t *testing.T, from, to string) {
	t.Helper()
	src, err := os.Open(from)
	require.NoError(t, err)
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	require.NoError(t, err)
	_, err = io.Copy(dst, src)
	require.NoError(t, err)
	require.NoError(t, dst.Close())
}

// finishedOutcome is the outcome of `forged run --json`'s finished line.
func finishedOutcome(t *testing.T, stdout io.Reader) *messages.AttemptOutcome {
	t.Helper()
	var outcome *messages.AttemptOutcome
	scanner := bufio.NewScanner(stdout)
	scanner.Buffer(make([]byte, 1<<20), 1<<20)
	for scanner.Scan() {
		var line struct {
			Type    string                   `json:"type"`
			Outcome *messages.AttemptOutcome `json:"outcome"`
		}
		require.NoError(t, json.Unmarshal(scanner.Bytes(), &line), scanner.Text())
		if line.Type == "finished" {
			outcome = line.Outcome
		}
	}
	return outcome
}

// attemptFootprint measures how much of the host an attempt's storage
// takes: the blocks of its volume images, plus the blocks under the
// engine's own directories of its volumes when they are plain (a mounted
// image is not counted twice: its directory is on another device).
type attemptFootprint struct {
	images, dockerRoot, prefix string
}

// sample starts sampling every 20 ms; the returned function stops it and
// returns the peak.
func (f attemptFootprint) sample() func() int64 {
	var (
		mu   sync.Mutex
		peak int64
	)
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			total := f.measure()
			mu.Lock()
			peak = max(peak, total)
			mu.Unlock()
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	return func() int64 {
		close(done)
		<-stopped
		mu.Lock()
		defer mu.Unlock()
		return peak
	}
}

func (f attemptFootprint) measure() int64 {
	total := int64(0)
	images, _ := filepath.Glob(filepath.Join(f.images, f.prefix+"-*.img"))
	for _, p := range images {
		var st unix.Stat_t
		if unix.Stat(p, &st) == nil {
			total += st.Blocks * 512
		}
	}
	var root unix.Stat_t
	if unix.Stat(f.dockerRoot, &root) != nil {
		return total
	}
	volumes, _ := filepath.Glob(filepath.Join(f.dockerRoot, "volumes", f.prefix+"-*", "_data"))
	for _, v := range volumes {
		_ = filepath.WalkDir(v, func(p string, _ fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			var st unix.Stat_t
			if unix.Lstat(p, &st) != nil {
				return nil
			}
			if st.Dev != root.Dev {
				return filepath.SkipDir // a mounted image, counted above
			}
			total += st.Blocks * 512
			return nil
		})
	}
	return total
}
