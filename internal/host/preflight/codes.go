package preflight

import (
	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/messages"
)

// Codes a Report or a context lock can carry: names in this package for
// codes registered in package failure (their meanings live there).
var (
	// DockerUnreachable: no engine answered Ping, Info or ServerVersion in
	// time.
	DockerUnreachable = failure.DockerUnreachable
	// PlatformUnsupported: forged's own OS cannot host Docker sandboxes.
	PlatformUnsupported = failure.PlatformUnsupported
	// DockerLinuxRequired: the engine runs non-Linux containers.
	DockerLinuxRequired = failure.DockerLinuxRequired
	// DockerRootlessRequired: the engine is rootful and rootful was not
	// explicitly allowed.
	DockerRootlessRequired = failure.DockerRootlessRequired
	// DockerDiskLow: the Docker root directory is under disk pressure.
	DockerDiskLow = failure.DockerDiskLow
	// DockerMemoryLow: available memory less the host reserve holds no
	// attempt.
	DockerMemoryLow = failure.DockerMemoryLow
	// DockerCPULow: the cores left after the host's share hold no attempt.
	DockerCPULow = failure.DockerCPULow
	// DockerContextOwned: another live forged owns the Docker context.
	DockerContextOwned = failure.DockerContextOwned
)

// MaintenanceAllowedFor is messages.MaintenanceAllowedFor.
func MaintenanceAllowedFor(code failure.Code) bool { return messages.MaintenanceAllowedFor(code) }
