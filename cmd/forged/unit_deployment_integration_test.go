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
	"github.com/forgedev/forged/internal/example"
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
	u := newUnitDeployment(t, unitGroups)
	stateRoot := u.stateRoot
	u.example(t)
	report := u.preflight(t)
	assert.Equal(t, quota.MechanismImage, report.Storage.Mechanism, "preflight as the unit's user: %s", report.Storage.Reason)
	// Without root, the sandbox's file systems cannot be read through
	// /proc/<pid>/root, and preflight says so (the cgroup counters stay
	// readable here: ProtectProc=invisible is not emulated).
	assert.True(t, report.KernelFacts.Counters, report.KernelFacts.Reason)
	assert.False(t, report.KernelFacts.Filesystems)
	assert.Contains(t, report.KernelFacts.Reason, "sandbox file systems")

	// The task writes 2 GiB into a 256 MiB workspace.
	const quotaBytes = 256 << 20
	d, dispatchPath := u.dispatch(t, func(d *messages.Dispatch) {
		d.Task.Argv = []string{"/bin/sh", "-c", "dd if=/dev/zero of=/workspace/big bs=1M count=2048; exit 1"}
		d.Sandbox.RequestedResources.WorkspaceBytes = quotaBytes
	})
	defer enginetest.AssertNoneLabelled(t, engine, d.AttemptID())

	info, err := engine.Info(t.Context())
	require.NoError(t, err)
	hex := strings.ReplaceAll(d.AttemptID(), "-", "")
	footprint := attemptFootprint{images: filepath.Join(stateRoot, quota.ImageDir), dockerRoot: info.DockerRootDir, prefix: "forge-" + hex}
	stop := footprint.sample()

	outcome, events := u.run(t, nil, dispatchPath)
	peak := stop()
	slack := quota.ControlBytes(1<<20, quotaBytes)
	t.Logf("outcome %s %s: %s; peak host storage of the attempt: %d MiB (quota %d MiB + slack %d MiB)",
		outcome.Status, outcome.Code, outcome.Message, peak>>20, quotaBytes>>20, slack>>20)
	assert.Equal(t, messages.StatusFailed, outcome.Status)
	assert.Equal(t, string(failure.SandboxStorageExhausted), outcome.Code, outcome.Message)
	var output strings.Builder
	for _, ev := range events {
		output.WriteString(ev.Content + "\n")
	}
	assert.Contains(t, output.String(), "No space left on device", "the kernel refused the writes past the quota (ENOSPC)")
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

// TestUnitDeploymentWithoutDiskGroupIsUnbounded runs forged as the unit's
// user without the disk group (as the unit shipped before it had one):
// preflight reports unbounded volumes and why, a sandbox_required dispatch
// is refused with sandbox_storage_unbounded before anything is created,
// so is an adoption dispatch when the operator requires bounded storage
// (FORGED_REQUIRE_BOUNDED_STORAGE), and an adoption dispatch otherwise
// runs with an event saying its workspaceBytes is not enforced.
func TestUnitDeploymentWithoutDiskGroupIsUnbounded(t *testing.T) {
	engine := enginetest.Client(t)
	u := newUnitDeployment(t, "docker")
	u.example(t)
	report := u.preflight(t)
	assert.Equal(t, quota.MechanismNone, report.Storage.Mechanism)
	assert.Contains(t, report.Storage.Reason, "disk group", "the reason says what to do")

	for _, tc := range []struct {
		name   string
		policy string
		env    []string
	}{
		{"sandbox_required", messages.PolicySandboxRequired, nil},
		{"adoption with --require-bounded-storage", messages.PolicyAdoption, []string{"FORGED_REQUIRE_BOUNDED_STORAGE=true"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, path := u.dispatch(t, func(d *messages.Dispatch) { d.Sandbox.ExecutionPolicy = tc.policy })
			defer enginetest.AssertNoneLabelled(t, engine, d.AttemptID())
			outcome, _ := u.run(t, tc.env, path)
			assert.Equal(t, messages.StatusFailed, outcome.Status)
			assert.Equal(t, string(failure.SandboxStorageUnbounded), outcome.Code, outcome.Message)
			assert.Equal(t, messages.PhasePreparing, outcome.Phase, "refused before anything is created")
		})
	}
	t.Run("adoption", func(t *testing.T) {
		d, path := u.dispatch(t, func(d *messages.Dispatch) { d.Sandbox.RequestedResources.WorkspaceBytes = 256 << 20 })
		defer enginetest.AssertNoneLabelled(t, engine, d.AttemptID())
		outcome, events := u.run(t, nil, path)
		assert.Equal(t, messages.StatusSucceeded, outcome.Status, outcome.Message)
		var warning string
		for _, ev := range events {
			if ev.EventType == "sandbox_storage_unbounded" {
				warning = ev.Content
			}
		}
		assert.Contains(t, warning, "workspaceBytes (268435456) is not enforced")
	})
}

// unitDeployment is forged run as the unit's user, with the given
// supplementary groups and no capability: the binaries in a directory that
// user can read, its work directory (state root, sample repository) its
// own.
type unitDeployment struct {
	setpriv, groups      string
	bin, work, stateRoot string
	uid, gid             int
}

