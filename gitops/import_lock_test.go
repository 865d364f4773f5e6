package gitops

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/gofrs/flock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/failure"
)

// otherAttemptID is a second attempt importing into the fixture's repository.
const (
	otherAttemptID  = "1c7e4d9f-0e2b-4f3c-9d4e-6a7b8c9d0e1f"
	otherAttemptHex = "1c7e4d9f0e2b4f3c9d4e6a7b8c9d0e1f"
)

// siblingResults makes two results of one commit each, both children of the
// fixture's input, and returns their requests (attempts testAttemptID and
// otherAttemptID, both for the managed branch testKey).
func siblingResults(t *testing.T, f *importFixture) (a, b ImportRequest) {
	t.Helper()
	resultA := f.work(t, 1)
	gitT(t, f.sandbox, "checkout", "--quiet", "--detach", f.input)
	resultB := f.work(t, 1)
	a = f.request(resultA, f.bundle(t, f.input, resultA))
	b = f.request(resultB, writeBundle(t, f.sandbox, []string{f.input}, resultB,
		"refs/forge/results/"+otherAttemptHex, resultB+"\n^"+f.input+"\n"))
	b.AttemptID = otherAttemptID
	return a, b
}

// importAsync runs the import on its own goroutine; the channel gets its
// error.
func importAsync(ctx context.Context, req ImportRequest) <-chan error {
	done := make(chan error, 1)
	go func() { done <- runImport(ctx, NewRunner(), req) }()
	return done
}

// TestImportsOfOneRepositoryOverlapTheirUnpacking parks import A once it
// has unpacked and proven its result, and runs import B into the same
// repository the whole way, its branch move included. With the repository
// lock held across the unpacking (as it was), B would wait for A, which
// waits for B, until the test's deadline.
func TestImportsOfOneRepositoryOverlapTheirUnpacking(t *testing.T) {
	t.Parallel()
	f := newImportFixture(t)
	reqA, reqB := siblingResults(t, f)
	reqA.WorktreeKey, reqB.WorktreeKey = "forge/a", "forge/b"
	ctx := testCtx(t)

	parked, resume := make(chan struct{}), make(chan struct{})
	var once sync.Once
	unpark := func() { once.Do(func() { close(resume) }) }
	t.Cleanup(unpark)
	reqA.beforeLock = func() {
		close(parked)
		<-resume
	}
	reqB.beforeLock = func() {
		// Both quarantines exist now: the two unpackings overlap.
		assert.DirExists(t, filepath.Join(f.state, "quarantine", testAttemptHex))
		assert.DirExists(t, filepath.Join(f.state, "quarantine", otherAttemptHex))
	}
	doneA := importAsync(ctx, reqA)
	select {
	case <-parked:
	case err := <-doneA:
		t.Fatalf("import A ended before it reached the move: %v", err)
	case <-ctx.Done():
		t.Fatal("import A never reached the move")
	}

	require.NoError(t, runImport(ctx, NewRunner(), reqB), "B unpacks, proves and moves while A is parked")
	assert.Equal(t, reqB.ResultCommitSHA, refOf(t, f.repo, "refs/heads/forge/b"))
	assert.Empty(t, refOf(t, f.repo, "refs/heads/forge/a"), "A has not moved yet")

	unpark()
	require.NoError(t, <-doneA)
	assert.Equal(t, reqA.ResultCommitSHA, refOf(t, f.repo, "refs/heads/forge/a"))
	gitT(t, f.repo, "fsck", "--strict", "--no-dangling")
	f.assertTidy(t)
	assert.NoDirExists(t, filepath.Join(f.state, "quarantine", otherAttemptHex))
}

// TestConcurrentImportsOfOneBranchStayFenced releases two imports of
// sibling results for one managed branch at once, both proven and waiting
// for the move: exactly one moves the branch, the other is refused by the
// compare-and-swap, and each consults AssertCurrent with the repository
// lock held (another descriptor cannot take it).
func TestConcurrentImportsOfOneBranchStayFenced(t *testing.T) {
	t.Parallel()
	f := newImportFixture(t)
	reqA, reqB := siblingResults(t, f)
	ctx := testCtx(t)
	lockPath, err := repoLockPath(f.state, f.repo)
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Dir(lockPath), 0o700))

	arrived, release := make(chan struct{}, 2), make(chan struct{})
	var once sync.Once
	open := func() { once.Do(func() { close(release) }) }
	t.Cleanup(open)
	var mu sync.Mutex
	fenceChecks := 0
	for _, req := range []*ImportRequest{&reqA, &reqB} {
		req.beforeLock = func() {
			arrived <- struct{}{}
			<-release
		}
		req.AssertCurrent = func() error {
			probe := flock.New(lockPath)
			locked, err := probe.TryLock()
			assert.NoError(t, err)
			assert.False(t, locked, "AssertCurrent runs under the repository lock")
			if locked {
				_ = probe.Unlock()
			}
			mu.Lock()
			fenceChecks++
			mu.Unlock()
			return nil
		}
	}
	doneA, doneB := importAsync(ctx, reqA), importAsync(ctx, reqB)
	for range 2 {
		select {
		case <-arrived:
		case err := <-doneA:
			t.Fatalf("import A ended before it reached the move: %v", err)
		case err := <-doneB:
			t.Fatalf("import B ended before it reached the move: %v", err)
		case <-ctx.Done():
			t.Fatal("the imports never reached the move")
		}
	}
	open()
	errA, errB := <-doneA, <-doneB

	require.True(t, (errA == nil) != (errB == nil), "exactly one import moves the branch: A %v, B %v", errA, errB)
	winner, lost := reqA, errB
	if errA != nil {
		winner, lost = reqB, errA
	}
	requireCode(t, lost, failure.SandboxOutputConflict, "changed after the sandbox input was captured")
	assert.Equal(t, winner.ResultCommitSHA, refOf(t, f.repo, "refs/heads/"+testKey))
	assert.Equal(t, 2, fenceChecks, "both imports consulted the fence")
	f.assertTidy(t)
	assert.NoDirExists(t, filepath.Join(f.state, "quarantine", otherAttemptHex))
}
