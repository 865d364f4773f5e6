package worker

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/messages"
)

// The repository-scale benchmarks (B7's worker part) time the worker's two
// steps that grow with the repository, against a synthetic repository of
// FORGED_WORKER_BENCH_FILES files (default 30000; 100 small Go files to a
// directory) and 1000 commits, made with `git fast-import` and repacked as
// internal/bench's synthetic repositories are, once, and kept under the
// temporary directory for later runs.
//
// BenchmarkMaterialize is worker_started → workspace_materialized: the
// input bundle unpacked into an empty workspace and its commit checked out
// (with 1, 2 and 4 checkout writers). BenchmarkCommitResult is task_exited
// → output_written for a task that wrote one new file: staging the working
// tree, the result commit and the result bundle. Each iteration
// materialises a fresh workspace untimed.
//
// Method. FORGED_WORKER_BENCH_DIR puts the workspaces on the filesystem
// to measure; it should be what a sandbox gets, a fresh ext4 image without
// a journal on a loop device (internal/host/quota), made anew for every
// benchmark process and run with -benchtime 1x: on the same ext4 image, the
// creates of a second 30k-file checkout (after the first was removed) took
// 10 s instead of 0.6 s. As root:
//
//	truncate -s 8G /tmp/ws.img && mkfs.ext4 -q -F -m 0 -O ^has_journal /tmp/ws.img
//	mkdir -p /tmp/ws && mount -o loop,nodev,nosuid /tmp/ws.img /tmp/ws
//	FORGED_WORKER_BENCH_DIR=/tmp/ws go test -run '^$' -bench 'Materialize/writers=2' \
//	    -benchtime 1x -cpuprofile cpu.out ./internal/worker/
//	umount /tmp/ws && rm /tmp/ws.img
//
// The native floor of the same steps is `git clone --branch main` of a
// bundle of the repository's main onto such a filesystem, then
// `git status` and a one-file commit (BENCHMARKS.md, B7). Interleave the
// runs being compared: the shared host's load moves every figure.

type scaleRepo struct {
	dir    string
	bundle string
	input  string
}

var (
	scaleRepoOnce sync.Once
	scaleRepoVal  *scaleRepo
	scaleRepoErr  error
)

// benchScaleFiles is the benchmark repository's number of files.
func benchScaleFiles() int {
	if n, err := strconv.Atoi(os.Getenv("FORGED_WORKER_BENCH_FILES")); err == nil && n > 0 {
		return n
	}
	return 30000
}

// benchScaleRepo generates the synthetic repository and its input bundle
// once per process.
func benchScaleRepo(b *testing.B) *scaleRepo {
	b.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		b.Skip("git binary not available")
	}
	scaleRepoOnce.Do(func() { scaleRepoVal, scaleRepoErr = makeScaleRepo(benchScaleFiles(), 1000) })
	require.NoError(b, scaleRepoErr)
	return scaleRepoVal
}

// makeScaleRepo makes the repository and its bundle under the temporary
// directory, where later runs find them again (a run that did not finish
// leaves no marker, and the next one starts over).
func makeScaleRepo(files, commits int) (*scaleRepo, error) {
	root := filepath.Join(os.TempDir(), fmt.Sprintf("forged-worker-bench-%df-%dc", files, commits))
	dir, bundle, marker := filepath.Join(root, "repo"), filepath.Join(root, "input.bundle"), filepath.Join(root, "complete")
	if input, err := os.ReadFile(marker); err == nil {
		return &scaleRepo{dir: dir, bundle: bundle, input: string(input)}, nil
	}
	if err := os.RemoveAll(root); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, err
	}
	env := append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "HOME="+root)
	run := func(stdin io.Reader, args ...string) error {
		cmd := exec.Command("git", args...)
		cmd.Env, cmd.Stdin = env, stdin
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	if err := run(nil, "init", "-q", "-b", "main", dir); err != nil {
		return nil, err
	}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(writeScaleHistory(pw, files, commits)) }()
	if err := run(pr, "-C", dir, "fast-import", "--quiet", "--done"); err != nil {
		return nil, err
	}
	if err := run(nil, "-C", dir, "repack", "-adq"); err != nil {
		return nil, err
	}
	ref := inputRefPrefix + attemptHex(testAttemptID)
	if err := run(nil, "-C", dir, "update-ref", ref, "main"); err != nil {
		return nil, err
	}
	if err := run(nil, "-C", dir, "bundle", "create", "--quiet", bundle, ref); err != nil {
		return nil, err
	}
	out, err := exec.Command("git", "-C", dir, "rev-parse", "main").Output()
	if err != nil {
		return nil, err
	}
	input := strings.TrimSpace(string(out))
	if err := os.WriteFile(marker, []byte(input), 0o644); err != nil {
		return nil, err
	}
	return &scaleRepo{dir: dir, bundle: bundle, input: input}, nil
}

