// Package preflight decides whether this host may run sandbox attempts, and
// how many at once.
//
// A Checker asks the Docker engine (through the Engine API: Ping, Info,
// ServerVersion, each under its own deadline) and the host (/proc/meminfo,
// statfs of the Docker root directory, the CPU count and cgroup quota) and
// turns the answers into a Report: the engine's identity and security
// features, network isolation (an IsolationProber verifies that attempt
// networks reach no host address; probed once per engine and TTL) and the
// engine's internal-network DNS status, disk pressure with hysteresis,
// memory and CPU admission, and the resulting capacity. Unverified
// isolation does not make the host unavailable: it refuses only the
// attempts that need a network (NetworkFacts.NetworkErr). When the capacity is 0 the Report carries a stable
// failure code (DockerUnreachable, PlatformUnsupported, ...) and a reason
// with the numbers. A Cache keeps the latest Report for a TTL and numbers
// every refresh with a generation.
//
// The pure rules are exported for their tests and for callers that only
// need the arithmetic: EvaluateDiskPressure and Capacity.
//
// AcquireContextLock makes sure one forged owns one Docker context: a file
// lock keyed by the context endpoint, plus a JSON owner record that lets a
// stale owner (dead process, or a PID reused by another process) be taken
// over.
package preflight
