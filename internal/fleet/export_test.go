package fleet

// Choose and StateOf are placement's choice and a runner's directory
// entry, for the in-process tests (no cluster).
var (
	StateOf = stateOf
)

// DirectoryView is the API's form of a directory read.
var DirectoryView = directoryView