// writeScaleHistory is internal/bench's synthetic history: one commit of
// files small Go sources, then commits-1 commits changing one file each.
func writeScaleHistory(w io.Writer, files, commits int) error {
	bw := bufio.NewWriterSize(w, 1<<20)
	when := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	data := func(s string) { fmt.Fprintf(bw, "data %d\n%s\n", len(s), s) }
	path := func(i int) string { return fmt.Sprintf("src/m%03d/p%02d/f%06d.go", i/10000, (i/100)%100, i) }
	source := func(i, rev int) string {
		return fmt.Sprintf("package p%d\n\n// F%d is file %d of the synthetic repository, revision %d.\nfunc F%d() int { return %d }\n",
			(i/100)%100, i, i, rev, i, rev)
	}
	for n := range commits {
		fmt.Fprintf(bw, "commit refs/heads/main\ncommitter bench <bench@forge.invalid> %d +0000\n", when+int64(n))
		if n == 0 {
			data(fmt.Sprintf("synthetic tree of %d files", files))
			for i := range files {
				fmt.Fprintf(bw, "M 100644 inline %s\n", path(i))
				data(source(i, 0))
			}
			continue
		}
		i := (n * 7919) % files
		data(fmt.Sprintf("change file %d (commit %d)", i, n))
		fmt.Fprintf(bw, "M 100644 inline %s\n", path(i))
		data(source(i, n))
	}
	fmt.Fprintf(bw, "done\n")
	return bw.Flush()
}

// benchWorkspace is a fresh, empty workspace directory and the worker's
// configuration for it.
func benchWorkspace(b *testing.B, repo *scaleRepo, n int) (Config, messages.SandboxIdentity) {
	b.Helper()
	base := os.Getenv("FORGED_WORKER_BENCH_DIR")
	if base == "" {
		base = b.TempDir()
	}
	root, err := os.MkdirTemp(base, fmt.Sprintf("ws%d-", n))
	require.NoError(b, err)
	b.Cleanup(func() { _ = os.RemoveAll(root) })
	cfg := Config{
		WorkspaceDir:    filepath.Join(root, "workspace"),
		InputBundlePath: repo.bundle,
		OutputDir:       filepath.Join(root, "output"),
	}
	id := messages.SandboxIdentity{DispatchAttemptID: testAttemptID, InputCommitSHA: repo.input, Branch: testBranch}
	return cfg, id
}

// BenchmarkMaterialize runs with 1, 2 and 4 checkout writers (the
// worker uses checkoutWriters).
func BenchmarkMaterialize(b *testing.B) {
	repo := benchScaleRepo(b)
	defer func(n int) { checkoutWriters = n }(checkoutWriters)
	for _, writers := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			checkoutWriters = writers
			for n := 0; n < b.N; n++ {
				b.StopTimer()
				cfg, id := benchWorkspace(b, repo, n)
				b.StartTimer()
				_, err := materialize(cfg, id)
				require.NoError(b, err)
			}
			b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/op")
		})
	}
}

func BenchmarkCommitResult(b *testing.B) {
	repo := benchScaleRepo(b)
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		b.StopTimer()
		cfg, id := benchWorkspace(b, repo, n)
		ws, err := materialize(cfg, id)
		require.NoError(b, err)
		require.NoError(b, os.WriteFile(filepath.Join(ws.dir, "hello.txt"), []byte("hello\n"), 0o644))
		require.NoError(b, os.MkdirAll(cfg.OutputDir, 0o755))
		b.StartTimer()
		res, err := ws.commitResult(id.DispatchAttemptID, messages.Task{}, func(string, ...any) {})
		require.NoError(b, err)
		require.False(b, res.commit.IsZero())
		sha := res.commit.String()
		require.NoError(b, writeOutputs(cfg.OutputDir, ws, id, res, messages.ResultPacket{SchemaVersion: 1, ResultCommitSHA: &sha}))
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/op")
}
