//go:build !linux

package quota

import "errors"

var errUnsupported = errors.New("loop devices are Linux-only")

func attachLoop(string) (string, error)                 { return "", errUnsupported }
func detachLoop(string) error                           { return errUnsupported }
func loopsBackedBy(func(string) bool) ([]string, error) { return nil, nil }
func backingFile(string) (string, error)                { return "", errUnsupported }
func mountedUsage(string) (Usage, bool)                 { return Usage{}, false }

// Detect reports that volumes cannot be bounded off Linux.
func Detect(bool) Facts {
	return Facts{Mechanism: MechanismNone, Reason: "filesystem images are Linux-only"}
}
func discard(string) (Usage, int, error) { return Usage{}, -1, errDiscardNotMounted }
func closeHeld(int) error                { return errUnsupported }
