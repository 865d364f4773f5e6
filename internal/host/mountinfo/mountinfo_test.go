package mountinfo

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestUnescape(t *testing.T) {
	assert.Equal(t, "/var/lib/docker/volumes/a b/_data", Unescape(`/var/lib/docker/volumes/a\040b/_data`))
	assert.Equal(t, "/plain", Unescape("/plain"))
	assert.Equal(t, `/bad\9zz`, Unescape(`/bad\9zz`), "not an octal escape: kept")
	assert.Equal(t, `/end\04`, Unescape(`/end\04`), "a cut escape is kept")
}

func FuzzUnescape(f *testing.F) {
	for _, seed := range []string{`/a\040b`, `\`, `\0`, `\777`, `/x\011y\012`} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, p string) {
		out := Unescape(p)
		if len(out) > len(p) {
			t.Fatalf("unescaping grew %q to %q", p, out)
		}
		if !strings.Contains(p, `\`) && out != p {
			t.Fatalf("a path without escapes changed: %q → %q", p, out)
		}
	})
}
