package gitops

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkPrepare times Prepare on the repository FORGED_PREPARE_REPO
// names (a B7 synthetic repository, say ~/.cache/forged-bench/
// repo-100000f-1000c/repo; skipped without one): memo-miss computes the
// build context's digest from every blob, memo-hit takes it from the memo,
// open writes the context as a build does. Each iteration bundles the
// input, as an attempt does.
func BenchmarkPrepare(b *testing.B) {
	repo := os.Getenv("FORGED_PREPARE_REPO")
	if repo == "" {
		b.Skip("FORGED_PREPARE_REPO names no repository")
	}
	req := func(b *testing.B, memo string) PrepareRequest {
		work := filepath.Join(b.TempDir(), "attempt")
		if err := os.Mkdir(work, 0o700); err != nil {
			b.Fatal(err)
		}
		return PrepareRequest{RepoPath: repo, AttemptID: testAttemptID, WorktreeKey: "forge/bench-prepare", DefaultBranch: "main",
			ExecutionPolicy: "adoption", WorkDir: work, ContextMemoDir: memo}
	}
	ctx := context.Background()
	b.Run("memo-miss", func(b *testing.B) {
		for b.Loop() {
			if _, err := Prepare(ctx, NewRunner(), req(b, "")); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("memo-hit", func(b *testing.B) {
		memo := b.TempDir()
		if _, err := Prepare(ctx, NewRunner(), req(b, memo)); err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if _, err := Prepare(ctx, NewRunner(), req(b, memo)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("open", func(b *testing.B) {
		p, err := Prepare(ctx, NewRunner(), req(b, ""))
		if err != nil {
			b.Fatal(err)
		}
		dir := b.TempDir()
		for b.Loop() {
			f, err := OpenContext(ctx, NewRunner(), p, dir)
			if err != nil {
				b.Fatal(err)
			}
			_ = f.Close()
		}
	})
}
