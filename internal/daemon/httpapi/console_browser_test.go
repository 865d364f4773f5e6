package httpapi_test

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/internal/daemon/httpapi"
	"github.com/forgedev/forged/internal/daemon/metrics"
	"github.com/forgedev/forged/internal/daemon/runner"
	"github.com/forgedev/forged/internal/example"
	"github.com/forgedev/forged/internal/testkit/enginetest"
	"github.com/forgedev/forged/internal/testkit/workerbin"
	"github.com/forgedev/forged/messages"
)

// chromiumPath finds Debian's chromium (scripts/test.sh installs it through
// scripts/ensure-docker.sh chromium); with CI=true its absence fails the
// test instead of skipping it.
func chromiumPath(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true but chromium is not installed (scripts/test.sh installs it)")
		}
		t.Skip("chromium is not installed: the console is not loaded in a browser (scripts/test.sh installs it)")
	}
	return path
}

// artifactDir is where tests keep what a person may want to look at
// afterwards: $FORGED_TEST_ARTIFACTS, else TMPDIR/forged-test-artifacts.
func artifactDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("FORGED_TEST_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "forged-test-artifacts")
	}
	require.NoError(t, os.MkdirAll(dir, 0o755))
	return dir
}

// TestConsoleInHeadlessChromium loads /console/ in headless Chromium
// against a runner running a real attempt: the supervision tree appears,
// the attempt's actor shows up while it runs, its phases advance to the
// end in the timeline, the page's escaping holds in the browser, and a
// screenshot is kept.
func TestConsoleInHeadlessChromium(t *testing.T) {
	chromium := chromiumPath(t)
	engine := enginetest.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	r, err := runner.New(ctx, runner.Config{
		StateRoot: t.TempDir(), LockRoot: t.TempDir(), WorkerBinary: workerbin.Path(t), Slots: 1,
		AllowRootful: true, Capacity: example.SmallHostCapacity(),
	})
	require.NoError(t, err)
	defer r.Close()
	_, err = example.BuildBaseImage(ctx, r.Docker(), "/bin/busybox")
	require.NoError(t, err)
	repo := filepath.Join(t.TempDir(), "repo")
	require.NoError(t, example.CreateRepo(ctx, repo, example.RepoOptions{}))

	// The browser reaches the API over loopback TCP (it cannot dial a unix
	// socket); the handler is the daemon's.
	srv := httptest.NewServer(httpapi.Handler(r, slog.New(slog.NewTextHandler(io.Discard, nil))))
	defer srv.Close()

	alloc, cancelAlloc := chromedp.NewExecAllocator(ctx, append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.WindowSize(1400, 1000),
		chromedp.UserDataDir(t.TempDir()))...)
	defer cancelAlloc()
	browser, cancelBrowser := chromedp.NewContext(alloc)
	defer cancelBrowser()
	require.NoError(t, chromedp.Do(browser,
		chromedp.Navigate(srv.URL+"/console/"),
		chromedp.WaitVisible(chromedp.CSS(`.actor[data-kind="supervisor"]`)),
	))

	// The page's escaping, in the browser itself.
	escaped, err := chromedp.Run(browser, chromedp.Evaluate[string](`esc("a\u001b[2J\u0007b\u202e")`))
	require.NoError(t, err)
	assert.Equal(t, `a\x1b[2J\x07b\u202e`, escaped)

	d, err := example.NewDispatch(example.DispatchOptions{Project: testProject, RunnerID: r.RunnerID(), RepoPath: repo,
		Argv: []string{"/bin/sh", "-c", `printf 'tty \033[2J<b>bold</b>\n'; sleep 3; echo hi > hello.txt`}, Timeout: 120})
	require.NoError(t, err)
	defer enginetest.AssertNoneLabelled(t, engine, d.AttemptID())
	reply, err := r.Submit(d)
	require.NoError(t, err)
	require.True(t, reply.Accepted, "%+v", reply)

	// Watch the page: the attempt's actor appears under the supervisor,
	// and its timeline goes through the phases to the end.
	legendJS := `(() => { const row = document.querySelector('tr[data-attempt="` + d.AttemptID() + `"]');
		return row ? row.querySelector('.legend').textContent + '|' + row.children[1].textContent : ''; })()`
	attemptShown, opened, subtreeShown := false, false, false
	rowJS := `document.querySelector('tr[data-attempt="` + d.AttemptID() + `"]')`
	var legends []string
	var frames string
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		legend, err := chromedp.Run(browser, chromedp.Evaluate[string](legendJS))
		require.NoError(t, err)
		attemptNodes, err := chromedp.Run(browser, chromedp.Evaluate[int](`document.querySelectorAll('.actor[data-kind="attempt"]').length`))
		require.NoError(t, err)
		frames, err = chromedp.Run(browser, chromedp.Evaluate[string](`document.body.dataset.frames || ""`))
		require.NoError(t, err)
		attemptShown = attemptShown || attemptNodes > 0
		if !opened && legend != "" {
			// Click the attempt's row: the attempt view opens on it.
			_, err := chromedp.Run(browser, chromedp.Evaluate[bool](rowJS+`.click(), true`))
			require.NoError(t, err)
			opened = true
		}
		if opened && !subtreeShown {
			subtreeShown, err = chromedp.Run(browser, chromedp.Evaluate[bool](`document.querySelector('#av-actors .actor[data-kind="attempt"]') !== null`))
			require.NoError(t, err)
		}
		if legend != "" && (len(legends) == 0 || legends[len(legends)-1] != legend) {
			legends = append(legends, legend)
		}
		if strings.HasSuffix(legend, "|finished") {
			break
		}
		time.Sleep(150 * time.Millisecond)
	}
	require.NotEmpty(t, legends, "the attempt never appeared in the page")
	last := legends[len(legends)-1]
	require.True(t, strings.HasSuffix(last, "|finished"), "the page never showed the attempt finished: %q", legends)
	assert.True(t, attemptShown, "the attempt's actor appeared in the tree while it ran")
	assert.Greater(t, len(legends), 2, "the timeline advanced while watched: %q", legends)
	for _, phase := range []string{messages.PhasePreparing, messages.PhaseBuilding, messages.PhaseRunning, messages.PhaseTearingDown} {
		assert.Contains(t, last, phase)
	}
	assert.NotEqual(t, "", frames)

	// The attempt view: opened on the attempt, its actor subtree shown
	// while it ran, its events followed to the outcome and escaped, its
	// memory charted against the limit.
	viewJS := `(() => { const v = document.getElementById('attempt-view');
		const lines = [...v.querySelectorAll('#av-events li.event')];
		const tty = lines.map((li) => li.querySelector('.content').textContent).find((c) => c.includes('bold')) || '';
		const poly = v.querySelector('#av-memory svg polyline[data-series="memory"]');
		return { hidden: v.hidden, attempt: v.dataset.attempt || '', events: lines.length, tty,
			bold: v.querySelectorAll('#av-events b').length,
			status: (v.querySelector('#av-outcome .outcome-head') || {dataset: {}}).dataset.status || '',
			cleanup: (v.querySelector('#av-outcome .cleanup') || {}).textContent || '',
			points: poly ? poly.getAttribute('points').trim().split(/\s+/).length : 0,
			limit: v.querySelectorAll('#av-memory svg line[data-limit="limit"]').length,
			stream: document.getElementById('av-stream').textContent }; })()`
	type attemptView struct {
		Hidden                      bool
		Attempt, Tty, Status        string
		Cleanup, Stream             string
		Events, Bold, Points, Limit int
	}
	var view attemptView
	require.Eventually(t, func() bool {
		view, err = chromedp.Run(browser, chromedp.Evaluate[attemptView](viewJS))
		require.NoError(t, err)
		return view.Status != "" && view.Points >= 2
	}, 30*time.Second, 100*time.Millisecond, "the attempt view never showed the outcome and the memory chart: %+v", view)
	assert.False(t, view.Hidden)
	assert.Equal(t, d.AttemptID(), view.Attempt)
	assert.True(t, subtreeShown, "the attempt's actor subtree appeared in its view while it ran")
	assert.Equal(t, messages.StatusSucceeded, view.Status)
	assert.Equal(t, "finished", view.Stream)
	assert.Greater(t, view.Events, 3)
	assert.Contains(t, view.Tty, `\x1b[2J<b>bold</b>`, "the task's output is shown escaped, as text")
	assert.Zero(t, view.Bold, "the task's output never becomes markup")
	assert.Contains(t, view.Cleanup, "cleanup")
	assert.Equal(t, 1, view.Limit, "the memory chart draws the container's limit")

	// The slots chart has points, and the tree's recent lists count kinds
	// once each, without the console's polling.
	slotPoints, err := chromedp.Run(browser, chromedp.Evaluate[int](`(() => { const p = document.querySelector('#slots-chart svg polyline[data-series="slots used"]');
		return p ? p.getAttribute('points').trim().split(/\s+/).length : 0; })()`))
	require.NoError(t, err)
	assert.GreaterOrEqual(t, slotPoints, 2)
	type recentMsg struct {
		Kind  string
		Count int
	}
	recent, err := chromedp.Run(browser, chromedp.Evaluate[[]recentMsg](`[...document.querySelectorAll('.actor[data-kind="supervisor"] > .recent .msg')].map((m) => ({kind: m.dataset.kind, count: Number(m.dataset.count)}))`))
	require.NoError(t, err)
	require.NotEmpty(t, recent)
	kinds, repeated := map[string]bool{}, false
	for _, m := range recent {
		assert.False(t, kinds[m.Kind], "kind %s listed once", m.Kind)
		kinds[m.Kind] = true
		assert.NotContains(t, []string{"messages.Inspect", "messages.SnapshotRequest"}, m.Kind, "the console's polling is left out")
		repeated = repeated || m.Count > 1
	}
	assert.True(t, repeated, "repeats are counted: %+v", recent)

	shot, err := chromedp.Run(browser, chromedp.FullScreenshot(100))
	require.NoError(t, err)
	require.Greater(t, len(shot), 1000)
	path := filepath.Join(artifactDir(t), "console-"+d.AttemptID()+".png")
	require.NoError(t, os.WriteFile(path, shot, 0o644))
	t.Logf("console screenshot: %s (%d bytes); timeline as seen: %q", path, len(shot), legends)
}

