// Package text bounds strings that forged puts into messages, reports and
// events: byte limits that never split a UTF-8 sequence, and single-line
// renderings of multi-line text (engine errors, worker output).
//
// It is forged's one clip: every bound on a string that reaches an error,
// an event or a report goes through Clip or one of its forms here, so a
// cut never leaves half a rune (invalid UTF-8) behind.
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

// ClipMark is Clip that appends mark when it cut s (the mark is beyond n).
func ClipMark(s string, n int, mark string) string {
	if len(s) <= n {
		return s
	}
	return Clip(s, n) + mark
}

// Ellipsis is Clip that marks a cut with "…" (the mark is beyond n).
func Ellipsis(s string, n int) string { return ClipMark(s, n, "…") }

// Tail keeps the last at most n bytes of s, starting on a rune boundary:
// the bounded form of output whose end matters (a failing command's last
// words).
func Tail(s string, n int) string {
	if n <= 0 {
		return ""
	}
	if len(s) <= n {
		return s
	}
	cut := len(s) - n
	for cut < len(s) && !utf8.RuneStart(s[cut]) {
		cut++
	}
	return s[cut:]
}

// EllipsisTail is Tail that marks a cut with a leading "…" (the mark is
// beyond n).
func EllipsisTail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + Tail(s, n)
}

// OneLine folds every whitespace run (newlines included) into one space,
// trims the ends and clips the result to n bytes.
func OneLine(s string, n int) string {
	return Clip(strings.Join(strings.Fields(s), " "), n)
}
