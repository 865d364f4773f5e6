package preflight

import "github.com/forgedev/forged/failure"

// Codes a Report or a context lock can carry. They are part of forged's
// external contract, like the codes in package failure.
const (
	// DockerUnreachable: no engine answered Ping, Info or ServerVersion in
	// time.
	DockerUnreachable = failure.DockerUnreachable
	// PlatformUnsupported: forged's own OS cannot host Docker sandboxes.
	PlatformUnsupported failure.Code = "platform_unsupported"
	// DockerLinuxRequired: the engine runs non-Linux containers.
	DockerLinuxRequired failure.Code = "docker_linux_required"
	// DockerRootlessRequired: the engine is rootful and rootful was not
	// explicitly allowed.
	DockerRootlessRequired failure.Code = "docker_rootless_required"
	// DockerDiskLow: the Docker root directory is under disk pressure.
	DockerDiskLow failure.Code = "docker_disk_low"
	// DockerMemoryLow: available memory less the host reserve holds no
	// attempt.
	DockerMemoryLow failure.Code = "docker_memory_low"
	// DockerCPULow: the cores left after the host's share hold no attempt.
	DockerCPULow failure.Code = "docker_cpu_low"
	// DockerContextOwned: another live forged owns the Docker context.
	DockerContextOwned failure.Code = "docker_context_owned"
)

// MaintenanceAllowedFor reports whether Docker maintenance (reaping
// leftovers, image and build-cache GC) may run while a Report carries code:
// always when the host is available (code ""), and under the capacity-low
// codes, whose cure is often the maintenance itself. It is refused while the
// engine is unreachable or unsuitable.
func MaintenanceAllowedFor(code failure.Code) bool {
	switch code {
	case "", DockerDiskLow, DockerMemoryLow, DockerCPULow:
		return true
	}
	return false
}
