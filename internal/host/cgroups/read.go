package cgroups

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
)

// Reading is one reading of a container's cgroup. Counters the kernel
// does not keep here are reported as unknown (the *Known fields), never
// as zero.
type Reading struct {
	// MemoryPeakBytes is the kernel's memory high-water mark since the
	// cgroup was created (PeakKnown), or else the usage at this moment.
	MemoryPeakBytes uint64
	PeakKnown       bool
	// MemoryUsageBytes is the usage at this moment.
	MemoryUsageBytes uint64
	// OOMKills counts the processes the memory controller's OOM killer
	// killed in the cgroup (OOMKnown).
	OOMKills uint64
	OOMKnown bool
	// PidsMaxEvents counts the forks refused because pids.max was reached
	// (PidsKnown).
	PidsMaxEvents uint64
	PidsKnown     bool
	// CPUUsageNanos and CPUThrottledNanos are the CPU time used and the
	// time the cgroup was throttled by its CPU quota (CPUKnown).
	CPUUsageNanos     uint64
	CPUThrottledNanos uint64
	CPUKnown          bool
}

// Read takes one reading. It fails when the memory counters cannot be
// read (the cgroup is gone, or not readable from here); the others are
// left unknown when their files are missing.
func (c Cgroup) Read() (Reading, error) {
	if c.Version == V2 {
		return c.readV2()
	}
	return c.readV1()
}

func (c Cgroup) readV1() (Reading, error) {
	var r Reading
	var err error
	if r.MemoryUsageBytes, err = readValue(c.Memory, "memory.usage_in_bytes"); err != nil {
		return Reading{}, err
	}
	if r.MemoryPeakBytes, err = readValue(c.Memory, "memory.max_usage_in_bytes"); err != nil {
		return Reading{}, err
	}
	r.PeakKnown = true
	if oom, err := readKeyed(c.Memory, "memory.oom_control"); err == nil {
		r.OOMKills, r.OOMKnown = oom["oom_kill"]
	}
	if c.Pids != "" {
		if ev, err := readKeyed(c.Pids, "pids.events"); err == nil {
			r.PidsMaxEvents, r.PidsKnown = ev["max"]
		}
	}
	if c.CPUAcct != "" {
		if usage, err := readValue(c.CPUAcct, "cpuacct.usage"); err == nil {
			r.CPUUsageNanos, r.CPUKnown = usage, true
		}
	}
	if c.CPU != "" && r.CPUKnown {
		if st, err := readKeyed(c.CPU, "cpu.stat"); err == nil {
			r.CPUThrottledNanos = st["throttled_time"]
		}
	}
	return r, nil
}

func (c Cgroup) readV2() (Reading, error) {
	var r Reading
	var err error
	if r.MemoryUsageBytes, err = readValue(c.Memory, "memory.current"); err != nil {
		return Reading{}, err
	}
	switch peak, err := readValue(c.Memory, "memory.peak"); {
	case err == nil:
		r.MemoryPeakBytes, r.PeakKnown = peak, true
	case errors.Is(err, fs.ErrNotExist): // before Linux 5.19
		r.MemoryPeakBytes = r.MemoryUsageBytes
	default:
		return Reading{}, err
	}
	if ev, err := readKeyed(c.Memory, "memory.events"); err == nil {
		r.OOMKills, r.OOMKnown = ev["oom_kill"]
	}
	if ev, err := readKeyed(c.Pids, "pids.events"); err == nil {
		r.PidsMaxEvents, r.PidsKnown = ev["max"]
	}
	if st, err := readKeyed(c.CPU, "cpu.stat"); err == nil {
		if usage, ok := st["usage_usec"]; ok {
			r.CPUUsageNanos, r.CPUKnown = usage*1000, true
			r.CPUThrottledNanos = st["throttled_usec"] * 1000
		}
	}
	return r, nil
}

func readValue(dir, name string) (uint64, error) {
	raw, err := readBounded(filepath.Join(dir, name), maxCounterBytes)
	if err != nil {
		return 0, err
	}
	v, err := ParseValue(raw)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", name, err)
	}
	return v, nil
}

func readKeyed(dir, name string) (map[string]uint64, error) {
	raw, err := readBounded(filepath.Join(dir, name), maxCounterBytes)
	if err != nil {
		return nil, err
	}
	m, err := ParseFlatKeyed(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return m, nil
}
