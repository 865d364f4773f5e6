package worker

import (
	"errors"
	"fmt"
	"github.com/forgedev/forged/internal/kit/atomicfile"
	"io"
	"os"
	"syscall"
	"time"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/sandbox/lease"
)

// The host renews an attempt's lease by writing a signed lease.Update
// (atomically, by rename) at Config.LeaseUpdatePath, through
// "forged worker lease-update" (WriteLeaseUpdateFile) run with docker exec.
// The worker keeps a lease.Deadline built from its start packet and reads
// the file only when that deadline is reached: an update for this attempt
// and fencing token, signed with the start packet's LeaseControlKey and
// expiring later, moves the deadline and the task keeps running; anything
// else (no file, a malformed, forged, foreign or stale update) leaves the
// deadline where it is and the task is stopped. The task shares the
// worker's user and may write the file too, but it does not know the key.

// newLeaseDeadline is the attempt's lease deadline from its start packet,
// converted to the monotonic clock now.
func (r *run) newLeaseDeadline() *lease.Deadline {
	id := r.pkt.Identity
	return lease.NewDeadline(id.DispatchAttemptID, id.FencingToken, r.pkt.LeaseExpiresAt, r.pkt.LeaseControlKey, nil)
}

// renewLease reads the lease update file and applies it to the deadline.
// It reports whether the lease is still running afterwards; why an update
// was not applied goes to stderr.
func (r *run) renewLease() bool {
	if !r.lease.Expired() {
		return true
	}
	u, err := readLeaseUpdateFile(r.cfg.LeaseUpdatePath)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return false
	case err != nil:
		r.note("lease update ignored: %v", err)
		return false
	}
	if err := r.lease.Apply(u); err != nil {
		if !failure.Is(err, lease.UpdateStale) {
			r.note("lease update ignored: %v", err)
		}
		return false
	}
	if r.lease.Expired() {
		return false
	}
	r.note("lease extended to %s", r.lease.ExpiresAt().UTC().Format(time.RFC3339))
	return true
}

// readLeaseUpdateFile reads and decodes the lease update at path. It does
// not follow a symbolic link, does not block on a FIFO and reads at most
// lease.MaxUpdateBytes (plus one, to notice more): the task may have put
// anything there.
func readLeaseUpdateFile(path string) (lease.Update, error) {
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return lease.Update{}, &os.PathError{Op: "open", Path: path, Err: err}
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return lease.Update{}, err
	}
	if !fi.Mode().IsRegular() {
		return lease.Update{}, fmt.Errorf("%s is not a regular file", path)
	}
	raw, err := io.ReadAll(io.LimitReader(f, lease.MaxUpdateBytes+1))
	if err != nil {
		return lease.Update{}, fmt.Errorf("read %s: %w", path, err)
	}
	return lease.DecodeUpdate(raw)
}

// WriteLeaseUpdateFile reads one encoded lease.Update from stdin (at most
// lease.MaxUpdateBytes), checks that it decodes (the MAC is the worker's
// to verify) and installs those exact bytes at path, mode 0600, through
// the one atomic writer (internal/atomicfile): on any failure path is left
// as it was, and a link planted at path is refused.
//
// It is the body of "forged worker lease-update", which the host runs
// inside the sandbox with docker exec to push a renewal (see
// dockerops.Client.WriteLeaseUpdate).
func WriteLeaseUpdateFile(stdin io.Reader, path string) error {
	raw, err := io.ReadAll(io.LimitReader(stdin, lease.MaxUpdateBytes+1))
	if err != nil {
		return fmt.Errorf("read lease update: %w", err)
	}
	if _, err := lease.DecodeUpdate(raw); err != nil {
		return err
	}
	if err := atomicfile.Write(path, raw, 0o600); err != nil {
		return fmt.Errorf("lease update: %w", err)
	}
	return nil
}
