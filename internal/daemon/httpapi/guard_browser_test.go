package httpapi_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/actortest"
	"github.com/forgedev/forged/internal/daemon/httpapi"
	"github.com/forgedev/forged/internal/daemon/metrics"
	"github.com/forgedev/forged/internal/daemon/runner"
	"github.com/forgedev/forged/messages"
)

// runningRunner shows one running attempt, a1, in every console frame.
type runningRunner struct{ guardRunner }

func (r *runningRunner) Console() runner.ConsoleFrame {
	return runner.ConsoleFrame{At: time.Now().UTC(),
		Actors:   []runner.ActorView{{InspectReply: messages.InspectReply{PID: "supervisor", Kind: "supervisor"}}},
		Attempts: []messages.AttemptView{{AttemptSummary: messages.AttemptSummary{AttemptID: "a1", State: messages.AttemptStateRunning}}}}
}

// TestGuardInHeadlessChromium drives the guard from a real browser, with
// the daemon's handler behind a loopback listener as the console's `ssh
// -L` forward gives it: the console's own cancel button works (same
// origin, the client headers); a page of another origin that posts a
// dispatch as text/plain reaches the daemon but not the runner; and a page
// under a rebound name (evil.example resolved to 127.0.0.1) reads nothing.
func TestGuardInHeadlessChromium(t *testing.T) {
	chromium := chromiumPath(t)
	r := &runningRunner{guardRunner{consoleRunner: consoleRunner{metrics: metrics.New()}}}
	api := httpapi.HandlerWith(r, slog.New(slog.NewTextHandler(io.Discard, nil)), httpapi.Options{ManageToken: manageToken})
	var posts atomic.Int32 // POSTs that reached the daemon, refused or not
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method == http.MethodPost {
			posts.Add(1)
		}
		api.ServeHTTP(w, req)
	}))
	defer srv.Close()
	apiURL, err := url.Parse(srv.URL)
	require.NoError(t, err)

	// The hostile page: another origin on loopback, which posts a valid
	// dispatch the way any page may without a preflight.
	dispatch, err := json.Marshal(actortest.NewDispatch(time.Now().Add(time.Hour)))
	require.NoError(t, err)
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = io.WriteString(w, `<!doctype html><script>
fetch("`+srv.URL+`/v1/attempts", {method: "POST", mode: "no-cors", headers: {"Content-Type": "text/plain"},
  body: atob("`+base64.StdEncoding.EncodeToString(dispatch)+`")}).then(() => { document.title = "sent"; }, (e) => { document.title = "error " + e; });
</script>`)
	}))
	defer evil.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	alloc, cancelAlloc := chromedp.NewExecAllocator(ctx, append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("host-resolver-rules", "MAP evil.example 127.0.0.1"))...)
	defer cancelAlloc()
	browser, cancelBrowser := chromedp.NewContext(alloc)
	defer cancelBrowser()

	// The console's cancel, clicked in the page.
	require.NoError(t, chromedp.Do(browser,
		chromedp.Navigate(srv.URL+"/console/"),
		chromedp.WaitVisible(`#token`),
		chromedp.SendKeys(`#token`, manageToken),
		chromedp.Click(`tr[data-attempt="a1"] button.cancel`),
	))
	result, err := chromedp.Run(browser, chromedp.Poll[string](`document.getElementById("manage-result").textContent`))
	require.NoError(t, err)
	assert.Equal(t, "cancelling a1", result)
	assert.EqualValues(t, 1, r.cancels.Load(), "the console's same-origin cancel reached the runner")

	// The cross-origin text/plain POST.
	require.NoError(t, chromedp.Do(browser, chromedp.Navigate(evil.URL+"/")))
	title, err := chromedp.Run(browser, chromedp.Poll[string](`document.title`))
	require.NoError(t, err)
	assert.Equal(t, "sent", title, "the browser sent the page's request")
	assert.EqualValues(t, 1, posts.Load(), "the page's POST reached the daemon")
	assert.Zero(t, r.submits.Load(), "and was refused before the runner")

	// The rebound name: the browser believes evil.example is its own
	// origin, the daemon sees Host: evil.example:PORT and answers nothing.
	require.NoError(t, chromedp.Do(browser, chromedp.Navigate("http://evil.example:"+apiURL.Port()+"/v1/snapshot")))
	body, err := chromedp.Run(browser, chromedp.Evaluate[string](`document.body.innerText`))
	require.NoError(t, err)
	assert.Contains(t, body, "api_host_refused")
	assert.False(t, strings.Contains(body, `"slots"`), "no snapshot was served: %s", body)
}
