package toolchains_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/internal/daemon/runner"
	"github.com/forgedev/forged/internal/example"
	"github.com/forgedev/forged/internal/sandbox/toolchains"
	"github.com/forgedev/forged/internal/testkit/enginetest"
	"github.com/forgedev/forged/internal/testkit/testimages"
	"github.com/forgedev/forged/internal/testkit/workerbin"
	"github.com/forgedev/forged/messages"
)

// reportFile is what every task writes: its test command's output and
// exit status. It must be the only path the result commit changes.
const reportFile = "forge-test-report.txt"

// toolchain is one row of the matrix: a sample project under
// testdata/<name>, its own test command, lines its report must hold to
// show that the real suite ran and passed, and extra lines for the
// project's .forge/Dockerfile after FROM.
type toolchain struct {
	name       string
	command    string
	want       []string
	dockerfile string
}

var matrix = []toolchain{
	{name: "go", command: "go vet ./... && go test -count=1 -v ./...", want: []string{
		"--- PASS: TestScratchDirectories", "--- PASS: ExampleTop", "ok  \tforged.test/wordfreq\t", "ok  \tforged.test/wordfreq/internal/tokenize\t"}},
	{name: "node", command: "npm test", want: []string{"# pass 5", "# fail 0"}},
	{name: "python", command: "pytest -v", want: []string{"test_tmp_path_executable PASSED", "9 passed"}},
	{name: "rust", command: "cargo test --offline", want: []string{
		"test executable_under_tmpdir_runs ... ok", "test tests::evaluates ... ok", "test result: ok. 2 passed", "test result: ok. 3 passed"}},
	// The C project's image puts its compiler on a PATH and names it in
	// CC, as toolchain images do (ENV PATH=/usr/local/go/bin:…,
	// CARGO_HOME=…): the task runs with the image's environment.
	{name: "c", command: "./configure && make check", want: []string{
		"checking for a C compiler... sample-cc", "checking whether the compiled programs run... yes", "PASS: streaming", "all tests passed"},
		dockerfile: "RUN mkdir -p /opt/sample/bin && ln -s /usr/bin/gcc /opt/sample/bin/sample-cc\n" +
			"ENV PATH=/opt/sample/bin:/usr/local/bin:/usr/bin:/bin CC=sample-cc\n"},
}

// taskScript runs command with its output in the report, adds the
// kernel's peak memory charge of the worker's cgroup (cgroup v1
// memory.max_usage_in_bytes or v2 memory.peak: page cache included), the
// most tasks (processes and threads) of the cgroup seen by a sampler every
// 50 ms, and the command's status, prints the report and exits with that
// status.
func taskScript(command string) string {
	return fmt.Sprintf(`pids=/sys/fs/cgroup/pids/pids.current; [ -r $pids ] || pids=/sys/fs/cgroup/pids.current
( max=0; while :; do n=$(cat $pids 2>/dev/null || echo 0); if [ "$n" -gt "$max" ]; then max=$n; echo $max >"$TMPDIR/pids-peak"; fi; sleep 0.05; done ) &
sampler=$!
{ %s; } >%s 2>&1; status=$?
kill $sampler
peak=$(cat /sys/fs/cgroup/memory/memory.max_usage_in_bytes 2>/dev/null || cat /sys/fs/cgroup/memory.peak 2>/dev/null || echo unknown)
echo "cgroup peak memory bytes: $peak" >>%[2]s
echo "cgroup peak tasks (sampled): $(cat "$TMPDIR/pids-peak" 2>/dev/null || echo unknown)" >>%[2]s
echo "exit status: $status" >>%[2]s
cat %[2]s
exit $status`, command, reportFile)
}

// reported returns the value of the report's line starting with prefix.
// The memory peak it records beside the attempt's own peak (the host's
// memory sampler, every 250 ms, without page cache) catches a job shorter
// than a sample.
func reported(report, prefix string) string {
	for _, l := range strings.Split(report, "\n") {
		if v, ok := strings.CutPrefix(l, prefix); ok {
			return v
		}
	}
	return "not reported"
}

// mib renders a byte count as MiB.
func mib(bytes string) string {
	n, err := strconv.ParseInt(bytes, 10, 64)
	if err != nil {
		return bytes
	}
	return fmt.Sprintf("%d MiB", n>>20)
}

// TestToolchainMatrix runs each sample project's own test suite as an
// attempt's task through a whole embedded forged on the real engine, with
// the resources `forged example` gives (256 MiB, 256 PIDs, 1 CPU). The
// images come from scripts/images.sh; without them the test skips, or
// fails under CI=true. It runs under the runc and the gvisor isolation
// floors (the same projects: each is already the smallest that shows its
// toolchain's suite running; the gVisor run takes longer, see
// docs/gvisor.md).
func TestToolchainMatrix(t *testing.T) {
	for _, floor := range []string{messages.IsolationRunc, messages.IsolationGVisor} {
		t.Run(floor, func(t *testing.T) { toolchainMatrix(t, floor) })
	}
}

