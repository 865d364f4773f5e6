// Package termsafe renders untrusted text for a terminal. Everything a
// sandboxed task writes (and anything derived from it: event content,
// messages, facts) may carry control sequences that a terminal would
// obey: ESC/CSI/OSC sequences (clear screen, window titles, hyperlinks,
// colours), carriage returns and backspaces that overwrite what was
// printed, BEL, the C1 controls (U+0080–U+009F, which some terminals
// read as CSI/OSC), line and paragraph separators, and Unicode format
// characters such as the bidi overrides and zero-width characters that
// reorder or hide text.
//
// String replaces each of those with a visible escape (\x1b, \r, \u202e),
// and each byte of invalid UTF-8 with \xNN, so that the text is shown,
// never executed. Text without such characters is returned unchanged.
// Machine-readable output (--json) must not use this package: JSON is
// lossless and its encoder already escapes what JSON needs.
package termsafe

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// String returns s with every control, format, separator character and
// every invalid UTF-8 byte replaced by a visible backslash escape.
func String(s string) string {
	if safe(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case !escaped(r):
			b.WriteString(s[i : i+size])
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x80:
			fmt.Fprintf(&b, `\x%02x`, r)
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
		i += size
	}
	return b.String()
}

// Strings applies String to each element, in a new slice.
func Strings(list []string) []string {
	out := make([]string, len(list))
	for i, s := range list {
		out[i] = String(s)
	}
	return out
}

// Safe reports whether s would be printed unchanged by String.
func Safe(s string) bool { return safe(s) }

func safe(s string) bool {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c < 0x20 || c == 0x7f {
				return false
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && size <= 1) || escaped(r) {
			return false
		}
		i += size
	}
	return true
}

// escaped reports whether a terminal could act on r rather than show it:
// C0 and C1 controls and DEL (Cc), format characters including the bidi
// controls and zero-width characters (Cf), line and paragraph separators
// (Zl, Zp), and surrogate or private-use code points.
func escaped(r rune) bool {
	return unicode.In(r, unicode.Cc, unicode.Cf, unicode.Zl, unicode.Zp, unicode.Cs, unicode.Co)
}
