//go:build !linux

package bench

import "errors"

var errNoMount = errors.New("mounting an image needs Linux")

func mountExt4(device, dir, options string) error { return errNoMount }

func unmount(dir string) error { return errNoMount }
