package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// fleetBinary is the fleet build's file name: `go build -tags fleet` of
// this package, installed beside forged (docs/operations.md).
const fleetBinary = "forged-fleet"

// execFleetBuild replaces this process with the fleet build beside this
// executable, with the same arguments and environment (so the same flags,
// FORGED_* variables and configuration file), keeping its process id, so
// a service manager sees no difference. It returns only on failure. The
// lean build calls it where fleet settings are given, before anything is
// started.
func execFleetBuild() error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("fleet: find this executable: %w", err)
	}
	path := filepath.Join(filepath.Dir(self), fleetBinary)
	info, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("fleet: this forged is the lean build, without the fleet, and its fleet build is not beside it: install %s (docs/operations.md), or run without fleet settings: %w", path, err)
	}
	if !info.Mode().IsRegular() {
		return fmt.Errorf("fleet: %s is not a regular file", path)
	}
	if selfInfo, err := os.Stat(self); err == nil && os.SameFile(info, selfInfo) {
		// A lean build installed under the fleet build's name would hand
		// itself to itself for ever.
		return errors.New("fleet: " + path + " is a lean build of forged: build it with -tags fleet")
	}
	argv := append([]string{path}, os.Args[1:]...)
	if err := syscall.Exec(path, argv, os.Environ()); err != nil {
		return fmt.Errorf("fleet: run %s: %w", path, err)
	}
	return nil
}
