package dockerops

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/docker/docker/api/types/mount"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/kit/ids"
	"github.com/forgedev/forged/messages"
)

func TestIntegrationWorkerHardening(t *testing.T) {
	s := provision(t, "true", nil)
	ctx := testCtx(t)
	info, err := s.c.raw.ContainerInspect(ctx, s.container)
	require.NoError(t, err)
	h, cfg := info.HostConfig, info.Config
	r := s.d.Sandbox.RequestedResources

	assert.True(t, h.ReadonlyRootfs)
	assert.Equal(t, []string{"ALL"}, []string(h.CapDrop))
	assert.Empty(t, h.CapAdd)
	assert.False(t, h.Privileged)
	assert.Contains(t, h.SecurityOpt, "no-new-privileges")
	require.NotNil(t, h.PidsLimit)
	assert.Equal(t, r.PIDs, *h.PidsLimit)
	assert.Equal(t, r.WorkerMemoryLimitBytes, h.Memory)
	assert.Equal(t, h.Memory, h.MemorySwap)
	assert.Equal(t, r.CPUMillis*1_000_000, h.NanoCPUs)
	require.NotNil(t, h.Init)
	assert.True(t, *h.Init)
	assert.Equal(t, "none", h.LogConfig.Type)
	assert.Equal(t, "none", string(h.NetworkMode))
	assert.Equal(t, []string{SandboxNameserver}, h.DNS)
	scratch := ScratchTmpfsBytes(r.WorkerMemoryLimitBytes)
	assert.Equal(t, scratchTmpfsOptions(scratch, "1777", messages.ImageUser), h.Tmpfs["/tmp"])
	assert.Equal(t, scratchTmpfsOptions(scratch, "0700", messages.ImageUser), h.Tmpfs["/home/forge"])
	assert.Equal(t, runForgeTmpfsOptions(messages.ImageUser), h.Tmpfs["/run/forge"])
	assert.Len(t, h.Ulimits, 2)
	assert.Equal(t, "10001:10001", cfg.User)
	assert.Equal(t, messages.WorkspaceDir, cfg.WorkingDir)
	assert.True(t, cfg.OpenStdin && cfg.StdinOnce && cfg.AttachStdin && cfg.AttachStdout && cfg.AttachStderr)
	assert.False(t, cfg.Tty)
	require.NotNil(t, cfg.StopTimeout)
	assert.Equal(t, 10, *cfg.StopTimeout)
	for k, v := range s.labels { // the image's own labels are merged in
		assert.Equal(t, v, cfg.Labels[k], k)
	}

	// No network but "none": loopback only.
	require.NotNil(t, info.NetworkSettings)
	assert.Equal(t, []string{"none"}, slices.Collect(maps.Keys(info.NetworkSettings.Networks)))

	// Exactly the three volumes, secrets read-only.
	mounts := map[string]bool{}
	for _, m := range info.Mounts {
		assert.Equal(t, mount.TypeVolume, m.Type)
		mounts[m.Destination+":"+m.Name] = m.RW
	}
	assert.Equal(t, map[string]bool{
		"/workspace:" + s.names.WorkspaceVolume:       true,
		"/control:" + s.names.ControlVolume:           true,
		"/run/forge-secrets:" + s.names.SecretsVolume: false,
	}, mounts)
}

