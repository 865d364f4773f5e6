package httpapi_test

import (
	"context"
	"encoding/json"
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

// sampleDirectory lists a member that answered (cut off from etcd, so
// draining) and one that did not.
func sampleDirectory() messages.FleetDirectory {
	at := time.Unix(1_800_000_000, 0).UTC()
	return messages.FleetDirectory{Member: true, Fleet: "trial", RunnerID: "r1", Members: []messages.FleetMember{
		{RunnerID: "r1", Address: "127.0.0.1:7951", MemberID: "trial@a", Slots: 2, FreeSlots: 1, Active: 1, Attempts: []string{"a1"},
			Draining: true, CutOff: true, PreflightAvailable: true, MemoryAvailableBytes: 1 << 30, CPUAvailableMillis: 2000, DiskFreeBytes: 1 << 35, UpdatedAt: &at},
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
