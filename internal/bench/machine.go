package bench

import (
	"bufio"
	"context"
	"os"
	"runtime"
	"strconv"
	"strings"

	"github.com/docker/docker/client"
)

// Machine describes the host a run measured.
type Machine struct {
	CPUModel      string `json:"cpuModel"`
	Cores         int    `json:"cores"`
	MemTotalBytes int64  `json:"memTotalBytes"`
	Kernel        string `json:"kernel"`
	GoVersion     string `json:"goVersion"`
	DockerVersion string `json:"dockerVersion"`
	DockerAPI     string `json:"dockerApi"`
	StorageDriver string `json:"storageDriver"`
	CgroupVersion string `json:"cgroupVersion"`
	// LoadAtStart and LoadAtEnd are /proc/loadavg's 1-minute figures:
	// other work on the host shows here.
	LoadAtStart float64 `json:"loadAtStart"`
	LoadAtEnd   float64 `json:"loadAtEnd"`
}

// DescribeMachine reads the host's facts from /proc and the engine.
func DescribeMachine(ctx context.Context, engine *client.Client) Machine {
	m := Machine{Cores: runtime.NumCPU(), GoVersion: runtime.Version(), LoadAtStart: loadAverage()}
	m.CPUModel = procField("/proc/cpuinfo", "model name")
	if kb, err := strconv.ParseInt(strings.TrimSuffix(procField("/proc/meminfo", "MemTotal"), " kB"), 10, 64); err == nil {
		m.MemTotalBytes = kb << 10
	}
	if raw, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(raw))
	}
	if v, err := engine.ServerVersion(ctx); err == nil {
		m.DockerVersion, m.DockerAPI = v.Version, v.APIVersion
	}
	if info, err := engine.Info(ctx); err == nil {
		m.StorageDriver, m.CgroupVersion = info.Driver, info.CgroupVersion
	}
	return m
}

// procField returns the value of the first "key: value" line of a /proc
// file, or "".
func procField(path, key string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// loadAverage is the 1-minute load average, or 0 when unreadable.
func loadAverage() float64 {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	fields := strings.Fields(string(raw))
	if len(fields) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(fields[0], 64)
	return v
}

// processRSS is the resident set size of a process, from
// /proc/PID/status (VmRSS).
func processRSS(pid int) (int64, error) {
	v := procField("/proc/"+strconv.Itoa(pid)+"/status", "VmRSS")
	kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(v, "kB")), 10, 64)
	if err != nil {
		return 0, err
	}
	return kb << 10, nil
}