func newUnitDeployment(t *testing.T, groups string) *unitDeployment {
	t.Helper()
	setpriv := requireUnitUser(t)
	forged := enginetest.ForgedBinary(t)
	top, err := os.MkdirTemp("", "forged-unit-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(top) })
	require.NoError(t, os.Chmod(top, 0o755))
	u := &unitDeployment{setpriv: setpriv, groups: groups, bin: filepath.Join(top, "bin"), work: filepath.Join(top, "work")}
	u.stateRoot = filepath.Join(u.work, "state")
	require.NoError(t, os.Mkdir(u.bin, 0o755))
	for _, name := range []string{"forged", "forged-worker"} {
		copyExecutable(t, filepath.Join(filepath.Dir(forged), name), filepath.Join(u.bin, name))
	}
	u.uid, u.gid = lookupUnitUser(t)
	for _, dir := range []string{u.work, filepath.Join(u.work, "tmp")} {
		require.NoError(t, os.Mkdir(dir, 0o700))
		require.NoError(t, os.Chown(dir, u.uid, u.gid))
	}
	return u
}

// command is forged with args, run as the unit's user, with the default
// settings but for FORGED_HOST_RESERVED_CORES=0 (a two-core test machine)
// and env.
func (u *unitDeployment) command(env []string, args ...string) *exec.Cmd {
	argv := append([]string{"--reuid", unitUser, "--regid", unitUser, "--groups", u.groups,
		"--inh-caps=-all", "--bounding-set=-all", "--", filepath.Join(u.bin, "forged")}, args...)
	cmd := exec.Command(u.setpriv, argv...)
	cmd.Env = append([]string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=" + u.work, "TMPDIR=" + filepath.Join(u.work, "tmp"),
		"LC_ALL=C", "FORGED_HOST_RESERVED_CORES=0"}, env...)
	cmd.Dir = u.work
	return cmd
}

// example makes the sample repository and its base image.
func (u *unitDeployment) example(t *testing.T) {
	t.Helper()
	out, err := u.command(nil, "example", "--project", testProject, "--dir", filepath.Join(u.work, "example"), "--state-root", u.stateRoot).CombinedOutput()
	require.NoError(t, err, "%s", out)
}

func (u *unitDeployment) preflight(t *testing.T) preflight.Report {
	t.Helper()
	var report preflight.Report
	cmd := u.command(nil, "preflight", "--json", "--state-root", u.stateRoot)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	raw, _ := cmd.Output() // exit 1 (unavailable) still prints the report
	require.NoError(t, json.Unmarshal(raw, &report), "preflight: %s %s", raw, stderr.String())
	return report
}

// dispatch writes a new dispatch for the sample repository, changed by
// edit, and returns it and its path.
func (u *unitDeployment) dispatch(t *testing.T, edit func(*messages.Dispatch)) (*messages.Dispatch, string) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(u.work, "example", "dispatch.json"))
	require.NoError(t, err)
	var d messages.Dispatch
	require.NoError(t, json.Unmarshal(raw, &d))
	d.Session.ID = example.NewUUID()
	d.Sandbox.DispatchAttemptID = example.NewUUID()
	d.Sandbox.ExecutionLeaseID = example.NewUUID()
	d.Lease.FencingToken = example.NewUUID()
	edit(&d)
	raw, err = json.Marshal(&d)
	require.NoError(t, err)
	path := filepath.Join(u.work, "dispatch-"+d.Sandbox.DispatchAttemptID+".json")
	require.NoError(t, os.WriteFile(path, raw, 0o600))
	require.NoError(t, os.Chown(path, u.uid, u.gid))
	return &d, path
}

// run runs `forged run --json` on the dispatch and returns its outcome and
// events.
func (u *unitDeployment) run(t *testing.T, env []string, path string) (*messages.AttemptOutcome, []messages.Event) {
	t.Helper()
	cmd := u.command(env, "run", "--json", "--state-root", u.stateRoot, path)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	outcome, events := runOutput(t, &stdout)
	require.NotNil(t, outcome, "forged run: %v: %s", err, stderr.String())
	return outcome, events
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

// runOutput is the outcome of `forged run --json`'s finished line, and its
// events.
func runOutput(t *testing.T, stdout io.Reader) (*messages.AttemptOutcome, []messages.Event) {
	t.Helper()
	var outcome *messages.AttemptOutcome
	var events []messages.Event
	scanner := bufio.NewScanner(stdout)
	scanner.Buffer(make([]byte, 1<<20), 1<<20)
	for scanner.Scan() {
		var line struct {
			Type    string                   `json:"type"`
			Event   *messages.Event          `json:"event"`
			Outcome *messages.AttemptOutcome `json:"outcome"`
		}
		require.NoError(t, json.Unmarshal(scanner.Bytes(), &line), scanner.Text())
		switch {
		case line.Type == "finished":
			outcome = line.Outcome
		case line.Type == "event" && line.Event != nil:
			events = append(events, *line.Event)
		}
	}
	return outcome, events
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
