// Package cgroups reads a container's resource counters straight from the
// kernel: the cgroup the container's init process belongs to, found from
// /proc/<pid>/cgroup and the host's cgroup mounts (/proc/self/mountinfo),
// for cgroup v1 and v2 and for both Docker cgroup drivers (cgroupfs:
// /docker/<id>; systemd: /system.slice/docker-<id>.scope).
//
// A Reading carries what the kernel keeps for the whole life of the
// cgroup, so one reading taken at any moment before the container's exit
// is exact, whatever happened between two readings:
//
//   - the memory high-water mark (v1 memory.max_usage_in_bytes, v2
//     memory.peak where the kernel has it, Linux 5.19 and later);
//   - the memory OOM-kill count (v1 memory.oom_control oom_kill, v2
//     memory.events oom_kill);
//   - how often a fork was refused at pids.max (pids.events max);
//   - CPU time used and CPU time throttled (v1 cpuacct.usage and cpu.stat
//     throttled_time; v2 cpu.stat usage_usec and throttled_usec).
//
// The cgroup of a container disappears when the container exits: readers
// take their last reading while it still exists. Every parser is bounded
// and fuzzed; nothing read here is controlled by the sandboxed task (the
// files are the kernel's, and /sys is read-only inside a container).
package cgroups
