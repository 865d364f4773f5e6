package cgroups

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"

	"github.com/forgedev/forged/internal/host/mountinfo"
	"github.com/forgedev/forged/internal/kit/text"
)

// Bounds of parsed documents.
const (
	maxLines    = 4096
	maxLineLen  = 4096
	maxPathLen  = 4096
	maxKeyBytes = 128
)

// Membership is one line of /proc/<pid>/cgroup: hierarchy id, the v1
// controllers of that hierarchy (none on the v2 line "0::/path") and the
// process's cgroup path within it.
type Membership struct {
	ID          int
	Controllers []string
	Path        string
}

// ParseProcCgroup parses /proc/<pid>/cgroup ("id:controllers:path" per
// line). Named v1 hierarchies ("name=systemd") are kept as controllers
// with their "name=" prefix.
func ParseProcCgroup(raw []byte) ([]Membership, error) {
	var out []Membership
	err := eachLine(raw, func(n int, line string) error {
		idText, rest, ok := strings.Cut(line, ":")
		if !ok {
			return fmt.Errorf("line %d: no hierarchy id", n)
		}
		controllers, p, ok := strings.Cut(rest, ":")
		if !ok {
			return fmt.Errorf("line %d: no controllers field", n)
		}
		id, err := strconv.Atoi(idText)
		if err != nil || id < 0 {
			return fmt.Errorf("line %d: hierarchy id %q", n, text.ClipMark(idText, 32, "..."))
		}
		if !strings.HasPrefix(p, "/") || len(p) > maxPathLen {
			return fmt.Errorf("line %d: cgroup path is not absolute", n)
		}
		m := Membership{ID: id, Path: p}
		if controllers != "" {
			m.Controllers = strings.Split(controllers, ",")
		}
		out = append(out, m)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("parse /proc/<pid>/cgroup: %w", err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("parse /proc/<pid>/cgroup: empty")
	}
	return out, nil
}

// Mount is one cgroup mount from /proc/self/mountinfo.
type Mount struct {
	Version Version
	// Root is the cgroup path mounted (a sub-tree under a cgroup
	// namespace); Point is where it is mounted.
	Root, Point string
	// Controllers are the v1 hierarchy's controllers (from the super
	// options); empty on v2.
	Controllers []string
}

func (m Mount) has(controller string) bool {
	for _, c := range m.Controllers {
		if c == controller {
			return true
		}
	}
	return false
}

// ParseMountinfo returns the cgroup and cgroup2 mounts listed in a
// /proc/<pid>/mountinfo document; other mounts are skipped.
func ParseMountinfo(raw []byte) ([]Mount, error) {
	var out []Mount
	err := eachLine(raw, func(n int, line string) error {
		fields := strings.Fields(line)
		sep := -1
		for i := 6; i < len(fields); i++ {
			if fields[i] == "-" {
				sep = i
				break
			}
		}
		if len(fields) < 10 || sep < 0 || len(fields) < sep+4 {
			return fmt.Errorf("line %d: malformed", n)
		}
		fstype := fields[sep+1]
		var v Version
		switch fstype {
		case "cgroup":
			v = V1
		case "cgroup2":
			v = V2
		default:
			return nil
		}
		m := Mount{Version: v, Root: mountinfo.Unescape(fields[3]), Point: mountinfo.Unescape(fields[4])}
		if v == V1 {
			for _, opt := range strings.Split(fields[sep+3], ",") {
				switch opt {
				case "rw", "ro":
				default:
					if !strings.Contains(opt, "=") || strings.HasPrefix(opt, "name=") {
						m.Controllers = append(m.Controllers, opt)
					}
				}
			}
		}
		out = append(out, m)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("parse mountinfo: %w", err)
	}
	return out, nil
}

// ParseFlatKeyed parses a "key value" per line document (memory.stat,
// cpu.stat, memory.events, pids.events, memory.oom_control). Values must
// be unsigned integers; "max" reads as the largest one.
func ParseFlatKeyed(raw []byte) (map[string]uint64, error) {
	out := map[string]uint64{}
	err := eachLine(raw, func(n int, line string) error {
		key, value, ok := strings.Cut(line, " ")
		if !ok || key == "" || len(key) > maxKeyBytes {
			return fmt.Errorf("line %d: not \"key value\"", n)
		}
		v, err := ParseValue([]byte(value))
		if err != nil {
			return fmt.Errorf("line %d: %w", n, err)
		}
		out[key] = v
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ParseValue parses a single-value counter file: an unsigned integer, or
// "max" (the largest value), with surrounding white space.
func ParseValue(raw []byte) (uint64, error) {
	s := strings.TrimSpace(string(raw))
	if s == "max" {
		return ^uint64(0), nil
	}
	if s == "" || len(s) > 20 {
		return 0, fmt.Errorf("counter %q is not a number", text.ClipMark(s, 32, "..."))
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("counter %q is not a number", text.ClipMark(s, 32, "..."))
	}
	return v, nil
}

// eachLine calls fn for each non-empty line of raw, within the bounds.
func eachLine(raw []byte, fn func(n int, line string) error) error {
	n := 0
	for len(raw) > 0 {
		var line []byte
		line, raw, _ = bytes.Cut(raw, []byte{'\n'})
		n++
		if n > maxLines {
			return fmt.Errorf("more than %d lines", maxLines)
		}
		if len(line) > maxLineLen {
			return fmt.Errorf("line %d is longer than %d bytes", n, maxLineLen)
		}
		s := strings.TrimRight(string(line), " \t\r")
		if s == "" {
			continue
		}
		if err := fn(n, s); err != nil {
			return err
		}
	}
	return nil
}
