package preflight

import "github.com/forgedev/forged/messages"

// The host report's types are wire types: they live in package messages,
// which the supervisor's snapshot and the daemon's API carry. The names
// below keep this package's vocabulary.
type (
	// Report is one preflight verdict (messages.HostReport).
	Report = messages.HostReport
	// ServiceImage is one service catalogue entry's state.
	ServiceImage = messages.ServiceImage
	// ToolchainImage is one toolchain image in the engine.
	ToolchainImage = messages.ToolchainImage
	// Platform is the OS forged itself runs on.
	Platform = messages.HostPlatform
	// EngineFacts identify the Docker engine that answered.
	EngineFacts = messages.EngineFacts
)
