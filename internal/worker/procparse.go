package worker

import (
	"bytes"
	"strconv"
	"strings"
)

// parseOpenFilesLimit returns the soft limit of the "Max open files" row
// of a /proc/<pid>/limits document, or 0 when there is none (or it reads
// "unlimited").
func parseOpenFilesLimit(raw []byte) int {
	for _, line := range bytes.Split(raw, []byte{'\n'}) {
		rest, ok := bytes.CutPrefix(line, []byte("Max open files"))
		if !ok {
			continue
		}
		fields := strings.Fields(string(rest))
		if len(fields) == 0 {
			return 0
		}
		n, err := strconv.Atoi(fields[0])
		if err != nil || n < 0 {
			return 0
		}
		return n
	}
	return 0
}

// parseFDSize returns the FDSize field of a /proc/<pid>/status document,
// or 0.
func parseFDSize(raw []byte) int {
	for _, line := range bytes.Split(raw, []byte{'\n'}) {
		rest, ok := bytes.CutPrefix(line, []byte("FDSize:"))
		if !ok {
			continue
		}
		n, err := strconv.Atoi(strings.TrimSpace(string(rest)))
		if err != nil || n < 0 {
			return 0
		}
		return n
	}
	return 0
}
