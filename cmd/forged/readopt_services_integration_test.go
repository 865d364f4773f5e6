package main_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/dockerops"
	"github.com/forgedev/forged/internal/example"
	"github.com/forgedev/forged/internal/sandbox/services"
	"github.com/forgedev/forged/internal/testkit/enginetest"
	"github.com/forgedev/forged/messages"
)

// serviceReadoptTask uses its redis before and after a restart of forged:
// it stores a key, says so, then waits (bounded) until the key marker
// reads "go" (the test sets it through the service once the restarted
// forged re-adopted the attempt and probed redis again), reads its first
// key back and commits what it read.
const serviceReadoptTask = `pw=$(cat "$FORGE_REDIS_PASSWORD_FILE")
r() { printf 'AUTH %s\r\n%s\r\nQUIT\r\n' "$pw" "$1" | nc -w 5 "$REDIS_HOST" "$REDIS_PORT" | tr -d '\r'; }
[ "$(r 'SET before kept-across-restart' | sed -n 2p)" = "+OK" ] || { echo "redis SET failed"; exit 3; }
echo before-written
i=0
until [ "$(r 'GET marker' | sed -n 3p)" = go ]; do i=$((i+1)); [ $i -lt 900 ] || { echo "no marker"; exit 4; }; sleep 0.2; done
r 'GET before' | sed -n 3p > after.txt
echo after-read`

const redisContract = "version: 1\nworkingDirectory: /workspace\nservices:\n  - type: redis\ncaches: []\n"

// waitWhere follows the attempt's events until pred holds for one; pred
// sees every event in order from the first.
func (d *daemon) waitWhere(attemptID, what string, pred func(messages.Event) bool) {
	d.t.Helper()
	var seen []string
	arrived := errors.New("arrived")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out, err := d.api.Events(ctx, attemptID, func(ev messages.Event) error {
		seen = append(seen, ev.EventType)
		if pred(ev) {
			return arrived
		}
		return nil
	})
	switch {
	case errors.Is(err, arrived):
	case err == nil:
		d.t.Fatalf("attempt finished (%s: %s) before %s; events %v", out.Code, out.Message, what, seen)
	default:
		d.t.Fatalf("stream ended before %s (%v); events %v", what, err, seen)
	}
}

// redisCommand runs redis-cli in the attempt's redis container, as the
// service's user with the service's own password file, and returns its
// output.
func redisCommand(t *testing.T, engine *client.Client, containerName string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	script := `redis-cli -a "$(cat /run/forge-secrets/redis-password)" --no-auth-warning "$@"`
	created, err := engine.ContainerExecCreate(ctx, containerName, container.ExecOptions{
		Cmd: append([]string{"/bin/sh", "-c", script, "sh"}, args...), AttachStdout: true, AttachStderr: true})
	require.NoError(t, err)
	att, err := engine.ContainerExecAttach(ctx, created.ID, container.ExecAttachOptions{})
	require.NoError(t, err)
	defer att.Close()
	var out, stderr bytes.Buffer
	_, err = stdcopy.StdCopy(&out, &stderr, att.Reader)
	require.NoError(t, err)
	info, err := engine.ContainerExecInspect(ctx, created.ID)
	require.NoError(t, err)
	require.Zero(t, info.ExitCode, "redis-cli %v: %s %s", args, out.String(), stderr.String())
	return out.String()
}

