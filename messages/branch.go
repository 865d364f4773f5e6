package messages

import (
	"regexp"
	"strings"
)

// branchChars is the dispatch's character set for branch names.
var branchChars = regexp.MustCompile(`^[A-Za-z0-9._/-]{1,200}$`)

// ValidBranch reports whether name is a short branch name (what follows
// refs/heads/) forged accepts anywhere: in a dispatch, in the worker's
// start packet and in host git. It is the one rule: the dispatch's
// character set ([A-Za-z0-9._/-], 1-200 bytes) and git's reference-name
// rules (git check-ref-format --branch) that apply to it: no leading "-",
// no "..", no "//", no leading or trailing "/", no trailing ".", no
// component starting with "." or ending in ".lock". ("@{", spaces and
// control characters are outside the character set.)
func ValidBranch(name string) bool {
	if !branchChars.MatchString(name) || strings.HasPrefix(name, "-") ||
		strings.Contains(name, "..") || strings.Contains(name, "//") ||
		strings.HasPrefix(name, "/") || strings.HasSuffix(name, "/") || strings.HasSuffix(name, ".") {
		return false
	}
	for _, part := range strings.Split(name, "/") {
		if strings.HasPrefix(part, ".") || strings.HasSuffix(part, ".lock") {
			return false
		}
	}
	return true
}
