//go:build !linux

package worker

// protectProcess is Linux-only; elsewhere it does nothing.
func protectProcess() {}

// killStragglers is Linux-only; elsewhere only the task's process group is
// killed.
func killStragglers() {}
