// Package mountinfo reads the fields of /proc/<pid>/mountinfo, which the
// cgroup locator and the volume quota both parse.
package mountinfo

import (
	"strconv"
	"strings"
)

// Unescape undoes mountinfo's octal escapes (\040 for a space, \011 for a
// tab...) in a path field. What is not a whole three-digit octal escape is
// kept as it is.
func Unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
