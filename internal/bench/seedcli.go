package bench

// This is the one file of the repository that runs the docker CLI: it is
// the seed's way of driving an attempt, measured as a baseline. Product
// code never runs it (scripts/test.sh refuses it everywhere else).

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/forgedev/forged/dockerops"
	"github.com/forgedev/forged/internal/kit/text"
	"github.com/forgedev/forged/messages"
)

// seedStatsInterval is the seed's memory sampling period (`docker stats
// --no-stream` once a second).
const seedStatsInterval = time.Second

// dockerCLI runs one docker CLI command, as the seed's docker() helper
// did: a fork per call, with a deadline, stdin optional.
func dockerCLI(ctx context.Context, timeout time.Duration, stdin []byte, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "docker", args...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("docker %s: %w: %s", strings.Join(args[:min(len(args), 2)], " "), err, text.EllipsisTail(stderr.String(), 500))
	}
	return stdout.String(), nil
}

func labelArgs(labels map[string]string) []string {
	var args []string
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		args = append(args, "--label", k+"="+labels[k])
	}
	return args
}

// seedCLIAttempt drives one attempt the way the seed did, fork by fork, in
// the seed's order, with a cached image:
//
//  1. image inspect (the cache lookup)
//  2. network create --internal, then volume create ×3, one after another
//  3. docker run --rm of a root init container that creates and chowns the
//     control directories (the seed's initializeVolumes)
//  4. docker create of the worker, docker cp of the input bundle
//  5. docker start --attach --interactive with the start packet on stdin,
//     while `docker stats --no-stream` samples memory once a second
//  6. container inspect of the state, docker cp of /control/output
//  7. the seed's teardown: ps by attempt label, then per resource an
//     inspect of its labels and its removal (stop then rm for the
//     container), then ps / network ls / volume ls for the remainder.
func seedCLIAttempt(ctx context.Context, imageID string, a *sandboxAttempt) (err error) {
	n := a.names
	labels := labelArgs(a.labels)
	defer func() {
		// The seed's teardown runs whatever happened (finally).
		err = errors.Join(err, seedCLITeardown(context.WithoutCancel(ctx), a))
	}()
	if _, err := dockerCLI(ctx, 15*time.Second, nil, "image", "inspect", imageID, "--format", "{{.Id}}"); err != nil {
		return err
	}
	if _, err := dockerCLI(ctx, 30*time.Second, nil, append(append([]string{"network", "create", "--internal"}, labels...), n.Network)...); err != nil {
		return err
	}
	for _, v := range []string{n.WorkspaceVolume, n.ControlVolume, n.SecretsVolume} {
		if _, err := dockerCLI(ctx, 30*time.Second, nil, append(append([]string{"volume", "create"}, labels...), v)...); err != nil {
			return err
		}
	}
	initArgs := append([]string{"run", "--rm"}, labels...)
	initArgs = append(initArgs, "--network", "none", "--read-only", "--cap-drop", "ALL", "--cap-add", "CHOWN", "--cap-add", "FOWNER",
		"--security-opt", "no-new-privileges", "--pids-limit", "64", "--memory", "128m", "--memory-swap", "128m",
		"--cpus", "0.25", "--log-driver", "none", "--user", "0", "--entrypoint", "/bin/sh",
		"--volume", n.WorkspaceVolume+":/workspace", "--volume", n.ControlVolume+":/control", imageID,
		"-c", "mkdir -p /control/input /control/output && chown 10001:10001 /workspace /control/output /control/input /control && chmod 700 /workspace /control/output /control/input /control")
	if _, err := dockerCLI(ctx, time.Minute, nil, initArgs...); err != nil {
		return err
	}
	out, err := dockerCLI(ctx, time.Minute, nil, seedCreateArgs(imageID, a)...)
	if err != nil {
		return err
	}
	containerID := strings.TrimSpace(out)
	if _, err := dockerCLI(ctx, time.Minute, nil, "cp", a.bundle, containerID+":"+messages.InputBundlePath); err != nil {
		return err
	}
	stopStats := seedStatsSampler(ctx, containerID)
	_, runErr := dockerCLI(ctx, 10*time.Minute, a.packet, "start", "--attach", "--interactive", containerID)
	stopStats()
	if _, err := dockerCLI(ctx, 15*time.Second, nil, "container", "inspect", containerID, "--format", "{{json .State}}"); err != nil {
		return err
	}
	if runErr != nil {
		return runErr
	}
	if _, err := dockerCLI(ctx, time.Minute, nil, "cp", containerID+":"+messages.OutputDir+"/.", a.outDir); err != nil {
		return err
	}
	return a.checkOutput()
}

