//go:build !linux

package preflight

import "errors"

func canPtraceOthers() error { return errors.New("not on Linux") }
