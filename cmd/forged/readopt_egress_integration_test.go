package main_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/dockerops"
	"github.com/forgedev/forged/internal/example"
	"github.com/forgedev/forged/internal/sandbox/egress"
	"github.com/forgedev/forged/internal/testkit/egresstest"
	"github.com/forgedev/forged/internal/testkit/enginetest"
	"github.com/forgedev/forged/messages"
)

// egressReadoptTask asks the proxy for a name it refuses, says so, then
// polls (bounded) the allowlisted stand-in through the proxy until its
// page marker reads marker-go (the test writes it once the restarted
// forged re-adopted the attempt and probed the proxy again), then asks
// for a port the proxy refuses.
const egressReadoptTask = `set -u
ask() { hp=${HTTPS_PROXY#http://}; (printf "$1"; sleep 1) | nc -w 5 "${hp%:*}" "${hp##*:}" 2>/dev/null | tr -d '\r'; }
ask 'CONNECT other.test:443 HTTP/1.1\r\nHost: other.test:443\r\n\r\n' | head -n 1 | grep -q '^HTTP/1.1 403' || { echo "unlisted not refused"; exit 4; }
echo before-asked
i=0
until ask 'CONNECT www.test:443 HTTP/1.1\r\nHost: www.test:443\r\n\r\nGET /marker HTTP/1.0\r\nHost: www.test\r\n\r\n' | grep -q marker-go; do i=$((i+1)); [ $i -lt 90 ] || { echo "no marker"; exit 5; }; done
ask 'CONNECT www.test:22 HTTP/1.1\r\nHost: www.test:22\r\n\r\n' | head -n 1 | grep -q '^HTTP/1.1 403' || { echo "port 22 not refused"; exit 6; }
echo after-asked > after.txt`

// execAll runs script in every stand-in server on network (the proxy is
// on it too).
func execAll(t *testing.T, engine *client.Client, network, script string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	list, err := engine.ContainerList(ctx, container.ListOptions{Filters: filters.NewArgs(filters.Arg("network", network), filters.Arg("label", "dev.forge.test=egress-standin"))})
	require.NoError(t, err)
	require.NotEmpty(t, list)
	for _, c := range list {
		created, err := engine.ContainerExecCreate(ctx, c.ID, container.ExecOptions{Cmd: []string{"/bin/busybox", "sh", "-c", script}})
		require.NoError(t, err)
		require.NoError(t, engine.ContainerExecStart(ctx, created.ID, container.ExecStartOptions{}))
		require.Eventually(t, func() bool {
			info, err := engine.ContainerExecInspect(ctx, created.ID)
			return err == nil && !info.Running && info.ExitCode == 0
		}, 20*time.Second, 50*time.Millisecond, "exec in the stand-in %s", c.ID)
	}
}

// guardRuleset lists the netns guard's table in the network namespace of
// the container target, from a helper of image with CAP_NET_ADMIN (the
// proxy itself has no capability to read or change it).
func guardRuleset(t *testing.T, engine *client.Client, target, image string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	created, err := engine.ContainerCreate(ctx, &container.Config{Image: image, User: "0:0", Labels: map[string]string{"dev.forge.test": "guard-list"},
		Entrypoint: []string{"nft", "list", "table", "inet", egress.GuardTable}},
		&container.HostConfig{NetworkMode: container.NetworkMode("container:" + target), CapDrop: []string{"ALL"}, CapAdd: []string{"NET_ADMIN"}}, nil, nil, "")
	require.NoError(t, err)
	defer func() {
		_ = engine.ContainerRemove(context.WithoutCancel(ctx), created.ID, container.RemoveOptions{Force: true})
	}()
	require.NoError(t, engine.ContainerStart(ctx, created.ID, container.StartOptions{}))
	waitC, errC := engine.ContainerWait(ctx, created.ID, container.WaitConditionNotRunning)
	select {
	case res := <-waitC:
		require.Zero(t, res.StatusCode, "nft list in the proxy's netns")
	case err := <-errC:
		require.NoError(t, err)
	}
	rc, err := engine.ContainerLogs(ctx, created.ID, container.LogsOptions{ShowStdout: true, ShowStderr: true})
	require.NoError(t, err)
	defer rc.Close()
	var out, stderr bytes.Buffer
	_, err = stdcopy.StdCopy(&out, &stderr, rc)
	require.NoError(t, err)
	return out.String()
}