// viewRunner serves one running attempt with a sidecar in its subtree:
// the attempt view's parts that a plain attempt on the real engine does
// not have, with hostile strings where the daemon passes on others'.
type viewRunner struct {
	memoryRunner
}

func (v *viewRunner) Console() runner.ConsoleFrame {
	return runner.ConsoleFrame{At: time.Now().UTC(), Actors: []runner.ActorView{
		{InspectReply: messages.InspectReply{PID: "supervisor", Kind: "supervisor", Phase: "running", Children: []string{"supervisor/att"}}},
		{InspectReply: messages.InspectReply{PID: "supervisor/att", Kind: "attempt", Phase: messages.PhaseRunning,
			Facts: map[string]string{"attemptId": "att-1"}, Children: []string{"supervisor/att/db"}},
			Stats: &messages.ActorStats{MailboxDepth: 2, Recent: []messages.MessageCount{{Kind: "actors.WorkerOutput", Count: 5}}}},
		{InspectReply: messages.InspectReply{PID: "supervisor/att/db", Kind: "service", Phase: "ready",
			Facts: map[string]string{"service": "postgres<i>x</i>\u202e", "health": "healthy", "image": "postgres:16", "container": "forge-db"}}},
	}, Attempts: []runner.AttemptView{{AttemptSummary: messages.AttemptSummary{AttemptID: "att-1", State: messages.AttemptStateRunning}, Timeline: []messages.PhaseSpan{}}}}
}

