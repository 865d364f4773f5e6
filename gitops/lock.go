package gitops

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/gofrs/flock"
)

// lockRetry is how often a waiting AcquireRepoLock retries.
const lockRetry = 25 * time.Millisecond

// AcquireRepoLock takes the coordinator lock of one host repository: an
// exclusive flock(2) on StateRoot/locks/<sha256 of the repository's absolute
// path>.lock. The lock excludes other goroutines (each call opens its own
// descriptor) and other processes. It waits until the lock is free or ctx
// is done, in which case the error wraps ctx.Err().
//
// The repository path is made absolute and, when it exists, symlink-free,
// so spellings of one repository share a lock. Lock files are left in
// place; deleting them would race with waiters. The caller must call
// release exactly once; further calls are no-ops.
func AcquireRepoLock(ctx context.Context, stateRoot, repoPath string) (release func() error, err error) {
	path, err := repoLockPath(stateRoot, repoPath)
	if err != nil {
		return nil, fmt.Errorf("repository lock: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("repository lock: %w", err)
	}
	fl := flock.New(path, flock.SetPermissions(0o600))
	locked, err := fl.TryLockContext(ctx, lockRetry)
	if err != nil {
		return nil, fmt.Errorf("repository lock %s: %w", repoPath, err)
	}
	if !locked { // not reachable with TryLockContext, kept for safety
		return nil, fmt.Errorf("repository lock %s: not acquired", repoPath)
	}
	var once sync.Once
	return func() error {
		var err error
		once.Do(func() { err = fl.Unlock() })
		return err
	}, nil
}

// repoLockPath is the lock file of repoPath under stateRoot.
func repoLockPath(stateRoot, repoPath string) (string, error) {
	key, err := filepath.Abs(repoPath)
	if err != nil {
		return "", err
	}
	if resolved, err := filepath.EvalSymlinks(key); err == nil {
		key = resolved
	}
	sum := sha256.Sum256([]byte(key))
	return filepath.Join(stateRoot, "locks", hex.EncodeToString(sum[:])+".lock"), nil
}
