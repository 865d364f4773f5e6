package worker

import (
	"io/fs"
	"strings"
)

// validTreeName reports whether git accepts name as a tree entry of the
// given mode under "fsck --strict": no ".git" look-alike (any case, HFS+
// ignorable code points, NTFS trailing dots and spaces or short name), and
// no .gitmodules look-alike that is a symlink.
func validTreeName(name string, mode fs.FileMode) bool {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") {
		return false
	}
	if isHFSDot(name, "git") || isNTFSDot(name, "git", "") || isNTFSShortGit(name) {
		return false
	}
	if mode&fs.ModeSymlink != 0 && (isHFSDot(name, "gitmodules") || isNTFSDot(name, "gitmodules", "gi7eba")) {
		return false
	}
	return true
}

// hfsIgnorable are the code points HFS+ ignores in file names.
var hfsIgnorable = map[rune]bool{
	0x200c: true, 0x200d: true, 0x200e: true, 0x200f: true,
	0x202a: true, 0x202b: true, 0x202c: true, 0x202d: true, 0x202e: true,
	0x206a: true, 0x206b: true, 0x206c: true, 0x206d: true, 0x206e: true, 0x206f: true,
	0xfeff: true,
}

// isHFSDot reports whether name reads "."+needle on HFS+: ASCII case
// folded, ignorable code points dropped.
func isHFSDot(name, needle string) bool {
	var b strings.Builder
	for _, r := range name {
		if hfsIgnorable[r] {
			continue
		}
		if r > 0x7f {
			return false
		}
		b.WriteRune(r)
	}
	return strings.EqualFold(b.String(), "."+needle)
}

// isNTFSDot reports whether name reads "."+needle on NTFS: trailing dots
// and spaces (or an alternate data stream) ignored, or an 8.3 short name
// (first six characters of needle, or shortPrefix, then "~" and a digit).
func isNTFSDot(name, needle, shortPrefix string) bool {
	if len(name) > len(needle) && name[0] == '.' && strings.EqualFold(name[1:1+len(needle)], needle) &&
		onlyDotsAndSpaces(name[1+len(needle):]) {
		return true
	}
	if len(needle) >= 6 && len(name) >= 8 && strings.EqualFold(name[:6], needle[:6]) &&
		name[6] == '~' && name[7] >= '1' && name[7] <= '4' && onlyDotsAndSpaces(name[8:]) {
		return true
	}
	if len(shortPrefix) == 6 && len(name) >= 8 {
		tilde := strings.IndexByte(name[:8], '~')
		if tilde >= 1 && tilde <= 6 && strings.EqualFold(name[:tilde], shortPrefix[:tilde]) &&
			name[tilde+1] >= '1' && name[tilde+1] <= '9' && allDigits(name[tilde+2:8]) && onlyDotsAndSpaces(name[8:]) {
			return true
		}
	}
	return false
}

// isNTFSShortGit reports whether name is the NTFS short name of .git.
func isNTFSShortGit(name string) bool {
	return len(name) >= 5 && strings.EqualFold(name[:5], "git~1") && onlyDotsAndSpaces(name[5:])
}

// onlyDotsAndSpaces reports whether s is only dots and spaces, possibly
// followed by an NTFS stream (":") or a backslash.
func onlyDotsAndSpaces(s string) bool {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '.', ' ':
		case ':', '\\':
			return true
		default:
			return false
		}
	}
	return true
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