// serviceReadoptSetup is a repository declaring redis, its catalogue, and
// a dispatch of serviceReadoptTask.
func serviceReadoptSetup(t *testing.T) (catalogue, stateRoot, lockRoot, repo string, dispatch *messages.Dispatch) {
	t.Helper()
	catalogue = serviceCatalogue(t)
	base, stateRoot, lockRoot, runnerID := chaosRoots(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	repo = filepath.Join(base, "repo")
	require.NoError(t, example.CreateRepo(ctx, repo, example.RepoOptions{Contract: redisContract}))
	dispatch = readoptDispatch(t, runnerID, repo, serviceReadoptTask, time.Hour)
	dispatch.Sandbox.RequestedResources.ServiceMemoryLimitBytes = 1 << 30
	return catalogue, stateRoot, lockRoot, repo, dispatch
}

// TestKill9WhileServicesRunReadoptsThem kills forged with SIGKILL while an
// attempt's task runs beside its redis, after the task stored a key. The
// restarted forged re-adopts the attempt with its service: it finds the
// redis container, probes it again (sandbox_service_ready after
// sandbox_readopted) and watches it. Only then does the test set the
// marker the task waits for, through the same redis; the task reads its
// first key back from the service it used before the kill, and the
// attempt succeeds with that in its imported result, its outcome naming
// the isolation the ledger recorded before the kill. Nothing is left. It
// runs under runc, and under the gvisor floor with the services under
// gVisor too (--gvisor-services).
func TestKill9WhileServicesRunReadoptsThem(t *testing.T) {
	t.Run("runc", func(t *testing.T) { kill9WhileServicesRun(t, messages.IsolationRunc, "", "runc") })
	t.Run("gvisor-services", func(t *testing.T) {
		kill9WhileServicesRun(t, messages.IsolationGVisor, "runsc-net", "runsc-net", "--isolation", "gvisor", "--gvisor-services")
	})
}

// kill9WhileServicesRun is TestKill9WhileServicesRunReadoptsThem with the
// daemon's extra flags: the outcome names isolation and workerRuntime,
// and the redis container ran under serviceRuntime.
func kill9WhileServicesRun(t *testing.T, isolation, workerRuntime, serviceRuntime string, flags ...string) {
	engine := enginetest.Client(t)
	forged := enginetest.ForgedBinary(t)
	catalogue, stateRoot, lockRoot, repo, dispatch := serviceReadoptSetup(t)
	names, err := dockerops.NamesFor(dispatch.AttemptID())
	require.NoError(t, err)
	redis := services.ContainerName(names.Prefix, services.Redis)

	args := append([]string{"--service-catalogue", catalogue}, flags...)
	d := startDaemon(t, forged, stateRoot, lockRoot, args...)
	d.submit(dispatch)
	followed := followAcross(t, d.socket, dispatch.AttemptID())
	d.waitWhere(dispatch.AttemptID(), "the task's key in redis", func(ev messages.Event) bool {
		return ev.EventType == "task_output" && strings.Contains(ev.Content, "before-written")
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	info, err := engine.ContainerInspect(ctx, redis)
	require.NoError(t, err)
	assert.Equal(t, serviceRuntime, info.HostConfig.Runtime, "redis's runtime")
	d.kill9()
	assertAdoptionRecord(t, stateRoot, dispatch.AttemptID())
	assert.Equal(t, "kept-across-restart\n", redisCommand(t, engine, redis, "GET", "before"), "the task's key is in redis while forged is down")

	restarted := startDaemon(t, forged, stateRoot, lockRoot, args...)
	defer restarted.stop()
	readopted := false
	restarted.waitWhere(dispatch.AttemptID(), "redis probed again after the re-adoption", func(ev messages.Event) bool {
		readopted = readopted || ev.EventType == "sandbox_readopted"
		return readopted && ev.EventType == "sandbox_service_ready"
	})
	assert.Equal(t, "OK\n", redisCommand(t, engine, redis, "SET", "marker", "go"))

	got := <-followed
	require.NoError(t, got.err, "events %v", got.types)
	require.Equal(t, messages.StatusSucceeded, got.outcome.Status, "%s: %s; events %v", got.outcome.Code, got.outcome.Message, got.types)
	assert.Equal(t, isolation, got.outcome.Isolation, "the re-adopted attempt's outcome names the isolation from its ledger")
	assert.Equal(t, workerRuntime, got.outcome.WorkerRuntime)
	for i, seq := range got.seqs {
		require.Equal(t, i+1, seq, "the client got every event once, in sequence: %v", got.seqs)
	}
	assert.Equal(t, 1, count(got.types, "sandbox_readopted"), "events %v", got.types)
	assert.Equal(t, 2, count(got.types, "sandbox_service_ready"), "redis was probed at start and again on re-adoption: %v", got.types)
	assert.Equal(t, 1, count(got.types, "task_started"), "events %v", got.types)
	for _, ev := range got.events {
		if ev.EventType == "sandbox_readopted" {
			require.NotNil(t, ev.Data)
			var data struct {
				SidecarContainers []map[string]string `json:"sidecarContainers"`
			}
			require.NoError(t, json.Unmarshal([]byte(*ev.Data), &data))
			require.Len(t, data.SidecarContainers, 1, "the re-adoption event names the re-attached service: %s", *ev.Data)
			assert.Equal(t, "service:redis", data.SidecarContainers[0]["role"])
			assert.Equal(t, redis, data.SidecarContainers[0]["name"])
		}
	}
	require.NotEmpty(t, got.outcome.ResultCommitSHA, "no result commit")
	show, err := exec.Command("git", "-C", repo, "show", got.outcome.ResultCommitSHA+":after.txt").CombinedOutput()
	require.NoError(t, err, "%s", show)
	assert.Equal(t, "kept-across-restart\n", string(show), "the task read back, after the restart, what it stored in redis before it")
	enginetest.AssertNoneLabelled(t, engine, dispatch.AttemptID())
	assertNoVolumeImages(t, stateRoot)
	assertNoLedgers(t, stateRoot)
}

// TestServiceRemovedWhileDownEndsTheReadoptedAttempt: the attempt's redis
// container is removed while no forged runs. The restarted forged
// re-adopts the attempt, finds its service gone, and ends it with
// sandbox_service_failed naming the removal; nothing is left.
func TestServiceRemovedWhileDownEndsTheReadoptedAttempt(t *testing.T) {
	engine := enginetest.Client(t)
	forged := enginetest.ForgedBinary(t)
	catalogue, stateRoot, lockRoot, _, dispatch := serviceReadoptSetup(t)
	names, err := dockerops.NamesFor(dispatch.AttemptID())
	require.NoError(t, err)

	d := startDaemon(t, forged, stateRoot, lockRoot, "--service-catalogue", catalogue)
	d.submit(dispatch)
	d.waitWhere(dispatch.AttemptID(), "the task's key in redis", func(ev messages.Event) bool {
		return ev.EventType == "task_output" && strings.Contains(ev.Content, "before-written")
	})
	d.kill9()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, engine.ContainerRemove(ctx, services.ContainerName(names.Prefix, services.Redis), container.RemoveOptions{Force: true}))

	restarted := startDaemon(t, forged, stateRoot, lockRoot, "--service-catalogue", catalogue)
	defer restarted.stop()
	got := restarted.follow(dispatch.AttemptID())
	require.Contains(t, got.types, "sandbox_readopted", "events %v", got.types)
	assert.Equal(t, messages.StatusFailed, got.outcome.Status)
	assert.Equal(t, "sandbox_service_failed", got.outcome.Code, got.outcome.Message)
	assert.Contains(t, got.outcome.Message, "service redis was removed while forged was away")
	enginetest.AssertNoneLabelled(t, engine, dispatch.AttemptID())
	assertNoVolumeImages(t, stateRoot)
	assertNoLedgers(t, stateRoot)
}

// TestServicesOfAWorkerThatFinishedWhileDownAreNotProbed: the task
// finishes while no forged runs (the test sets its marker through redis
// while forged is down), and its redis is then removed. The restarted
// forged re-adopts the finished attempt without re-attaching the service
// that served a task now over: it collects and imports the result, and
// removes everything.
func TestServicesOfAWorkerThatFinishedWhileDownAreNotProbed(t *testing.T) {
	engine := enginetest.Client(t)
	forged := enginetest.ForgedBinary(t)
	catalogue, stateRoot, lockRoot, repo, dispatch := serviceReadoptSetup(t)
	names, err := dockerops.NamesFor(dispatch.AttemptID())
	require.NoError(t, err)
	redis := services.ContainerName(names.Prefix, services.Redis)

	d := startDaemon(t, forged, stateRoot, lockRoot, "--service-catalogue", catalogue)
	d.submit(dispatch)
	d.waitWhere(dispatch.AttemptID(), "the task's key in redis", func(ev messages.Event) bool {
		return ev.EventType == "task_output" && strings.Contains(ev.Content, "before-written")
	})
	d.kill9()
	assert.Equal(t, "OK\n", redisCommand(t, engine, redis, "SET", "marker", "go"))
	waitWorkerStopped(t, engine, names.AttemptHex)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, engine.ContainerRemove(ctx, redis, container.RemoveOptions{Force: true}))

	restarted := startDaemon(t, forged, stateRoot, lockRoot, "--service-catalogue", catalogue)
	defer restarted.stop()
	got := restarted.follow(dispatch.AttemptID())
	require.Contains(t, got.types, "sandbox_readopted", "events %v", got.types)
	require.Equal(t, messages.StatusSucceeded, got.outcome.Status, "%s: %s; events %v", got.outcome.Code, got.outcome.Message, got.types)
	assert.Equal(t, 1, count(got.types, "sandbox_service_ready"), "redis was probed at start only: %v", got.types)
	show, err := exec.Command("git", "-C", repo, "show", got.outcome.ResultCommitSHA+":after.txt").CombinedOutput()
	require.NoError(t, err, "%s", show)
	assert.Equal(t, "kept-across-restart\n", string(show))
	enginetest.AssertNoneLabelled(t, engine, dispatch.AttemptID())
	assertNoVolumeImages(t, stateRoot)
	assertNoLedgers(t, stateRoot)
}