// TestIntegrationNetworkNoneIsLoopbackOnly: a worker on network none
// created without a network sandbox (WithSandboxEtc: NetworkDisabled, and
// the /etc files mounted read-only) has a network namespace of its own
// whose only interface is the loopback, up, with 127.0.0.1 reachable;
// /etc/hosts names localhost and /etc/resolv.conf only the loopback
// nameserver, as the engine's own files for network none do, and the task
// cannot write either.
func TestIntegrationNetworkNoneIsLoopbackOnly(t *testing.T) {
	etc, err := requireEngine(t).WithSandboxEtc(filepath.Join(t.TempDir(), "sandbox-etc"))
	require.NoError(t, err)
	s := provisionOn(t, etc, strings.Join([]string{
		"set -e",
		"ls /sys/class/net",
		"cat /sys/class/net/lo/flags",
		// The client retries until the listener is up; the listener prints
		// what it received and exits.
		"(for i in $(seq 1000); do echo over-loopback | nc 127.0.0.1 7777 2>/dev/null && break; done) &",
		"nc -l -p 7777 127.0.0.1",
		"cat /etc/resolv.conf",
		"grep -c '^127.0.0.1[[:space:]]localhost$' /etc/hosts",
		"readlink /proc/self/ns/net",
		"if echo x >> /etc/hosts; then echo hosts-writable; fi 2>/dev/null",
	}, "\n"), false, nil)
	ctx := testCtx(t)
	info, err := s.c.raw.ContainerInspect(ctx, s.container)
	require.NoError(t, err)
	assert.True(t, info.Config.NetworkDisabled)
	assert.Equal(t, "none", string(info.HostConfig.NetworkMode))
	assert.Empty(t, info.NetworkSettings.Networks, "no network sandbox")

	lines, res, err := s.run(t, ctx, "", RunLimits{})
	require.NoError(t, err)
	require.Equal(t, 0, res.ExitCode, "%s %q", res.Stderr, lines)
	host, err := os.Readlink("/proc/self/ns/net")
	require.NoError(t, err)
	require.Len(t, lines, 6, "%q", lines)
	assert.Equal(t, []string{"lo", "0x9", "over-loopback", "nameserver " + SandboxNameserver, "1"}, lines[:5], "lo only, up (IFF_UP|IFF_LOOPBACK)")
	assert.NotEqual(t, host, lines[5], "a network namespace of its own")
}

func TestIntegrationCopyDirOut(t *testing.T) {
	s := provision(t, strings.Join([]string{
		"mkdir -p /control/output/logs/deep",
		"echo manifest > /control/output/manifest.json",
		"echo log > /control/output/logs/deep/run.log",
		"chmod 777 /control/output/manifest.json",
		"mkdir -p /workspace/linky && echo x > /workspace/linky/a && ln -s /etc/passwd /workspace/linky/evil",
		"mkdir -p /workspace/many && for i in 1 2 3 4 5; do echo $i > /workspace/many/f$i; done",
	}, "\n"), nil)
	ctx := testCtx(t)
	_, res, err := s.run(t, ctx, "", RunLimits{})
	require.NoError(t, err)
	require.Equal(t, 0, res.ExitCode, res.Stderr)

	t.Run("regular tree", func(t *testing.T) {
		dst := filepath.Join(t.TempDir(), "output")
		require.NoError(t, s.c.CopyDirOut(ctx, s.container, messages.OutputDir, dst, 1<<20, 100))
		data, err := os.ReadFile(filepath.Join(dst, "manifest.json"))
		require.NoError(t, err)
		assert.Equal(t, "manifest\n", string(data))
		data, err = os.ReadFile(filepath.Join(dst, "logs/deep/run.log"))
		require.NoError(t, err)
		assert.Equal(t, "log\n", string(data))
		for path, mode := range map[string]os.FileMode{
			"":                  0o700 | os.ModeDir,
			"manifest.json":     0o600,
			"logs":              0o700 | os.ModeDir,
			"logs/deep":         0o700 | os.ModeDir,
			"logs/deep/run.log": 0o600,
		} {
			fi, err := os.Lstat(filepath.Join(dst, path))
			require.NoError(t, err)
			assert.Equal(t, mode, fi.Mode(), path)
		}
	})
	t.Run("symlink rejected", func(t *testing.T) {
		err := s.c.CopyDirOut(ctx, s.container, "/workspace/linky", t.TempDir(), 1<<20, 100)
		require.Error(t, err)
		assert.Equal(t, failure.SandboxOutputInvalid, failure.CodeOf(err), err)
	})
	t.Run("file count bounded", func(t *testing.T) {
		err := s.c.CopyDirOut(ctx, s.container, "/workspace/many", t.TempDir(), 1<<20, 4)
		assert.Equal(t, failure.SandboxOutputInvalid, failure.CodeOf(err), err)
		require.NoError(t, s.c.CopyDirOut(ctx, s.container, "/workspace/many", t.TempDir(), 1<<20, 5))
	})
	t.Run("bytes bounded", func(t *testing.T) {
		err := s.c.CopyDirOut(ctx, s.container, "/workspace/many", t.TempDir(), 9, 100)
		assert.Equal(t, failure.SandboxOutputInvalid, failure.CodeOf(err), err)
		require.NoError(t, s.c.CopyDirOut(ctx, s.container, "/workspace/many", t.TempDir(), 10, 100))
	})
	t.Run("missing directory", func(t *testing.T) {
		err := s.c.CopyDirOut(ctx, s.container, "/control/nothing-here", t.TempDir(), 1<<20, 100)
		assert.Equal(t, failure.SandboxOutputMissing, failure.CodeOf(err), err)
	})
}

