package toolchains

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/forgedev/forged/internal/kit/ids"
	"github.com/forgedev/forged/internal/kit/text"
)

// CatalogueEnv names the environment variable that overrides the path of
// the image catalogue; scripts/images.sh honours the same variable.
const CatalogueEnv = "FORGED_IMAGES_FILE"

// DefaultCatalogue is where scripts/images.sh writes the catalogue,
// relative to the repository root.
const DefaultCatalogue = "bin/images.tsv"

// maxCatalogueBytes bounds a catalogue file.
const maxCatalogueBytes = 1 << 20

// Image is one built image of the catalogue.
type Image struct {
	Name     string   // catalogue name, e.g. "go"
	Ref      string   // forged-images/<name>:<recipe hash>
	ID       string   // sha256:<hex> image id
	Size     int64    // bytes, as the engine reports it
	Packages []string // the Debian packages it was built with
}

var (
	imageName = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)
	imageRef  = regexp.MustCompile(`^forged-images/[a-z0-9][a-z0-9-]{0,62}:[0-9a-f]{16}$`)
	debPkg    = regexp.MustCompile(`^[a-z0-9][a-z0-9+.-]{0,99}$`)
)

// ParseCatalogue reads the tab-separated catalogue scripts/images.sh
// writes: one image a line, as name, ref, image id, size in bytes and
// comma-separated packages. Every field is validated; a name may appear
// once, and the ref must be the name's.
func ParseCatalogue(r io.Reader) (map[string]Image, error) {
	raw, err := io.ReadAll(io.LimitReader(r, maxCatalogueBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read the image catalogue: %w", err)
	}
	if len(raw) > maxCatalogueBytes {
		return nil, fmt.Errorf("image catalogue exceeds %d bytes", maxCatalogueBytes)
	}
	images := map[string]Image{}
	sc := bufio.NewScanner(strings.NewReader(string(raw)))
	sc.Buffer(make([]byte, 0, 4096), maxCatalogueBytes)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if line == "" {
			continue
		}
		img, err := parseCatalogueLine(line)
		if err != nil {
			return nil, fmt.Errorf("image catalogue line %d: %w", n, err)
		}
		if _, dup := images[img.Name]; dup {
			return nil, fmt.Errorf("image catalogue line %d: %q appears twice", n, img.Name)
		}
		images[img.Name] = img
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read the image catalogue: %w", err)
	}
	return images, nil
}

func parseCatalogueLine(line string) (Image, error) {
	f := strings.Split(line, "\t")
	if len(f) != 5 {
		return Image{}, fmt.Errorf("want 5 tab-separated fields, got %d", len(f))
	}
	img := Image{Name: f[0], Ref: f[1], ID: f[2], Packages: strings.Split(f[4], ",")}
	switch {
	case !imageName.MatchString(img.Name):
		return Image{}, fmt.Errorf("invalid image name %q", text.Ellipsis(img.Name, maxQuotedBytes))
	case !imageRef.MatchString(img.Ref) || !strings.HasPrefix(img.Ref, "forged-images/"+img.Name+":"):
		return Image{}, fmt.Errorf("invalid reference %q for %s", text.Ellipsis(img.Ref, maxQuotedBytes), img.Name)
	case !ids.IsImageID(img.ID):
		return Image{}, fmt.Errorf("invalid image id %q", text.Ellipsis(img.ID, maxQuotedBytes))
	}
	size, err := strconv.ParseInt(f[3], 10, 64)
	if err != nil || size <= 0 {
		return Image{}, fmt.Errorf("invalid size %q", text.Ellipsis(f[3], maxQuotedBytes))
	}
	img.Size = size
	for _, p := range img.Packages {
		if !debPkg.MatchString(p) {
			return Image{}, fmt.Errorf("invalid package name %q", text.Ellipsis(p, maxQuotedBytes))
		}
	}
	return img, nil
}

// ErrNoCatalogue means the catalogue file does not exist: run
// scripts/images.sh.
var ErrNoCatalogue = errors.New("no image catalogue (run scripts/images.sh)")

// ReadCatalogue reads the catalogue at $FORGED_IMAGES_FILE, or else at
// DefaultCatalogue under repoRoot. A missing file is ErrNoCatalogue.
func ReadCatalogue(repoRoot string) (map[string]Image, string, error) {
	path := os.Getenv(CatalogueEnv)
	if path == "" {
		path = filepath.Join(repoRoot, DefaultCatalogue)
	}
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, path, fmt.Errorf("%s: %w", path, ErrNoCatalogue)
	}
	if err != nil {
		return nil, path, err
	}
	defer f.Close()
	images, err := ParseCatalogue(f)
	return images, path, err
}

// maxQuotedBytes bounds a catalogue field quoted in an error.
const maxQuotedBytes = 80
