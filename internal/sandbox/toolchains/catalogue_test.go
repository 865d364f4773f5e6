package toolchains

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const goodLine = "go\tforged-images/go:0743685b94bbcbec\tsha256:" +
	"1111111111111111111111111111111111111111111111111111111111111111\t594470400\tgolang-go"

func TestParseCatalogue(t *testing.T) {
	images, err := ParseCatalogue(strings.NewReader(goodLine + "\n\nnode\tforged-images/node:c750fce11ea0e5d9\tsha256:" +
		strings.Repeat("2", 64) + "\t374000000\tnodejs,npm\n"))
	require.NoError(t, err)
	assert.Equal(t, Image{Name: "go", Ref: "forged-images/go:0743685b94bbcbec", ID: "sha256:" + strings.Repeat("1", 64),
		Size: 594470400, Packages: []string{"golang-go"}}, images["go"])
	assert.Equal(t, []string{"nodejs", "npm"}, images["node"].Packages)
	assert.Len(t, images, 2)
}

func TestParseCatalogueRefusesMalformedLines(t *testing.T) {
	for name, in := range map[string]string{
		"too few fields":      "go\tforged-images/go:0743685b94bbcbec",
		"ref of another name": strings.Replace(goodLine, "forged-images/go:", "forged-images/node:", 1),
		"foreign repository":  strings.Replace(goodLine, "forged-images/go:", "library/go:", 1),
		"short id":            strings.Replace(goodLine, "sha256:11", "sha256:", 1),
		"zero size":           strings.Replace(goodLine, "594470400", "0", 1),
		"bad package":         strings.Replace(goodLine, "golang-go", "golang-go,$(reboot)", 1),
		"bad name":            strings.Replace(goodLine, "go\t", "Go\t", 1),
		"duplicate":           goodLine + "\n" + goodLine,
	} {
		_, err := ParseCatalogue(strings.NewReader(in))
		assert.Error(t, err, name)
	}
	_, err := ParseCatalogue(strings.NewReader(strings.Repeat("x", maxCatalogueBytes+1)))
	assert.ErrorContains(t, err, "exceeds")
}

func TestReadCatalogue(t *testing.T) {
	root := t.TempDir()
	t.Setenv(CatalogueEnv, "")
	_, path, err := ReadCatalogue(root)
	assert.ErrorIs(t, err, ErrNoCatalogue)
	assert.Equal(t, filepath.Join(root, DefaultCatalogue), path)

	other := filepath.Join(t.TempDir(), "images.tsv")
	require.NoError(t, os.WriteFile(other, []byte(goodLine+"\n"), 0o600))
	t.Setenv(CatalogueEnv, other)
	images, path, err := ReadCatalogue(root)
	require.NoError(t, err)
	assert.Equal(t, other, path)
	assert.Contains(t, images, "go")
}

func FuzzParseCatalogue(f *testing.F) {
	f.Add(goodLine + "\n")
	f.Add("")
	f.Add("a\tb\tc\td\te")
	f.Fuzz(func(t *testing.T, in string) {
		images, err := ParseCatalogue(strings.NewReader(in))
		if err != nil {
			return
		}
		for name, img := range images {
			if name != img.Name || !strings.HasPrefix(img.Ref, "forged-images/"+name+":") || img.Size <= 0 || len(img.Packages) == 0 {
				t.Fatalf("accepted an invalid image: %+v", img)
			}
		}
	})
}
