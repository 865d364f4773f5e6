package dockerfile

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParse(t *testing.T) {
	src := "# syntax=docker/dockerfile:1\n" +
		"# escape=`\n" +
		"\n" +
		"# a comment\n" +
		"FROM --platform=linux/amd64 base@sha256:" + strings.Repeat("a", 64) + " AS build\n" +
		"RUN echo one `\n" +
		"  # dropped inside a continuation\n" +
		"  two\n" +
		"copy --from=build --chown=1:1 [\"/a\", \"/b\"]\n" +
		"ADD\tsrc dst\n"
	f, err := Parse([]byte(src))
	require.NoError(t, err)
	assert.Equal(t, byte('`'), f.Escape)
	assert.Equal(t, "docker/dockerfile:1", f.Syntax)
	require.Len(t, f.Instructions, 4)

	from := f.Instructions[0]
	assert.Equal(t, 5, from.Line)
	assert.Equal(t, "FROM", from.Cmd)
	assert.Equal(t, []string{"--platform=linux/amd64"}, from.Flags)
	assert.Equal(t, "build", from.Args[2])

	run := f.Instructions[1]
	assert.Equal(t, 6, run.Line)
	assert.Equal(t, []string{"echo", "one", "two"}, run.Args)

	cp := f.Instructions[2]
	assert.Equal(t, "COPY", cp.Cmd)
	v, ok := cp.Flag("FROM")
	assert.True(t, ok)
	assert.Equal(t, "build", v)
	assert.True(t, cp.JSON)
	assert.Equal(t, []string{"/a", "/b"}, cp.Args)

	assert.Equal(t, []string{"src", "dst"}, f.Instructions[3].Args)
}

func TestParseDirectivesOnlyAtTheTop(t *testing.T) {
	f, err := Parse([]byte("FROM scratch\n# escape=`\nRUN a \\\n b\n"))
	require.NoError(t, err)
	assert.Equal(t, byte('\\'), f.Escape)
	require.Len(t, f.Instructions, 2)
	assert.Equal(t, []string{"a", "b"}, f.Instructions[1].Args)
}

func TestParseErrors(t *testing.T) {
	for name, src := range map[string]string{
		"bad instruction": "FROM scratch\n123 x\n",
		"bad escape":      "# escape=x\nFROM scratch\n",
		"repeated":        "# escape=\\\n# escape=`\nFROM scratch\n",
		"bad flag":        "FROM scratch\nCOPY --=x a b\n",
		"too big":         "FROM scratch\n#" + strings.Repeat("x", MaxBytes),
	} {
		_, err := Parse([]byte(src))
		var pe *ParseError
		assert.ErrorAs(t, err, &pe, name)
	}
}

// FuzzParse checks that any input parses or fails cleanly, that every
// instruction's line is within the file, and that the policy never panics.
func FuzzParse(f *testing.F) {
	f.Add([]byte("FROM scratch\nRUN echo hi\n"))
	f.Add([]byte("# escape=`\nFROM a@sha256:" + strings.Repeat("0", 64) + " AS b\nADD http://x/y /z\nONBUILD ADD [\"https://x\",\"/y\"]\n"))
	f.Add([]byte("FROM a\\\n\n# c\nAS b\nCOPY --from=0 x y\nCOPY --from=img:1 x y\n"))
	f.Fuzz(func(t *testing.T, src []byte) {
		file, err := Parse(src)
		if err != nil {
			var pe *ParseError
			if !assert.ErrorAs(t, err, &pe) {
				t.FailNow()
			}
			return
		}
		lines := strings.Count(string(src), "\n") + 1
		for _, ins := range file.Instructions {
			if ins.Line < 1 || ins.Line > lines {
				t.Fatalf("line %d outside 1..%d", ins.Line, lines)
			}
			if ins.Cmd != strings.ToUpper(ins.Cmd) || ins.Cmd == "" {
				t.Fatalf("bad instruction name %q", ins.Cmd)
			}
		}
		_ = file.Check(true)
		_ = file.Check(false)
		for _, img := range file.UpstreamImages() {
			if img.Ref == "" {
				t.Fatal("empty upstream image")
			}
		}
	})
}
