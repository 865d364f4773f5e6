// Command stressprog is a test helper that real-engine tests build as a
// static binary and put into a sandbox image: it exhausts one resource
// the way a real task would, so that forged's telemetry and failure
// classification can be checked against the kernel's own counters.
//
//	stressprog spike MiB HOLD_MS BEFORE_MS AFTER_MS
//	    sleep BEFORE_MS, map MiB of anonymous memory and touch every page,
//	    hold it HOLD_MS, unmap it (usage really falls), sleep AFTER_MS
//	stressprog fds HOLD_MS
//	    open /dev/null until EMFILE, hold the descriptors HOLD_MS, exit 1
//	stressprog grow STEP_MiB
//	    map and touch STEP_MiB of anonymous memory at a time, forever (until
//	    the OOM killer ends it)
//
// It is not part of forged and is never shipped in a sandbox image.
package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "stressprog:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 {
		return errors.New("usage: stressprog spike|fds|grow ...")
	}
	nums := make([]int, 0, len(args)-1)
	for _, a := range args[1:] {
		n, err := strconv.Atoi(a)
		if err != nil {
			return fmt.Errorf("argument %q: %w", a, err)
		}
		nums = append(nums, n)
	}
	switch {
	case args[0] == "spike" && len(nums) == 4:
		return spike(nums[0], ms(nums[1]), ms(nums[2]), ms(nums[3]))
	case args[0] == "fds" && len(nums) == 1:
		return fds(ms(nums[0]))
	case args[0] == "grow" && len(nums) == 1 && nums[0] > 0:
		return grow(nums[0])
	}
	return fmt.Errorf("unknown command %v", args)
}

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

func spike(mib int, hold, before, after time.Duration) error {
	time.Sleep(before)
	size := mib << 20
	mem, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return fmt.Errorf("mmap %d MiB: %w", mib, err)
	}
	page := os.Getpagesize()
	for i := 0; i < size; i += page {
		mem[i] = 1
	}
	time.Sleep(hold)
	if err := syscall.Munmap(mem); err != nil {
		return fmt.Errorf("munmap: %w", err)
	}
	fmt.Printf("spiked %d MiB for %s\n", mib, hold)
	time.Sleep(after)
	return nil
}

func fds(hold time.Duration) error {
	var files []*os.File
	for {
		f, err := os.Open("/dev/null")
		if err != nil {
			if !errors.Is(err, syscall.EMFILE) {
				return err
			}
			break
		}
		files = append(files, f)
	}
	time.Sleep(hold)
	return fmt.Errorf("opened %d descriptors, then: too many open files", len(files))
}

func grow(stepMiB int) error {
	size := stepMiB << 20
	page := os.Getpagesize()
	for total := 0; ; total += stepMiB {
		mem, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
		if err != nil {
			return fmt.Errorf("mmap %d MiB after %d MiB: %w", stepMiB, total, err)
		}
		for i := 0; i < size; i += page {
			mem[i] = 1
		}
	}
}
