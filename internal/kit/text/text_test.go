package text

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
)

func TestClipNeverSplitsARune(t *testing.T) {
	assert.Equal(t, "abc", Clip("abc", 10))
	assert.Equal(t, "ab", Clip("abc", 2))
	assert.Equal(t, "a", Clip("aé", 2), "é is two bytes: it is dropped whole")
	assert.Equal(t, "", Clip("abc", 0))
	assert.Equal(t, "", Clip("abc", -1))
	assert.Equal(t, "ab…", Ellipsis("abc", 2))
	assert.Equal(t, "abc", Ellipsis("abc", 3))
	assert.Equal(t, "a…", Ellipsis("aé", 2))
	assert.Equal(t, "ab...", ClipMark("abc", 2, "..."))
	assert.Equal(t, "abc", ClipMark("abc", 3, "..."))
	assert.Equal(t, "a b c", OneLine("  a\n\tb\r\n c  ", 100))
	assert.Equal(t, "a b", OneLine("a\nb\nc", 3))
}

func TestTailNeverSplitsARune(t *testing.T) {
	assert.Equal(t, "abc", Tail("abc", 10))
	assert.Equal(t, "bc", Tail("abc", 2))
	assert.Equal(t, "b", Tail("éb", 2), "é is two bytes: it is dropped whole")
	assert.Equal(t, "", Tail("abc", 0))
	assert.Equal(t, "…bc", EllipsisTail("abc", 2))
	assert.Equal(t, "abc", EllipsisTail("abc", 3))
	assert.Equal(t, "…€", EllipsisTail("a€", 3))
}

// The bound forms of the bound helpers that forged had before this one
// (s[:n], s[:n]+"…", "…"+s[len(s)-n:]): on ASCII they give the same text.
func TestClipKeepsTheOldOutputOnASCII(t *testing.T) {
	s := strings.Repeat("0123456789", 30)
	for _, n := range []int{1, 12, 64, 80, 299, 300, 301} {
		if len(s) > n {
			assert.Equal(t, s[:n], Clip(s, n))
			assert.Equal(t, s[:n]+"…", Ellipsis(s, n))
			assert.Equal(t, s[:n]+"...", ClipMark(s, n, "..."))
			assert.Equal(t, s[len(s)-n:], Tail(s, n))
			assert.Equal(t, "…"+s[len(s)-n:], EllipsisTail(s, n))
		} else {
			assert.Equal(t, s, Clip(s, n))
			assert.Equal(t, s, Ellipsis(s, n))
			assert.Equal(t, s, Tail(s, n))
			assert.Equal(t, s, EllipsisTail(s, n))
		}
	}
}

// FuzzClip checks every form: from valid UTF-8, a bound never yields
// invalid UTF-8; the kept part never exceeds the limit; a prefix (suffix)
// form keeps a prefix (suffix) of s, the longest one that fits; and a mark
// appears exactly when s was cut.
func FuzzClip(f *testing.F) {
	f.Add("héllo wörld", 3)
	f.Add("a€b", 2)
	f.Add("🙂🙂🙂", 5)
	f.Add("\xff\xfe", 1)
	f.Add("a\n b\t\tc", 4)
	f.Fuzz(func(t *testing.T, s string, n int) {
		if n < -1 || n > 1<<16 {
			return
		}
		valid := utf8.ValidString(s)
		check := func(form, kept string, prefix bool) {
			t.Helper()
			if len(kept) > max(n, 0) {
				t.Fatalf("%s(%q, %d) = %q: longer than %d bytes", form, s, n, kept, n)
			}
			if valid && !utf8.ValidString(kept) {
				t.Fatalf("%s(%q, %d) = %q splits a rune", form, s, n, kept)
			}
			if prefix && !strings.HasPrefix(s, kept) || !prefix && !strings.HasSuffix(s, kept) {
				t.Fatalf("%s(%q, %d) = %q is not a part of s from its %s", form, s, n, kept, map[bool]string{true: "start", false: "end"}[prefix])
			}
			// Longest: one more rune would not fit (or s is whole).
			if valid && len(kept) < len(s) && n > 0 {
				var next int
				if prefix {
					_, next = utf8.DecodeRuneInString(s[len(kept):])
				} else {
					_, next = utf8.DecodeLastRuneInString(s[:len(s)-len(kept)])
				}
				if len(kept)+next <= n {
					t.Fatalf("%s(%q, %d) = %q: cut more than needed", form, s, n, kept)
				}
			}
		}
		check("Clip", Clip(s, n), true)
		check("Tail", Tail(s, n), false)
		cut := len(s) > n
		if e := Ellipsis(s, n); cut {
			if !strings.HasSuffix(e, "…") {
				t.Fatalf("Ellipsis(%q, %d) = %q: no mark on a cut", s, n, e)
			}
			check("Ellipsis", strings.TrimSuffix(e, "…"), true)
		} else if e != s {
			t.Fatalf("Ellipsis(%q, %d) = %q changed an uncut s", s, n, e)
		}
		if e := EllipsisTail(s, n); cut {
			if !strings.HasPrefix(e, "…") {
				t.Fatalf("EllipsisTail(%q, %d) = %q: no mark on a cut", s, n, e)
			}
			check("EllipsisTail", strings.TrimPrefix(e, "…"), false)
		} else if e != s {
			t.Fatalf("EllipsisTail(%q, %d) = %q changed an uncut s", s, n, e)
		}
		if o := OneLine(s, n); len(o) > max(n, 0) || valid && !utf8.ValidString(o) || strings.ContainsAny(o, "\n\r\t") {
			t.Fatalf("OneLine(%q, %d) = %q", s, n, o)
		}
	})
}
