package worker

import (
	"bytes"
	"crypto/subtle"
	"encoding/json"
	"io"
	"os"
	"time"
)

// maxLeaseUpdateBytes bounds the lease update document.
const maxLeaseUpdateBytes = 4 << 10

// LeaseUpdate is the document the host may write (atomically, by rename)
// at Config.LeaseUpdatePath when it renews the attempt's lease. The worker
// reads it only when the current lease deadline is reached: when the key
// equals the start packet's LeaseControlKey and the new expiry is later,
// the task keeps running until the new deadline; otherwise the task is
// stopped. Unknown fields make the update invalid.
type LeaseUpdate struct {
	LeaseControlKey string    `json:"leaseControlKey"`
	LeaseExpiresAt  time.Time `json:"leaseExpiresAt"`
}

// readLeaseUpdate returns the expiry of a valid lease update at path, or
// false when there is none (missing, malformed, wrong key, or the packet
// carries no control key).
func readLeaseUpdate(path, key string) (time.Time, bool) {
	if key == "" || path == "" {
		return time.Time{}, false
	}
	f, err := os.Open(path)
	if err != nil {
		return time.Time{}, false
	}
	defer f.Close()
	raw, err := io.ReadAll(io.LimitReader(f, maxLeaseUpdateBytes+1))
	if err != nil || len(raw) > maxLeaseUpdateBytes {
		return time.Time{}, false
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var u LeaseUpdate
	if err := dec.Decode(&u); err != nil || u.LeaseExpiresAt.IsZero() {
		return time.Time{}, false
	}
	if subtle.ConstantTimeCompare([]byte(u.LeaseControlKey), []byte(key)) != 1 {
		return time.Time{}, false
	}
	return u.LeaseExpiresAt, true
}
