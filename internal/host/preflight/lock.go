package preflight

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/forgedev/forged/internal/kit/atomicfile"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/docker/docker/client"
	"github.com/gofrs/flock"

	"github.com/forgedev/forged/failure"
)

// LockRecord names the owner of a Docker context.
type LockRecord struct {
	PID int `json:"pid"`
	// StartTime is field 22 of /proc/PID/stat (clock ticks after boot);
	// with PID it identifies the process across PID reuse. 0 when unknown.
	StartTime  uint64    `json:"startTime"`
	Hostname   string    `json:"hostname"`
	Context    string    `json:"context"`
	Token      string    `json:"token"`
	AcquiredAt time.Time `json:"acquiredAt"`
}

// ContextLock is the ownership of one Docker context by this process.
type ContextLock struct {
	lock     *flock.Flock
	record   string // path of the owner record
	owner    LockRecord
	previous *LockRecord

	mu       sync.Mutex
	released bool
}

// ownerWait bounds how long a loser waits for the winner's record to show.
const ownerWait = 500 * time.Millisecond

// AcquireContextLock makes this process the one forged that drives the
// Docker context identified by contextKey (its endpoint, for example
// client.DaemonHost(); empty means the default endpoint). The lock lives in
// STATEROOT/locks, named by a hash of the key: forged instances exclude
// each other only when they share the state root.
//
// Two things guard the context: an exclusive file lock, which the kernel
// drops when its holder dies, and an owner record (pid, process start time,
// hostname). A record whose process is alive with the same start time keeps
// the context owned even when the file lock is free; a record from a dead
// process, from a reused PID (different start time) or from another host is
// stale and is taken over. A live owner yields a *failure.Error with code
// DockerContextOwned naming its pid. One process holds at most one lock per
// context: acquiring it twice fails as well.
func AcquireContextLock(stateRoot, contextKey string) (*ContextLock, error) {
	contextKey = strings.TrimSpace(contextKey)
	if contextKey == "" {
		contextKey = client.DefaultDockerHost
	}
	lockPath, recordPath := contextLockPaths(stateRoot, contextKey)
	if err := os.MkdirAll(filepath.Dir(lockPath), 0o700); err != nil {
		return nil, fmt.Errorf("docker context lock: %w", err)
	}
	fl := flock.New(lockPath, flock.SetFlag(os.O_CREATE|os.O_RDWR), flock.SetPermissions(0o600))
	locked, err := fl.TryLock()
	if err != nil {
		return nil, fmt.Errorf("docker context lock %s: %w", lockPath, err)
	}
	if !locked {
		return nil, ownedError(contextKey, waitForOwner(recordPath))
	}
	prev, err := readRecord(recordPath)
	if err == nil && ownerLive(prev) {
		_ = fl.Close()
		return nil, ownedError(contextKey, &prev)
	}
	me, err := selfRecord(contextKey)
	if err == nil {
		err = writeRecord(recordPath, me)
	}
	if err != nil {
		_ = fl.Close()
		return nil, fmt.Errorf("docker context lock %s: %w", lockPath, err)
	}
	l := &ContextLock{lock: fl, record: recordPath, owner: me}
	if prev.PID != 0 {
		l.previous = &prev
	}
	return l, nil
}

// Owner is this process's record.
func (l *ContextLock) Owner() LockRecord { return l.owner }

// Previous is the stale record that was taken over, or nil.
func (l *ContextLock) Previous() *LockRecord { return l.previous }

// Path is the lock file.
func (l *ContextLock) Path() string { return l.lock.Path() }

// Release gives the context up: it removes the owner record only while it
// is still this lock's (same token) and drops the file lock. The lock file
// itself stays: removing it could split a waiting owner from a new one.
// Release is idempotent.
func (l *ContextLock) Release() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.released {
		return nil
	}
	l.released = true
	var errs []error
	if rec, err := readRecord(l.record); err == nil && rec.Token == l.owner.Token {
		if err := os.Remove(l.record); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if err := l.lock.Close(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// contextLockPaths names the lock file and the owner record of a context.
func contextLockPaths(stateRoot, contextKey string) (lockPath, recordPath string) {
	sum := sha256.Sum256([]byte(contextKey))
	base := filepath.Join(stateRoot, "locks", "docker-context-"+hex.EncodeToString(sum[:])[:24])
	return base + ".lock", base + ".owner.json"
}

// ownerLive reports whether rec names a process that still runs: its host
// is this one, its pid exists (and is not a zombie), and its start time is
// the recorded one. A live process whose start time cannot be read, or a
// record without one, is protected.
func ownerLive(rec LockRecord) bool {
	if rec.PID <= 0 {
		return false
	}
	if host, err := os.Hostname(); err == nil && rec.Hostname != "" && rec.Hostname != host {
		return false // the file lock is free and a remote pid cannot be judged
	}
	alive, start, known := processIdentity(rec.PID)
	switch {
	case !alive:
		return false
	case !known || rec.StartTime == 0:
		return true
	default:
		return start == rec.StartTime
	}
}

// waitForOwner reads the record of the process holding the file lock,
// giving a winner that has just locked a moment to write it.
func waitForOwner(recordPath string) *LockRecord {
	deadline := time.Now().Add(ownerWait)
	for {
		rec, err := readRecord(recordPath)
		if err == nil && ownerLive(rec) {
			return &rec
		}
		if time.Now().After(deadline) {
			if err == nil {
				return &rec
			}
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func ownedError(contextKey string, owner *LockRecord) error {
	if owner == nil {
		return failure.New(DockerContextOwned, "Docker context %s is owned by another forged (pid unknown)", contextKey)
	}
	return failure.New(DockerContextOwned, "Docker context %s is owned by forged pid %d on %s since %s",
		contextKey, owner.PID, owner.Hostname, owner.AcquiredAt.Format(time.RFC3339))
}

func selfRecord(contextKey string) (LockRecord, error) {
	host, _ := os.Hostname()
	pid := os.Getpid()
	_, start, _ := processIdentity(pid)
	token := make([]byte, 16)
	if _, err := rand.Read(token); err != nil {
		return LockRecord{}, err
	}
	return LockRecord{
		PID: pid, StartTime: start, Hostname: host, Context: contextKey,
		Token: hex.EncodeToString(token), AcquiredAt: time.Now().UTC(),
	}, nil
}

func readRecord(path string) (LockRecord, error) {
	var rec LockRecord
	data, err := os.ReadFile(path)
	if err != nil {
		return rec, err
	}
	err = json.Unmarshal(data, &rec)
	return rec, err
}

// writeRecord replaces the record atomically (temporary file and rename).
func writeRecord(path string, rec LockRecord) error {
	data, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	return atomicfile.Write(path, data, 0o600)
}