func TestIntegrationTeardown(t *testing.T) {
	s := provision(t, "true", nil)
	ctx := testCtx(t)
	_, _, err := s.run(t, ctx, "", RunLimits{})
	require.NoError(t, err)

	report, err := s.c.Teardown(ctx, s.owner, "teardown")
	require.NoError(t, err)
	assert.True(t, messages.IsFullUUID(report.ReportID))
	assert.Equal(t, "teardown", report.Source)
	assert.Zero(t, report.Remaining)
	var removed []string
	for _, a := range report.Actions {
		assert.Equal(t, OutcomeRemoved, a.Outcome)
		assert.Equal(t, s.owner.AttemptID, a.DispatchAttemptID)
		assert.Equal(t, s.owner.FencingToken, a.FencingToken)
		assert.Equal(t, s.owner.RunnerInstanceID, a.RunnerInstanceID)
		assert.False(t, a.OccurredAt.IsZero())
		removed = append(removed, a.ResourceType+":"+a.ResourceID)
	}
	slices.Sort(removed)
	want := []string{
		"container:" + s.container,
		"volume:" + s.names.ControlVolume,
		"volume:" + s.names.SecretsVolume,
		"volume:" + s.names.WorkspaceVolume,
	}
	slices.Sort(want)
	assert.Equal(t, want, removed)
	assert.Zero(t, labelledCount(t, s.c, LabelAttemptID+"="+s.owner.AttemptID))

	again, err := s.c.Teardown(ctx, s.owner, "reaper")
	require.NoError(t, err)
	assert.Empty(t, again.Actions)
	assert.NotEqual(t, report.ReportID, again.ReportID)
}

func TestIntegrationTeardownLeavesForeignOwner(t *testing.T) {
	s := provision(t, "true", nil)
	ctx := testCtx(t)

	// Same attempt, another runner instance: not ours to remove.
	foreign := s.owner
	foreign.RunnerInstanceID = ids.NewUUID()
	foreignLabels := map[string]string{}
	for k, v := range s.labels {
		foreignLabels[k] = v
	}
	foreignLabels[LabelRunnerInstanceID] = foreign.RunnerInstanceID
	foreignVolume := s.names.Prefix + "-foreign"
	require.NoError(t, s.c.CreateVolume(ctx, foreignVolume, foreignLabels))
	t.Cleanup(func() {
		_, err := s.c.Teardown(ctx, foreign, "reaper")
		assert.NoError(t, err)
	})

	report, err := s.c.Teardown(ctx, s.owner, "teardown")
	require.Error(t, err)
	assert.Equal(t, failure.SandboxTeardownFailed, failure.CodeOf(err))
	assert.Equal(t, 1, report.Remaining)
	removed, failed := 0, 0
	for _, a := range report.Actions {
		switch a.Outcome {
		case OutcomeRemoved:
			removed++
			assert.NotEqual(t, foreignVolume, a.ResourceID)
		case OutcomeFailed:
			failed++
			assert.Equal(t, foreignVolume, a.ResourceID)
			assert.Equal(t, msgForeignRemains, a.Message)
		}
	}
	assert.Equal(t, 4, removed, "the container and its three volumes")
	assert.Equal(t, 1, failed)

	v, err := s.c.raw.VolumeInspect(ctx, foreignVolume)
	require.NoError(t, err, "the foreign volume must survive")
	assert.Equal(t, foreign.RunnerInstanceID, v.Labels[LabelRunnerInstanceID])

	managed, err := s.c.ListManaged(ctx)
	require.NoError(t, err)
	var owners []Ownership
	for _, obj := range managed {
		if o, ok := OwnershipFromLabels(obj.Labels); ok && o.RunnerID == s.owner.RunnerID {
			owners = append(owners, o)
			assert.False(t, obj.Created.IsZero(), "the engine's creation time is listed")
		}
	}
	assert.Equal(t, []Ownership{foreign}, owners)
	assert.True(t, MayReap(v.Labels, s.owner.RunnerID, nil))
	assert.False(t, MayReap(v.Labels, s.owner.RunnerID, func(id string) bool { return id == s.owner.AttemptID }))
}