func toolchainMatrix(t *testing.T, floor string) {
	engine := enginetest.Client(t)
	images := catalogue(t)
	r := newRunnerUnder(t, floor)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	type running struct {
		tc      toolchain
		skipped string // why the toolchain cannot run here
		repo    string
		d       *messages.Dispatch
		log     *runner.Log
	}
	var all []running
	for _, tc := range matrix {
		img, ok := images[tc.name]
		if !ok {
			all = append(all, running{tc: tc, skipped: fmt.Sprintf("the image catalogue has no %q image: run scripts/images.sh", tc.name)})
			continue
		}
		if _, err := engine.ImageInspect(ctx, img.Ref); err != nil {
			all = append(all, running{tc: tc, skipped: fmt.Sprintf("image %s is not in the engine (%v): run scripts/images.sh", img.Ref, err)})
			continue
		}
		repo := sampleRepo(t, tc.name, "FROM "+img.Ref+"\n"+tc.dockerfile)
		project := testimages.Project("toolchains-" + floor + "-" + tc.name)
		t.Cleanup(func() { assert.NoError(t, testimages.RemoveProject(project)) })
		d, err := example.NewDispatch(example.DispatchOptions{RunnerID: r.RunnerID(), RepoPath: repo, Project: project,
			Argv: []string{"/bin/sh", "-c", taskScript(tc.command)}, Timeout: 600})
		require.NoError(t, err)
		reply, err := r.Submit(d)
		require.NoError(t, err)
		require.True(t, reply.Accepted, "%s: %+v", tc.name, reply)
		t.Cleanup(func() { enginetest.AssertNoneLabelled(t, engine, d.AttemptID()) })
		log, ok := r.Logs().Get(d.AttemptID())
		require.True(t, ok)
		all = append(all, running{tc: tc, repo: repo, d: d, log: log})
	}

	for _, a := range all {
		t.Run(a.tc.name, func(t *testing.T) {
			if a.skipped != "" {
				missing(t, a.skipped)
			}
			wctx, wcancel := context.WithTimeout(context.Background(), 20*time.Minute)
			defer wcancel()
			start := time.Now()
			out, err := a.log.Wait(wctx)
			require.NoError(t, err, "the attempt did not finish")
			require.Equal(t, messages.StatusSucceeded, out.Status, "%s: %s\n%s", out.Code, out.Message, taskOutput(a.log))
			require.NotEmpty(t, out.ResultCommitSHA)

			branch := a.d.Lease.WorktreeKey
			assert.Equal(t, out.ResultCommitSHA, git(t, a.repo, "rev-parse", "refs/heads/"+branch))
			assert.Equal(t, reportFile, git(t, a.repo, "diff", "--name-only", "main", branch),
				"the result commit holds the report and nothing the build left behind")
			report := git(t, a.repo, "show", branch+":"+reportFile)
			res := a.d.Sandbox.RequestedResources
			t.Logf("%s: %q passed in the sandbox; memory limit %d MiB, sampled peak %d MiB, cgroup peak %s; tasks %s of %d; waited %s",
				a.tc.name, a.tc.command, res.WorkerMemoryLimitBytes>>20, out.PeakMemoryBytes>>20,
				mib(reported(report, "cgroup peak memory bytes: ")), reported(report, "cgroup peak tasks (sampled): "), res.PIDs,
				time.Since(start).Round(time.Second))
			for _, w := range a.tc.want {
				assert.Contains(t, report, w)
			}
			assert.True(t, strings.HasSuffix(report, "exit status: 0"), "report tail: %s", tail(report))
		})
	}
}