// TestConsoleAttemptViewInHeadlessChromium opens an attempt in the page
// against a stand-in runner: the view follows events appended while it is
// open, shows the sidecar with its health and the actor subtree with its
// mailbox, charts the memory, and shows the outcome and the cleanup report
// once finished; hostile strings stay text.
func TestConsoleAttemptViewInHeadlessChromium(t *testing.T) {
	chromium := chromiumPath(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r := &viewRunner{memoryRunner{consoleRunner: consoleRunner{metrics: metrics.New()}, logs: runner.NewLogs(0)}}
	log, opened := r.logs.Open("att-1")
	require.True(t, opened)
	log.Append(messages.RunnerEvent("sandbox_started", "first", nil))
	feedMemory(t, r.metrics, "att-1", time.Now().UTC(), 5)
	srv := httptest.NewServer(httpapi.Handler(r, slog.New(slog.NewTextHandler(io.Discard, nil))))
	defer srv.Close()

	alloc, cancelAlloc := chromedp.NewExecAllocator(ctx, append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.WindowSize(1400, 1000),
		chromedp.UserDataDir(t.TempDir()))...)
	defer cancelAlloc()
	browser, cancelBrowser := chromedp.NewContext(alloc)
	defer cancelBrowser()
	require.NoError(t, chromedp.Do(browser,
		chromedp.Navigate(srv.URL+"/console/"),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-attempt="att-1"]`)),
		chromedp.Click(chromedp.CSS(`tr[data-attempt="att-1"] td`)),
		chromedp.WaitVisible(chromedp.CSS(`#attempt-view #av-events li.event`)),
	))
	eval := func(js string) string {
		t.Helper()
		out, err := chromedp.Run(browser, chromedp.Evaluate[string](js))
		require.NoError(t, err)
		return out
	}
	waitFor := func(js, what string) {
		t.Helper()
		require.Eventually(t, func() bool { return eval(js) == "yes" }, 20*time.Second, 50*time.Millisecond, what)
	}

	// Followed: an event appended while the view is open appears, as text.
	log.Append(messages.RunnerEvent("task_output", "late \x1b[31m<img src=x>", nil))
	waitFor(`[...document.querySelectorAll('#av-events .content')].some((c) => c.textContent === 'late \\x1b[31m<img src=x>') ? 'yes' : 'no'`, "the appended event is shown escaped")
	assert.Equal(t, "0", eval(`String(document.querySelectorAll('#attempt-view img, #attempt-view i').length)`), "no markup from the daemon's strings")

	// The subtree and the sidecar, from the frames.
	waitFor(`document.querySelector('#av-sidecars tr[data-kind="service"] .health') ? 'yes' : 'no'`, "the sidecar is listed")
	assert.Equal(t, "healthy", eval(`document.querySelector('#av-sidecars tr[data-kind="service"] .health').textContent`))
	assert.Contains(t, eval(`document.querySelector('#av-sidecars tr[data-kind="service"]').textContent`), `postgres<i>x</i>\u202e`)
	assert.Contains(t, eval(`document.querySelector('#av-actors .actor[data-kind="attempt"] .stats').textContent`), "mailbox 2")
	assert.Equal(t, "ready", eval(`document.querySelector('#av-actors .actor[data-kind="service"] .phase').textContent.slice(1, -1)`))

	// The memory chart: the readings as a polyline, the limit as a line.
	waitFor(`document.querySelector('#av-memory svg polyline[data-series="memory"]') ? 'yes' : 'no'`, "the memory chart is drawn")
	assert.Equal(t, "5", eval(`String(document.querySelector('#av-memory svg polyline[data-series="memory"]').getAttribute('points').trim().split(/\s+/).length)`))
	assert.Equal(t, "1", eval(`String(document.querySelectorAll('#av-memory svg line[data-limit="limit"]').length)`))

	// The outcome and its cleanup report end the stream.
	log.Finish(messages.AttemptOutcome{AttemptID: "att-1", Status: messages.StatusFailed, Code: "sandbox_teardown_failed", Message: "a volume <b>remained</b>",
		Degraded: true, FinishedAt: time.Now().UTC(), Cleanup: &messages.CleanupReport{Source: "teardown", Remaining: 1,
			Actions: []messages.CleanupAction{{ResourceType: "volume", ResourceID: "forge-x-workspace\u0007", Outcome: "failed", Message: "in use"}}}})
	waitFor(`document.getElementById('av-stream').textContent === 'finished' ? 'yes' : 'no'`, "the stream ends with the outcome")
	assert.Equal(t, messages.StatusFailed, eval(`document.querySelector('#av-outcome .outcome-head').dataset.status`))
	outcome := eval(`document.getElementById('av-outcome').textContent`)
	assert.Contains(t, outcome, "a volume <b>remained</b>")
	assert.Contains(t, outcome, "DEGRADED")
	assert.Contains(t, outcome, "cleanup (teardown): 1 removals, 1 remaining")
	assert.Contains(t, outcome, `forge-x-workspace\x07`)
	assert.Equal(t, "0", eval(`String(document.querySelectorAll('#av-outcome b').length)`))

	// Closing hides the view.
	require.NoError(t, chromedp.Do(browser, chromedp.Click(chromedp.CSS(`#av-close`))))
	assert.Equal(t, "hidden", eval(`document.getElementById('attempt-view').hidden ? 'hidden' : 'shown'`))
}

