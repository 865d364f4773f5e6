// Package wordfreq counts words: a small library with no dependencies,
// used by forged's toolchain tests as a real Go project.
package wordfreq

import (
	"sort"

	"forged.test/wordfreq/internal/tokenize"
)

// Entry is one word and how often it occurs.
type Entry struct {
	Word  string
	Count int
}

// Count returns how often each word occurs in text.
func Count(text string) map[string]int {
	counts := map[string]int{}
	for _, w := range tokenize.Words(text) {
		counts[w]++
	}
	return counts
}

// Top returns the n most frequent words, most frequent first, ties in
// alphabetical order.
func Top(counts map[string]int, n int) []Entry {
	entries := make([]Entry, 0, len(counts))
	for w, c := range counts {
		entries = append(entries, Entry{w, c})
	}
	sort.Slice(entries, func(i, j int) bool {
		if entries[i].Count != entries[j].Count {
			return entries[i].Count > entries[j].Count
		}
		return entries[i].Word < entries[j].Word
	})
	if n < len(entries) {
		entries = entries[:n]
	}
	return entries
}