// egressRequestsOf are the sandbox_egress_request events as
// "decision host:port".
func egressRequestsOf(t *testing.T, events []messages.Event) []string {
	t.Helper()
	var out []string
	for _, ev := range events {
		if ev.EventType != "sandbox_egress_request" || ev.Data == nil {
			continue
		}
		var r struct {
			Host     string `json:"host"`
			Port     int    `json:"port"`
			Decision string `json:"decision"`
		}
		require.NoError(t, json.Unmarshal([]byte(*ev.Data), &r))
		out = append(out, fmt.Sprintf("%s %s:%d", r.Decision, r.Host, r.Port))
	}
	return out
}

// TestKill9WhileTheEgressProxyRunsReadoptsIt kills forged with SIGKILL
// while a public_allowlist attempt's task runs, once the proxy's refusal
// of an unlisted name was delivered as an event. The restarted forged
// re-adopts the attempt with its proxy (probed again, its netns guard
// still loaded: the same table before and after), follows the proxy's
// access log again without reporting the refusal a second time, and
// reports the requests made while it was away and after. The task, told
// to go on through the proxy only after the re-adoption, succeeds;
// nothing is left.
func TestKill9WhileTheEgressProxyRunsReadoptsIt(t *testing.T) {
	engine := enginetest.Client(t)
	forged := enginetest.ForgedBinary(t)
	catalogue := serviceCatalogue(t)
	image := egresstest.EgressImage(t, filepath.Join("..", ".."))
	standIn := egresstest.Start(t, engine, example.BaseImage)
	base, stateRoot, lockRoot, runnerID := chaosRoots(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	repo := filepath.Join(base, "repo")
	require.NoError(t, example.CreateRepo(ctx, repo, example.RepoOptions{}))
	flags := []string{"--service-catalogue", catalogue, "--egress", "--egress-host", "www.test=" + standIn.Addr, "--egress-upstream-network", standIn.Network}
	dispatch := readoptDispatch(t, runnerID, repo, egressReadoptTask, time.Hour)
	dispatch.Sandbox.NetworkPolicy = messages.NetworkPolicy{Mode: messages.NetworkPublicAllowlist, AllowedHosts: []string{"www.test"}}
	dispatch.Sandbox.RequestedResources.RuntimeOverheadBytes = 384 << 20
	names, err := dockerops.NamesFor(dispatch.AttemptID())
	require.NoError(t, err)
	proxy := names.Prefix + "-egress"

	d := startDaemon(t, forged, stateRoot, lockRoot, flags...)
	d.submit(dispatch)
	followed := followAcross(t, d.socket, dispatch.AttemptID())
	d.waitWhere(dispatch.AttemptID(), "the refusal delivered", func(ev messages.Event) bool {
		return ev.EventType == "sandbox_egress_request" && strings.Contains(ev.Content, "other.test")
	})
	guard := guardRuleset(t, engine, proxy, image)
	require.Contains(t, guard, "table inet "+egress.GuardTable)
	d.kill9()
	assertAdoptionRecord(t, stateRoot, dispatch.AttemptID())

	restarted := startDaemon(t, forged, stateRoot, lockRoot, flags...)
	defer restarted.stop()
	readopted := false
	restarted.waitWhere(dispatch.AttemptID(), "the proxy probed again after the re-adoption", func(ev messages.Event) bool {
		readopted = readopted || ev.EventType == "sandbox_readopted"
		return readopted && ev.EventType == "sandbox_egress_ready"
	})
	assert.Equal(t, guard, guardRuleset(t, engine, proxy, image), "the guard's rules stay loaded in the proxy's netns across the restart")
	execAll(t, engine, standIn.Network, `echo marker-go > /tmp/www/marker`)

	got := <-followed
	require.NoError(t, got.err, "events %v", got.types)
	require.Equal(t, messages.StatusSucceeded, got.outcome.Status, "%s: %s; events %v", got.outcome.Code, got.outcome.Message, got.types)
	for i, seq := range got.seqs {
		require.Equal(t, i+1, seq, "the client got every event once, in sequence: %v", got.seqs)
	}
	assert.Equal(t, 1, count(got.types, "sandbox_readopted"), "events %v", got.types)
	assert.Equal(t, 2, count(got.types, "sandbox_egress_ready"), "the proxy was probed at start and again on re-adoption: %v", got.types)
	requests := egressRequestsOf(t, got.events)
	assert.Equal(t, 1, count(requests, "denied other.test:443"), "the refusal delivered before the kill is not reported again: %v", requests)
	assert.Equal(t, 1, count(requests, "denied www.test:22"), "the refusal after the re-adoption is reported: %v", requests)
	assert.Positive(t, count(requests, "allowed www.test:443"), "the polls through the proxy are reported: %v", requests)
	enginetest.AssertNoneLabelled(t, engine, dispatch.AttemptID())
	assertNoVolumeImages(t, stateRoot)
	assertNoLedgers(t, stateRoot)
}