// TestConsoleFleetViewInHeadlessChromium loads the console of a fleet
// member (a stand-in runner with a directory) and of a daemon running
// alone: the member's page lists the members with their capacity,
// attempts and state (cut off, unreachable), a hostile string from a
// member stays text; a member's "tree" button opens its actor tree (read
// through the daemon), or the daemon's refusal for one that does not
// answer; the lone daemon's page shows no fleet.
func TestConsoleFleetViewInHeadlessChromium(t *testing.T) {
	chromium := chromiumPath(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	dir := sampleDirectory()
	dir.Members[1].Error = "did not answer \u001b[2J<b>bold</b>"
	dir.Members = append(dir.Members,
		messages.FleetMember{RunnerID: "r2", Address: "127.0.0.1:7953", Slots: 2, FreeSlots: 2, PreflightAvailable: true},
		messages.FleetMember{RunnerID: "gone", Address: "127.0.0.1:7954", Slots: 1, FreeSlots: 1, PreflightAvailable: true})
	f := &fleetRunner{contractRunner: &contractRunner{consoleRunner: consoleRunner{metrics: metrics.New()}, logs: runner.NewLogs(0)}, dir: dir}
	member := httptest.NewServer(httpapi.Handler(f, logger))
	defer member.Close()
	alone, _ := newConsoleServer(t)

	alloc, cancelAlloc := chromedp.NewExecAllocator(ctx, append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.WindowSize(1400, 1000),
		chromedp.UserDataDir(t.TempDir()))...)
	defer cancelAlloc()
	browser, cancelBrowser := chromedp.NewContext(alloc)
	defer cancelBrowser()
	require.NoError(t, chromedp.Do(browser,
		chromedp.Navigate(member.URL+"/console/"),
		chromedp.WaitVisible(chromedp.CSS(`#fleet-view tr[data-runner="r1"]`)),
	))
	eval := func(js string) string {
		t.Helper()
		out, err := chromedp.Run(browser, chromedp.Evaluate[string](js))
		require.NoError(t, err)
		return out
	}
	rows := eval(`Array.from(document.querySelectorAll('#fleet tr.member')).map((r) => Array.from(r.children).map((c) => c.textContent).join('|')).join('\n')`)
	assert.Equal(t, "r1 (this daemon)|127.0.0.1:7951|2|1|1|0|cut off from etcd|a1|tree\n"+
		`?|127.0.0.1:7952|-|-|-|-|unreachable: did not answer \x1b[2J<b>bold</b>|-|`+"\n"+
		"r2|127.0.0.1:7953|2|2|0|0|ok|-|tree\n"+
		"gone|127.0.0.1:7954|1|1|0|0|ok|-|tree", rows)
	assert.Equal(t, "0", eval(`String(document.querySelectorAll('#fleet b').length)`), "a member's string is text, never HTML")
	assert.Contains(t, eval(`document.getElementById('fleet-name').textContent`), "trial · 4 members")

	// Another member's tree, then one that does not answer, then closed.
	require.NoError(t, chromedp.Do(browser,
		chromedp.Click(chromedp.CSS(`#fleet tr[data-runner="r2"] button.member-tree`)),
		chromedp.WaitVisible(chromedp.CSS(`#mv-tree .actor[data-pid="supervisor"]`)),
	))
	assert.Equal(t, "r2", eval(`document.getElementById('mv-title').textContent`))
	assert.Contains(t, eval(`document.getElementById('mv-tree').textContent`), "slots=2")
	require.NoError(t, chromedp.Do(browser, chromedp.Click(chromedp.CSS(`#fleet tr[data-runner="gone"] button.member-tree`))))
	require.Eventually(t, func() bool {
		return strings.Contains(eval(`document.getElementById('mv-state').textContent`), "did not answer")
	}, 20*time.Second, 50*time.Millisecond)
	assert.Equal(t, "gone", eval(`document.getElementById('mv-title').textContent`))
	assert.Equal(t, "0", eval(`String(document.querySelectorAll('#mv-tree .actor').length)`), "no tree is left from the member before")
	require.NoError(t, chromedp.Do(browser, chromedp.Click(chromedp.CSS(`#mv-close`))))
	assert.Equal(t, "true", eval(`String(document.getElementById('member-view').hidden)`))

	require.NoError(t, chromedp.Do(browser, chromedp.Navigate(alone.URL+"/console/")))
	require.Eventually(t, func() bool { return eval(`document.body.dataset.fleet || ""`) == "alone" }, 20*time.Second, 50*time.Millisecond)
	assert.Equal(t, "true", eval(`String(document.getElementById('fleet-view').hidden)`), "a daemon running alone shows no fleet")
}
