package preflight

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/failure"
)

const testContext = "unix:///var/run/docker.sock"

// plantRecord writes an owner record as if some process held the context.
func plantRecord(t *testing.T, root string, rec LockRecord) {
	t.Helper()
	_, recordPath := contextLockPaths(root, testContext)
	require.NoError(t, os.MkdirAll(root+"/locks", 0o700))
	require.NoError(t, writeRecord(recordPath, rec))
}

func selfIdentity(t *testing.T) (int, uint64, string) {
	t.Helper()
	alive, start, known := processIdentity(os.Getpid())
	require.True(t, alive)
	if !known {
		t.Skip("process start times are not available on this platform")
	}
	host, err := os.Hostname()
	require.NoError(t, err)
	return os.Getpid(), start, host
}

func TestContextLockAcquireRelease(t *testing.T) {
	root := t.TempDir()
	l, err := AcquireContextLock(root, testContext)
	require.NoError(t, err)
	assert.Nil(t, l.Previous())
	assert.Equal(t, os.Getpid(), l.Owner().PID)
	assert.Positive(t, l.Owner().StartTime)

	_, err = AcquireContextLock(root, testContext)
	assert.True(t, failure.Is(err, DockerContextOwned), "a second acquisition in one process: %v", err)
	assert.Contains(t, err.Error(), fmt.Sprintf("pid %d", os.Getpid()))

	other, err := AcquireContextLock(root, "tcp://10.0.0.2:2376")
	require.NoError(t, err, "another context is independent")
	require.NoError(t, other.Release())

	require.NoError(t, l.Release())
	require.NoError(t, l.Release(), "idempotent")
	_, recordPath := contextLockPaths(root, testContext)
	assert.NoFileExists(t, recordPath)
	assert.FileExists(t, l.Path(), "the lock file is never removed")

	l, err = AcquireContextLock(root, testContext)
	require.NoError(t, err, "free again")
	require.NoError(t, l.Release())
}

func TestContextLockStaleRecords(t *testing.T) {
	pid, start, host := selfIdentity(t)
	cases := []struct {
		name  string
		rec   LockRecord
		owned bool
	}{
		{"reused pid: same pid, other start time", LockRecord{PID: pid, StartTime: start + 12345, Hostname: host}, false},
		{"live pid with its start time", LockRecord{PID: pid, StartTime: start, Hostname: host}, true},
		{"live pid without a start time is protected", LockRecord{PID: pid, Hostname: host}, true},
		{"dead pid", LockRecord{PID: 1 << 30, StartTime: 1, Hostname: host}, false},
		{"another host", LockRecord{PID: pid, StartTime: start, Hostname: host + "-elsewhere"}, false},
		{"no pid", LockRecord{Hostname: host}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			tc.rec.Token, tc.rec.AcquiredAt = "theirs", time.Now().UTC()
			plantRecord(t, root, tc.rec)
			l, err := AcquireContextLock(root, testContext)
			if tc.owned {
				require.Error(t, err)
				assert.Equal(t, DockerContextOwned, failure.CodeOf(err))
				assert.Contains(t, err.Error(), fmt.Sprintf("pid %d", tc.rec.PID))
				_, recordPath := contextLockPaths(root, testContext)
				rec, err := readRecord(recordPath)
				require.NoError(t, err)
				assert.Equal(t, "theirs", rec.Token, "the owner's record is untouched")
				return
			}
			require.NoError(t, err)
			defer l.Release()
			if tc.rec.PID != 0 {
				require.NotNil(t, l.Previous())
				assert.Equal(t, tc.rec.StartTime, l.Previous().StartTime)
			}
			assert.NotEqual(t, "theirs", l.Owner().Token)
		})
	}
}

func TestContextLockCorruptRecordIsTakenOver(t *testing.T) {
	root := t.TempDir()
	_, recordPath := contextLockPaths(root, testContext)
	require.NoError(t, os.MkdirAll(root+"/locks", 0o700))
	require.NoError(t, os.WriteFile(recordPath, []byte("{not json"), 0o600))
	l, err := AcquireContextLock(root, testContext)
	require.NoError(t, err)
	require.NoError(t, l.Release())
}

func TestContextLockReleaseKeepsAnotherOwnersRecord(t *testing.T) {
	root := t.TempDir()
	l, err := AcquireContextLock(root, testContext)
	require.NoError(t, err)
	// Someone replaced the record (an operator, or an owner that decided
	// this one was stale): Release must not delete it.
	plantRecord(t, root, LockRecord{PID: 1 << 30, Token: "theirs"})
	require.NoError(t, l.Release())
	_, recordPath := contextLockPaths(root, testContext)
	rec, err := readRecord(recordPath)
	require.NoError(t, err)
	assert.Equal(t, "theirs", rec.Token)
}

func TestEmptyContextKeyIsTheDefaultEndpoint(t *testing.T) {
	a, b := contextLockPaths("/s", "")
	c, d := contextLockPaths("/s", testContext)
	assert.NotEqual(t, a, c)
	assert.NotEqual(t, b, d)
	root := t.TempDir()
	l, err := AcquireContextLock(root, " ")
	require.NoError(t, err)
	defer l.Release()
	assert.NotEmpty(t, l.Owner().Context)
}
