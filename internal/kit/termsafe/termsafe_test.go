package termsafe

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestStringEscapesWhatATerminalWouldObey(t *testing.T) {
	cases := map[string]struct{ in, want string }{
		"plain":          {"hello, wörld → 世界", "hello, wörld → 世界"},
		"clear screen":   {"\x1b[2J\x1b[H", `\x1b[2J\x1b[H`},
		"osc title":      {"\x1b]0;pwned\x07", `\x1b]0;pwned\x07`},
		"osc 8 link":     {"\x1b]8;;http://x\x1b\\a\x1b]8;;\x1b\\", `\x1b]8;;http://x\x1b\a\x1b]8;;\x1b\`},
		"colour":         {"\x1b[31mred\x1b[0m", `\x1b[31mred\x1b[0m`},
		"carriage":       {"ok\rattempt x succeeded", `ok\rattempt x succeeded`},
		"newline tab":    {"a\nb\tc", `a\nb\tc`},
		"backspace del":  {"ab\b\x7f", `ab\x08\x7f`},
		"nul":            {"a\x00b", `a\x00b`},
		"c1 csi":         {"a\u009b2Jb", `a\u009b2Jb`},
		"c1 nel":         {"a\u0085b", `a\u0085b`},
		"bidi override":  {"abc\u202edcba", `abc\u202edcba`},
		"bidi isolate":   {"\u2066x\u2069", `\u2066x\u2069`},
		"zero width":     {"a\u200bb\ufeff", `a\u200bb\ufeff`},
		"line separator": {"a\u2028b", `a\u2028b`},
		"invalid utf8":   {"a\xffb\xc3", `a\xffb\xc3`},
		"private use":    {"\ue000", `\ue000`},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, c.want, String(c.in))
			assert.Equal(t, c.in == c.want, Safe(c.in))
		})
	}
}

func TestStrings(t *testing.T) {
	assert.Equal(t, []string{"a", `\x1b`}, Strings([]string{"a", "\x1b"}))
}

func TestHandlerEscapesMessageAndAttributes(t *testing.T) {
	var out bytes.Buffer
	log := slog.New(Handler(slog.NewTextHandler(&out, nil))).With("pre", "\x1b]0;t\x07")
	log.WithGroup("g\x1b").Info("title\x1b[2J", "content", "a\rb", "err", errors.New("e\x1b[31m"),
		slog.Group("inner", "x", "\u202e"), "n", 3)
	s := out.String()
	assert.NotContains(t, s, "\x1b")
	assert.NotContains(t, s, "\u202e")
	assert.NotContains(t, s, "\r")
	for _, want := range []string{`title\x1b[2J`, `a\rb`, `e\x1b[31m`, `\u202e`, "n=3", `\x1b]0;t\x07`} {
		assert.Contains(t, s, want)
	}
}

func FuzzString(f *testing.F) {
	for _, seed := range []string{"", "plain", "\x1b[2J", "\x1b]0;x\x07", "\u202e", "\xff\xfe", "a\r\nb", "\u0085\u009b", "\\x1b"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := String(s)
		require.True(t, utf8.ValidString(out), "output is valid UTF-8")
		require.True(t, Safe(out), "output %q holds nothing a terminal acts on", out)
		for _, r := range out {
			require.False(t, escaped(r), "rune %U survived", r)
		}
		if Safe(s) {
			require.Equal(t, s, out, "safe text is unchanged")
		} else {
			require.NotEqual(t, s, out)
		}
		require.Equal(t, out, String(out), "escaping is idempotent on its output")
		require.False(t, strings.ContainsAny(out, "\x1b\r\n\a\b"))
	})
}