// TestToolchainOutOfMemory runs the Rust project's suite in the smallest
// worker a dispatch may ask for (64 MiB): rustc is killed by the kernel,
// and the attempt fails with sandbox_oom_killed, classified from the
// engine's inspected state; the worker's valid output is still imported.
// (Out of PIDs, disk and descriptors are classified by the telemetry work,
// issue 19's classification; see the report of this change.)
func TestToolchainOutOfMemory(t *testing.T) {
	engine := enginetest.Client(t)
	img, ok := catalogue(t)["rust"]
	if !ok {
		missing(t, `the image catalogue has no "rust" image: run scripts/images.sh`)
	}
	r := newRunner(t)
	repo := sampleRepo(t, "rust", "FROM "+img.Ref+"\n")
	project := testimages.Project("toolchains-oom")
	t.Cleanup(func() { assert.NoError(t, testimages.RemoveProject(project)) })
	d, err := example.NewDispatch(example.DispatchOptions{RunnerID: r.RunnerID(), RepoPath: repo, Project: project,
		Argv: []string{"/bin/sh", "-c", taskScript("cargo test --offline")}, MemoryBytes: messages.MinWorkerMemoryBytes, Timeout: 600})
	require.NoError(t, err)
	reply, err := r.Submit(d)
	require.NoError(t, err)
	require.True(t, reply.Accepted, "%+v", reply)
	t.Cleanup(func() { enginetest.AssertNoneLabelled(t, engine, d.AttemptID()) })
	log, ok := r.Logs().Get(d.AttemptID())
	require.True(t, ok)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	out, err := log.Wait(ctx)
	require.NoError(t, err)
	assert.Equal(t, messages.StatusFailed, out.Status)
	assert.Equal(t, "sandbox_oom_killed", out.Code, "%s\n%s", out.Message, taskOutput(log))
	// A trusted host failure keeps a valid output (the seed's
	// applyTrustedHostFailure; docs/operations.md, "Output on trusted
	// failures"): the managed branch is where the outcome says, and
	// nowhere else.
	branch, err := exec.Command("git", "-C", repo, "rev-parse", "--verify", "-q", "refs/heads/"+d.Lease.WorktreeKey).Output()
	if out.ResultCommitSHA == "" {
		assert.Error(t, err, "no imported result: the managed branch does not exist")
	} else {
		require.NoError(t, err)
		assert.Equal(t, out.ResultCommitSHA, strings.TrimSpace(string(branch)), "the branch is at the imported result")
		assert.Contains(t, out.Message, "its validated output was imported as "+out.ResultCommitSHA)
	}
}

// newRunner starts an embedded forged sized as the README's example runs
// it on a small machine, with a queue for the whole matrix.
func newRunner(t *testing.T) *runner.Runner { return newRunnerUnder(t, "") }

// newRunnerUnder is newRunner under the isolation floor given.
func newRunnerUnder(t *testing.T, floor string) *runner.Runner {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r, err := runner.New(ctx, runner.Config{
		WorkerBinary: workerbin.Path(t),
		StateRoot:    t.TempDir(),
		LockRoot:     t.TempDir(),
		AllowRootful: true, // the test engine runs rootful
		Capacity:     example.SmallHostCapacity(),
		Slots:        2,
		QueueLimit:   len(matrix),
		Isolation:    floor,
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Close() })
	return r
}

// catalogue reads the image catalogue scripts/images.sh wrote.
func catalogue(t *testing.T) map[string]toolchains.Image {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	require.NoError(t, err)
	images, path, err := toolchains.ReadCatalogue(root)
	if errors.Is(err, toolchains.ErrNoCatalogue) {
		missing(t, err.Error())
	}
	require.NoError(t, err, path)
	return images
}

// missing skips the test, or fails it under CI=true, where the images must
// have been built by scripts/test.sh.
func missing(t *testing.T, why string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("CI=true: %s", why)
	}
	t.Skip(why)
}

// sampleRepo commits testdata/<name> plus a .forge/ contract and
// Dockerfile to a fresh repository.
func sampleRepo(t *testing.T, name, dockerfile string) string {
	t.Helper()
	repo := filepath.Join(t.TempDir(), name)
	require.NoError(t, copyTree(filepath.Join("testdata", name), repo))
	require.NoError(t, os.MkdirAll(filepath.Join(repo, ".forge"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(repo, ".forge", "Dockerfile"), []byte(dockerfile), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(repo, ".forge", "forge.sandbox.yml"),
		[]byte("version: 1\nworkingDirectory: /workspace\nservices: []\ncaches: []\n"), 0o644))
	git(t, repo, "init", "-q", "-b", "main")
	git(t, repo, "add", "-A")
	git(t, repo, "-c", "user.name=forged test", "-c", "user.email=test@forge.invalid", "commit", "-q", "-m", "sample "+name+" project")
	return repo
}

// copyTree copies the regular files and directories under src to dst,
// keeping the executable bits.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("%s: not a regular file", path)
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, info.Mode().Perm()|0o644)
	})
}

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput()
	require.NoError(t, err, "git %v: %s", args, out)
	return strings.TrimSpace(string(out))
}

// taskOutput is the task's output lines, for a failure message.
func taskOutput(log *runner.Log) string {
	var b strings.Builder
	for _, ev := range log.Events() {
		if ev.EventType == "task_output" || ev.Kind == messages.KindError {
			b.WriteString(ev.EventType + ": " + ev.Content + "\n")
		}
	}
	return tail(b.String())
}

func tail(s string) string {
	if len(s) > 6000 {
		return "…" + s[len(s)-6000:]
	}
	return s
}
