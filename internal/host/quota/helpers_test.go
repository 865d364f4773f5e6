package quota

import "os/exec"

func osCommand(name string, args ...string) *exec.Cmd { return exec.Command(name, args...) }
