//go:build !linux

package gitops

import "errors"

// limitFileSize is only available on Linux; elsewhere a bounded call fails
// rather than run unbounded.
func limitFileSize(int, int64) error {
	return errors.New("bounding a git process's file size needs Linux (RLIMIT_FSIZE through prlimit)")
}
