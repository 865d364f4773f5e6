package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/forgedev/forged/internal/example"
)

// RepoSize is the shape of one synthetic repository of B7: Files files in
// the tree of main, and Commits commits in its history.
type RepoSize struct {
	Files   int `json:"files"`
	Commits int `json:"commits"`
}

func (s RepoSize) String() string { return fmt.Sprintf("%d files, %d commits", s.Files, s.Commits) }

// ParseRepoSizes parses B7's size list: "FILESxCOMMITS" entries separated
// by commas, with k (thousand) allowed as a suffix: "1kx1k,30kx1k".
func ParseRepoSizes(spec string) ([]RepoSize, error) {
	var sizes []RepoSize
	for _, entry := range strings.Split(spec, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		f, c, ok := strings.Cut(entry, "x")
		files, errF := parseCount(f)
		commits, errC := parseCount(c)
		if !ok || errF != nil || errC != nil || files < 1 || commits < 1 {
			return nil, fmt.Errorf("B7 size %q is not FILESxCOMMITS (e.g. 30kx1k)", entry)
		}
		sizes = append(sizes, RepoSize{Files: files, Commits: commits})
	}
	return sizes, nil
}

func parseCount(s string) (int, error) {
	mult := 1
	if rest, ok := strings.CutSuffix(strings.ToLower(s), "k"); ok {
		s, mult = rest, 1000
	}
	var n int
	if _, err := fmt.Sscanf(s, "%d", &n); err != nil {
		return 0, err
	}
	return n * mult, nil
}

// completeMarker says a cached synthetic repository was generated to the
// end (a run interrupted half-way leaves none, and the next regenerates).
const completeMarker = "forged-bench-complete"

// syntheticRepo returns the synthetic repository of size under cacheDir,
// generating it on first use: the example's repository (its .forge
// contract and Dockerfile, so that forged's image cache key is the
// example's), then, through `git fast-import`, one commit adding Files
// files (100 to a directory, 100 directories to a module, small distinct
// Go sources) and Commits-1 commits changing one file each, then one
// repack, as a real repository's pack would be. The repository is
// reused by later runs as it is.
func syntheticRepo(ctx context.Context, cacheDir string, size RepoSize) (string, error) {
	dir := filepath.Join(cacheDir, fmt.Sprintf("repo-%df-%dc", size.Files, size.Commits))
	if _, err := os.Stat(filepath.Join(dir, ".git", completeMarker)); err == nil {
		return dir, nil
	}
	if err := os.RemoveAll(dir); err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	if err := example.CreateRepo(ctx, dir, example.RepoOptions{}); err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, "git", "-C", dir, "fast-import", "--quiet", "--done")
	cmd.Env = hostGitEnv(cacheDir)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return "", err
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return "", err
	}
	werr := writeFastImport(stdin, size)
	if cerr := stdin.Close(); werr == nil {
		werr = cerr
	}
	if err := cmd.Wait(); err != nil || werr != nil {
		return "", fmt.Errorf("generate %s: git fast-import: %v %v: %s", size, err, werr, stderr.String())
	}
	// The host worktree is never used (attempts move managed branches
	// only), so it stays at the first commit.
	if out, err := gitHost(ctx, cacheDir, dir, "repack", "-adq"); err != nil {
		return "", fmt.Errorf("generate %s: git repack: %w: %s", size, err, out)
	}
	if err := os.WriteFile(filepath.Join(dir, ".git", completeMarker), nil, 0o644); err != nil {
		return "", err
	}
	return dir, nil
}

// syntheticPath is where file i of a synthetic tree lives.
func syntheticPath(i int) string {
	return fmt.Sprintf("src/m%03d/p%02d/f%06d.go", i/10000, (i/100)%100, i)
}

// writeFastImport streams the synthetic history onto main.
func writeFastImport(w io.Writer, size RepoSize) error {
	bw := bufio.NewWriterSize(w, 1<<20)
	when := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	data := func(s string) { fmt.Fprintf(bw, "data %d\n%s\n", len(s), s) }
	commit := func(n int, msg string) {
		fmt.Fprintf(bw, "commit refs/heads/main\ncommitter forged bench <bench@forge.invalid> %d +0000\n", when+int64(n))
		data(msg)
		if n == 0 {
			fmt.Fprintf(bw, "from refs/heads/main^0\n")
		}
	}
	source := func(i, rev int) string {
		return fmt.Sprintf("package p%d\n\n// F%d is file %d of the synthetic repository, revision %d.\nfunc F%d() int { return %d }\n",
			(i/100)%100, i, i, rev, i, rev)
	}
	commit(0, fmt.Sprintf("synthetic tree of %d files", size.Files))
	for i := range size.Files {
		fmt.Fprintf(bw, "M 100644 inline %s\n", syntheticPath(i))
		data(source(i, 0))
	}
	for n := 1; n < size.Commits; n++ {
		i := (n * 7919) % size.Files // spread the changes over the tree
		commit(n, fmt.Sprintf("change file %d (commit %d)", i, n))
		fmt.Fprintf(bw, "M 100644 inline %s\n", syntheticPath(i))
		data(source(i, n))
	}
	fmt.Fprintf(bw, "done\n")
	return bw.Flush()
}

// hostGitEnv is a hermetic environment for the benchmark's own host git
// (the generator and the native floor): no user or system configuration,
// fixed identities.
func hostGitEnv(home string) []string {
	return []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + home, "LC_ALL=C",
		"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=" + os.DevNull,
		"GIT_AUTHOR_NAME=forged bench", "GIT_AUTHOR_EMAIL=bench@forge.invalid",
		"GIT_COMMITTER_NAME=forged bench", "GIT_COMMITTER_EMAIL=bench@forge.invalid",
	}
}

// gitHost runs the host's git in dir with hostGitEnv.
func gitHost(ctx context.Context, home, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", append([]string{"-C", dir}, args...)...)
	cmd.Env = hostGitEnv(home)
	out, err := cmd.CombinedOutput()
	return string(out), err
}
