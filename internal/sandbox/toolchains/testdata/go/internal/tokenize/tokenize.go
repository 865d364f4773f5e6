// Package tokenize splits text into lower-case words.
package tokenize

import (
	"strings"
	"unicode"
)

// Words returns the words of text, lower-cased: runs of letters, digits
// and apostrophes.
func Words(text string) []string {
	return strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '\''
	})
}