// seedCreateArgs is `docker create` of the worker with the settings forged
// gives it (dockerops.WorkerContainerConfig), in CLI form, on the seed's
// internal network (forged's worker has none since it needs none).
func seedCreateArgs(imageID string, a *sandboxAttempt) []string {
	n := a.names
	r := a.d.Sandbox.RequestedResources
	scratch := dockerops.ScratchTmpfsBytes(r.WorkerMemoryLimitBytes)
	args := append([]string{"create", "--name", n.Container}, labelArgs(a.labels)...)
	for _, e := range a.env {
		args = append(args, "--env", e)
	}
	args = append(args, "--interactive", "--user", fmt.Sprintf("%d:%d", messages.WorkerUID, messages.WorkerGID),
		"--workdir", messages.WorkspaceDir, "--entrypoint", messages.WorkerBinaryPath,
		"--network", n.Network, "--read-only", "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
		"--init", "--log-driver", "none", "--stop-timeout", "10", "--dns", dockerops.SandboxNameserver,
		"--sysctl", "net.ipv6.conf.all.disable_ipv6=1", "--sysctl", "net.ipv6.conf.default.disable_ipv6=1",
		"--tmpfs", fmt.Sprintf("%s:rw,nosuid,nodev,exec,size=%dm,uid=10001,gid=10001,mode=1777", messages.TempDir, scratch>>20),
		"--tmpfs", fmt.Sprintf("%s:rw,nosuid,nodev,exec,size=%dm,uid=10001,gid=10001,mode=0700", messages.HomeDir, scratch>>20),
		"--tmpfs", "/run/forge:rw,nosuid,nodev,noexec,size=32m,uid=10001,gid=10001",
		"--mount", "type=volume,src="+n.WorkspaceVolume+",dst="+messages.WorkspaceDir,
		"--mount", "type=volume,src="+n.ControlVolume+",dst="+messages.ControlDir,
		"--mount", "type=volume,src="+n.SecretsVolume+",dst="+dockerops.SecretsDir+",readonly",
		"--memory", strconv.FormatInt(r.WorkerMemoryLimitBytes, 10), "--memory-swap", strconv.FormatInt(r.WorkerMemoryLimitBytes, 10),
		"--cpus", strconv.FormatFloat(float64(r.CPUMillis)/1000, 'f', 3, 64), "--pids-limit", strconv.FormatInt(r.PIDs, 10),
		"--ulimit", "nofile=4096:4096", "--ulimit", "core=0:0", imageID, "worker")
	return args
}

// seedStatsSampler runs `docker stats --no-stream` once a second until
// stopped, as the seed's peak memory sampler did.
func seedStatsSampler(ctx context.Context, containerID string) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			_, _ = dockerCLI(ctx, 5*time.Second, nil, "stats", "--no-stream", "--format", "{{json .}}", containerID)
			select {
			case <-ctx.Done():
			case <-time.After(seedStatsInterval):
			}
		}
	}()
	return func() { cancel(); wg.Wait() }
}

// seedCLITeardown is the seed's teardown by exact labels.
func seedCLITeardown(ctx context.Context, a *sandboxAttempt) error {
	n := a.names
	filter := "label=" + dockerops.LabelAttemptID + "=" + a.d.AttemptID()
	var errs []error
	out, err := dockerCLI(ctx, 30*time.Second, nil, "ps", "-aq", "--filter", filter)
	if err != nil {
		return err
	}
	for _, id := range strings.Fields(out) {
		if _, err := dockerCLI(ctx, 15*time.Second, nil, "container", "inspect", id); err != nil {
			errs = append(errs, err)
			continue
		}
		_, _ = dockerCLI(ctx, 20*time.Second, nil, "container", "stop", "--time", "10", id)
		if _, err := dockerCLI(ctx, 30*time.Second, nil, "container", "rm", "--force", id); err != nil {
			errs = append(errs, err)
		}
	}
	if _, err := dockerCLI(ctx, 15*time.Second, nil, "network", "inspect", n.Network); err == nil {
		if _, err := dockerCLI(ctx, 30*time.Second, nil, "network", "rm", n.Network); err != nil {
			errs = append(errs, err)
		}
	}
	for _, v := range []string{n.WorkspaceVolume, n.ControlVolume, n.SecretsVolume} {
		if _, err := dockerCLI(ctx, 15*time.Second, nil, "volume", "inspect", v); err == nil {
			if _, err := dockerCLI(ctx, 30*time.Second, nil, "volume", "rm", "--force", v); err != nil {
				errs = append(errs, err)
			}
		}
	}
	remaining := make([]string, 3)
	var wg sync.WaitGroup
	for i, args := range [][]string{{"ps", "-aq", "--filter", filter}, {"network", "ls", "-q", "--filter", filter}, {"volume", "ls", "-q", "--filter", filter}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := dockerCLI(ctx, 30*time.Second, nil, args...)
			if err != nil {
				out = "list failed: " + err.Error()
			}
			remaining[i] = strings.TrimSpace(out)
		}()
	}
	wg.Wait()
	for _, r := range remaining {
		if r != "" {
			errs = append(errs, fmt.Errorf("attempt %s: left behind: %s", a.d.AttemptID(), r))
		}
	}
	return errors.Join(errs...)
}

// seedCLIReap removes every resource of the runner the way the seed's
// label reaper did: list each kind, then one by one an inspect of the
// labels and the removal (stop then rm for a container).
func seedCLIReap(ctx context.Context, runnerID string) (int, error) {
	filter := "label=" + dockerops.LabelRunnerID + "=" + runnerID
	removed := 0
	var errs []error
	for _, kind := range []string{"container", "network", "volume"} {
		list := []string{kind, "ls", "-q", "--filter", filter}
		if kind == "container" {
			list = []string{"ps", "-aq", "--filter", filter}
		}
		out, err := dockerCLI(ctx, 30*time.Second, nil, list...)
		if err != nil {
			return removed, err
		}
		for _, id := range strings.Fields(out) {
			if _, err := dockerCLI(ctx, 15*time.Second, nil, kind, "inspect", id); err != nil {
				errs = append(errs, err)
				continue
			}
			var rm []string
			switch kind {
			case "container":
				_, _ = dockerCLI(ctx, 20*time.Second, nil, "container", "stop", "--time", "10", id)
				rm = []string{"container", "rm", "--force", id}
			case "volume":
				rm = []string{"volume", "rm", "--force", id}
			default:
				rm = []string{"network", "rm", id}
			}
			if _, err := dockerCLI(ctx, 30*time.Second, nil, rm...); err != nil {
				errs = append(errs, err)
				continue
			}
			removed++
		}
	}
	return removed, errors.Join(errs...)
}
