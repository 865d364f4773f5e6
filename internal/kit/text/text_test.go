package text

import (
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
)

func TestClipNeverSplitsARune(t *testing.T) {
	assert.Equal(t, "abc", Clip("abc", 10))
	assert.Equal(t, "ab", Clip("abc", 2))
	assert.Equal(t, "a", Clip("aé", 2), "é is two bytes: it is dropped whole")
	assert.Equal(t, "", Clip("abc", 0))
	assert.Equal(t, "ab…", Ellipsis("abc", 2))
	assert.Equal(t, "abc", Ellipsis("abc", 3))
	assert.Equal(t, "a b c", OneLine("  a\n\tb\r\n c  ", 100))
	assert.Equal(t, "a b", OneLine("a\nb\nc", 3))
}

func FuzzClip(f *testing.F) {
	f.Add("héllo wörld", 3)
	f.Fuzz(func(t *testing.T, s string, n int) {
		if n < 0 || n > 1<<16 {
			return
		}
		got := Clip(s, n)
		if len(got) > n {
			t.Fatalf("Clip(%q, %d) = %q: longer than %d bytes", s, n, got, n)
		}
		if utf8.ValidString(s) && !utf8.ValidString(got) {
			t.Fatalf("Clip(%q, %d) = %q splits a rune", s, n, got)
		}
	})
}