func TestIntegrationCreateVolumeRefusesForeignLabels(t *testing.T) {
	c := requireEngine(t)
	ctx := testCtx(t)
	d := testDispatch()
	labels, err := Labels(d, "img", "contract")
	require.NoError(t, err)
	requireNoLeftovers(t, c, d.AttemptID())
	t.Cleanup(func() { _, _ = c.Teardown(ctx, OwnershipOf(d), "teardown") })
	names, err := NamesFor(d.AttemptID())
	require.NoError(t, err)
	require.NoError(t, c.CreateVolume(ctx, names.WorkspaceVolume, labels))
	require.NoError(t, c.CreateVolume(ctx, names.WorkspaceVolume, labels), "same labels: idempotent")
	other := map[string]string{}
	for k, v := range labels {
		other[k] = v
	}
	other[LabelFencingToken] = ids.NewUUID()
	err = c.CreateVolume(ctx, names.WorkspaceVolume, other)
	assert.Equal(t, failure.SandboxCreateFailed, failure.CodeOf(err), err)

	_, err = c.CreateIsolatedNetwork(ctx, names.Network, labels)
	require.NoError(t, err)
	_, err = c.CreateIsolatedNetwork(ctx, names.Network, labels)
	assert.Equal(t, failure.SandboxCreateFailed, failure.CodeOf(err), "a first-attempt name conflict is not adopted")
}

// A hostile task replaces /control/output with a symbolic link: to the
// secrets mount, or to a directory of its own. The host copies neither
// target: the output is refused and nothing lands in the host directory.
func TestIntegrationCopyDirOutFollowsNoLinkedOutputDirectory(t *testing.T) {
	for target, prepare := range map[string]string{
		"/run/forge-secrets": "",
		"/workspace/decoy":   "mkdir -p /workspace/decoy && echo stolen > /workspace/decoy/manifest.json",
	} {
		t.Run(target, func(t *testing.T) {
			s := provision(t, strings.Join([]string{
				"mkdir -p /control/output && echo manifest > /control/output/manifest.json",
				prepare,
				"rm -rf /control/output && ln -s " + target + " /control/output",
				"test -L /control/output && ls " + target + "/. >/dev/null",
			}, "\n"), nil)
			ctx := testCtx(t)
			_, res, err := s.run(t, ctx, "", RunLimits{})
			require.NoError(t, err)
			require.Equal(t, 0, res.ExitCode, res.Stderr)

			dst := filepath.Join(t.TempDir(), "output")
			err = s.c.CopyDirOut(ctx, s.container, messages.OutputDir, dst, 1<<20, 100)
			require.Error(t, err)
			assert.Equal(t, failure.SandboxOutputInvalid, failure.CodeOf(err), err)
			entries, _ := os.ReadDir(dst)
			assert.Empty(t, entries, "nothing of the link's target was copied")
		})
	}
}
