// Package text bounds strings that forged puts into messages, reports and
// events: byte limits that never split a UTF-8 sequence, and single-line
// renderings of multi-line text (engine errors, worker output).
package text

import (
	"strings"
	"unicode/utf8"
)

// Clip shortens s to at most n bytes without splitting a UTF-8 sequence.
func Clip(s string, n int) string {
	if n <= 0 {
		return ""
	}
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// Ellipsis is Clip that marks a cut with "…" (the mark is beyond n).
func Ellipsis(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return Clip(s, n) + "…"
}

// OneLine folds every whitespace run (newlines included) into one space,
// trims the ends and clips the result to n bytes.
func OneLine(s string, n int) string {
	return Clip(strings.Join(strings.Fields(s), " "), n)
}
