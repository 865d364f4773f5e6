package preflight

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// availableMemory reads MemAvailable from /proc/meminfo.
func availableMemory() (int64, error) {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	return parseMemAvailable(data)
}

// parseMemAvailable extracts MemAvailable (in kB) as bytes.
func parseMemAvailable(meminfo []byte) (int64, error) {
	sc := bufio.NewScanner(bytes.NewReader(meminfo))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "MemAvailable:" {
			kb, err := strconv.ParseInt(fields[1], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("meminfo MemAvailable: %w", err)
			}
			return kb * 1024, nil
		}
	}
	return 0, fmt.Errorf("meminfo has no MemAvailable")
}

// cgroupCPUQuota returns the CPU quota of this process's cgroup in cores,
// when one is set (cgroup v2 cpu.max, else v1 cfs quota).
func cgroupCPUQuota() (float64, bool) {
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		switch {
		case parts[0] == "0" && parts[1] == "":
			for _, dir := range []string{filepath.Join("/sys/fs/cgroup", parts[2]), "/sys/fs/cgroup"} {
				if b, err := os.ReadFile(filepath.Join(dir, "cpu.max")); err == nil {
					if q, ok := parseCPUMax(string(b)); ok {
						return q, true
					}
				}
			}
		case hasController(parts[1], "cpu"):
			for _, dir := range []string{filepath.Join("/sys/fs/cgroup", parts[1], parts[2]), filepath.Join("/sys/fs/cgroup/cpu", parts[2]), "/sys/fs/cgroup/cpu"} {
				quota, err1 := os.ReadFile(filepath.Join(dir, "cpu.cfs_quota_us"))
				period, err2 := os.ReadFile(filepath.Join(dir, "cpu.cfs_period_us"))
				if err1 == nil && err2 == nil {
					if q, ok := parseCPUMax(strings.TrimSpace(string(quota)) + " " + strings.TrimSpace(string(period))); ok {
						return q, true
					}
				}
			}
		}
	}
	return 0, false
}

func hasController(list, name string) bool {
	for _, c := range strings.Split(list, ",") {
		if c == name {
			return true
		}
	}
	return false
}

// parseCPUMax parses "QUOTA PERIOD" (cgroup v2 cpu.max, or the v1 pair);
// "max" or a negative quota means no limit.
func parseCPUMax(s string) (float64, bool) {
	f := strings.Fields(s)
	if len(f) != 2 || f[0] == "max" {
		return 0, false
	}
	quota, err1 := strconv.ParseFloat(f[0], 64)
	period, err2 := strconv.ParseFloat(f[1], 64)
	if err1 != nil || err2 != nil || quota <= 0 || period <= 0 {
		return 0, false
	}
	return quota / period, true
}
