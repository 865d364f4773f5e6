package preflight

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// processIdentity reports whether pid runs (a zombie does not) and its
// start time, field 22 of /proc/PID/stat; known is false when the start
// time cannot be read.
func processIdentity(pid int) (alive bool, start uint64, known bool) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return false, 0, false
		}
		err := syscall.Kill(pid, 0)
		return err == nil || errors.Is(err, syscall.EPERM), 0, false
	}
	state, start, err := parseProcStat(string(data))
	if err != nil {
		return true, 0, false
	}
	return state != "Z" && state != "X", start, true
}

// parseProcStat returns the state (field 3) and the start time (field 22)
// of a /proc/PID/stat line. The command name (field 2) is parenthesised
// and may itself hold spaces and parentheses, so fields are counted after
// its last ')'.
func parseProcStat(stat string) (state string, start uint64, err error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return "", 0, errors.New("proc stat: no command name")
	}
	fields := strings.Fields(stat[i+1:]) // fields[0] is field 3
	const startField = 22 - 3
	if len(fields) <= startField {
		return "", 0, errors.New("proc stat: too few fields")
	}
	start, err = strconv.ParseUint(fields[startField], 10, 64)
	if err != nil {
		return "", 0, fmt.Errorf("proc stat start time: %w", err)
	}
	return fields[0], start, nil
}
