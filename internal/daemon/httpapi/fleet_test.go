package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/daemon/httpapi"
	"github.com/forgedev/forged/internal/daemon/metrics"
	"github.com/forgedev/forged/internal/daemon/runner"
	"github.com/forgedev/forged/messages"
)

// fleetRunner is a daemon that is a member of a fleet: it answers the
// directory it holds and counts the reads.
type fleetRunner struct {
	*contractRunner
	dir   messages.FleetDirectory
	reads atomic.Int64
}

func (f *fleetRunner) FleetDirectory(context.Context) messages.FleetDirectory {
	f.reads.Add(1)
	return f.dir
}

// InspectMember knows r2's tree; "gone" is listed but does not answer.
func (f *fleetRunner) InspectMember(_ context.Context, runnerID string) ([]messages.InspectReply, error) {
	f.reads.Add(1)
	switch runnerID {
	case "r2":
		return []messages.InspectReply{{PID: "supervisor", Kind: "supervisor", Phase: "running", Facts: map[string]string{"slots": "2"}}}, nil
	case "gone":
		return nil, errors.New("fleet: the member gone at 127.0.0.1:7952 did not answer")
	}
	return nil, failure.New(failure.FleetMemberUnknown, "no member of fleet %q has runner id %s", "trial", runnerID)
}

// sampleDirectory lists a member that answered (cut off from etcd, so
// draining) and one that did not.
func sampleDirectory() messages.FleetDirectory {
	at := time.Unix(1_800_000_000, 0).UTC()
	return messages.FleetDirectory{Member: true, Fleet: "trial", RunnerID: "r1", Members: []messages.FleetMember{
		{RunnerID: "r1", Address: "127.0.0.1:7951", MemberID: "trial@a", Slots: 2, FreeSlots: 1, Active: 1, Attempts: []string{"a1"},
			Draining: true, CutOff: true, PreflightAvailable: true, MemoryAvailableBytes: 1 << 30, CPUAvailableMillis: 2000, DiskFreeBytes: 1 << 35, UpdatedAt: &at,
			Headroom: &messages.Reservation{MemoryBytes: 1 << 29, CPUMillis: 1000}, RunnerInstanceID: "i1",
			Services:   []messages.FleetImage{{Name: "postgres", Ref: "forged-services/postgres:1", ImageID: "sha256:p"}},
			Toolchains: []messages.FleetImage{{Name: "go", Ref: "forged-images/go:1", ImageID: "sha256:g"}}},
		{Address: "127.0.0.1:7952", MemberID: "trial@b", Attempts: []string{}, Error: "did not answer within 5s"},
	}}
}

// TestFleetDirectoryThroughTheAPI: GET /v1/fleet answers the member's
// directory as it read it, a daemon running alone says it is no member,
// and the route is guarded and read-only like every GET.
func TestFleetDirectoryThroughTheAPI(t *testing.T) {
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	f := &fleetRunner{contractRunner: &contractRunner{consoleRunner: consoleRunner{metrics: metrics.New()}, logs: runner.NewLogs(0)}, dir: sampleDirectory()}
	member := httptest.NewServer(httpapi.Handler(f, logger))
	t.Cleanup(member.Close)
	alone, _ := newConsoleServer(t)

	get := func(url string, header map[string]string) (*http.Response, []byte) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, url, nil)
		require.NoError(t, err)
		for k, v := range header {
			if k == "Host" {
				req.Host = v
			}
			req.Header.Set(k, v)
		}
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer res.Body.Close()
		body, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		return res, body
	}

	res, body := get(member.URL+"/v1/fleet", nil)
	require.Equal(t, http.StatusOK, res.StatusCode, string(body))
	assert.Equal(t, "no-cache", res.Header.Get("Cache-Control"))
	var dir messages.FleetDirectory
	require.NoError(t, json.Unmarshal(body, &dir))
	assert.Equal(t, sampleDirectory(), dir)
	assert.Contains(t, string(body), `"cutOff":true`)
	assert.Equal(t, int64(1), f.reads.Load())

	res, body = get(alone.URL+"/v1/fleet", nil)
	require.Equal(t, http.StatusOK, res.StatusCode)
	assert.JSONEq(t, `{"member":false,"members":[]}`, string(body))

	// The guard stops a foreign page or Host before the directory is read.
	res, body = get(member.URL+"/v1/fleet", map[string]string{"Origin": "http://evil.example"})
	assert.Equal(t, http.StatusForbidden, res.StatusCode, string(body))
	res, body = get(member.URL+"/v1/fleet", map[string]string{"Host": "evil.example"})
	assert.Equal(t, http.StatusMisdirectedRequest, res.StatusCode, string(body))
	// Read-only: no other method is served.
	req, err := http.NewRequest(http.MethodPost, member.URL+"/v1/fleet", strings.NewReader("{}"))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(messages.APIClientHeader, messages.APIClientValue)
	post, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	post.Body.Close()
	assert.Equal(t, http.StatusMethodNotAllowed, post.StatusCode)
	assert.Equal(t, int64(1), f.reads.Load(), "refused requests never read the directory")
}

// TestInspectMemberThroughTheAPI: GET /v1/fleet/members/{runnerId}/inspect
// answers the member's tree as the fleet read it, an unknown runner id
// (or a daemon running alone) fleet_member_unknown, a member that does not
// answer 503; guarded like every GET.
func TestInspectMemberThroughTheAPI(t *testing.T) {
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	f := &fleetRunner{contractRunner: &contractRunner{consoleRunner: consoleRunner{metrics: metrics.New()}, logs: runner.NewLogs(0)}, dir: sampleDirectory()}
	member := httptest.NewServer(httpapi.Handler(f, logger))
	t.Cleanup(member.Close)
	alone, _ := newConsoleServer(t)
	get := func(url string, header map[string]string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, url, nil)
		require.NoError(t, err)
		for k, v := range header {
			req.Header.Set(k, v)
		}
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer res.Body.Close()
		body, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		return res.StatusCode, string(body)
	}
	status, body := get(member.URL+"/v1/fleet/members/r2/inspect", nil)
	require.Equal(t, http.StatusOK, status, body)
	var tree []messages.InspectReply
	require.NoError(t, json.Unmarshal([]byte(body), &tree))
	require.Len(t, tree, 1)
	assert.Equal(t, "2", tree[0].Facts["slots"])

	status, body = get(member.URL+"/v1/fleet/members/r9/inspect", nil)
	assert.Equal(t, http.StatusNotFound, status)
	assert.Contains(t, body, `"code":"fleet_member_unknown"`)
	status, body = get(member.URL+"/v1/fleet/members/gone/inspect", nil)
	assert.Equal(t, http.StatusServiceUnavailable, status)
	assert.Contains(t, body, "did not answer")
	status, body = get(alone.URL+"/v1/fleet/members/r2/inspect", nil)
	assert.Equal(t, http.StatusNotFound, status)
	assert.Contains(t, body, `"code":"fleet_member_unknown"`)

	before := f.reads.Load()
	status, _ = get(member.URL+"/v1/fleet/members/r2/inspect", map[string]string{"Origin": "http://evil.example"})
	assert.Equal(t, http.StatusForbidden, status)
	assert.Equal(t, before, f.reads.Load(), "a foreign page never reaches the cluster")
}
