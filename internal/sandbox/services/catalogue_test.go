package services

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/failure"
)

const (
	idA = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	idB = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
)

func TestParseReadsWhatTheScriptWrites(t *testing.T) {
	c, err := Parse(strings.NewReader("# comment\n\npostgres\tforged-services/postgres:24f2f7260a17b3e3\t" + idA + "\t368945181\tpostgresql-15\n" +
		"redis\tforged-services/redis:7a0a9497dea32e03\t" + idB + "\n"))
	require.NoError(t, err)
	e, ok := c.Lookup(Postgres)
	require.True(t, ok)
	assert.Equal(t, Entry{Service: Postgres, Ref: "forged-services/postgres:24f2f7260a17b3e3", ImageID: idA}, e)
	assert.Len(t, c.Entries(), 2)
	_, ok = c.Lookup(Browser)
	assert.False(t, ok)
	var nilCatalogue *Catalogue
	_, ok = nilCatalogue.Lookup(Postgres)
	assert.False(t, ok, "no catalogue configures no service")
}

func TestParseRefusesMalformedCatalogues(t *testing.T) {
	for name, text := range map[string]string{
		"unknown service":   "mysql\tx:1\t" + idA + "\n",
		"spaces not tabs":   "postgres x:1 " + idA + "\n",
		"digest not pinned": "postgres\tx:1\tlatest\n",
		"short digest":      "postgres\tx:1\tsha256:abc\n",
		"registry ref":      "postgres\tHTTPS://evil/x\t" + idA + "\n",
		"twice":             "redis\tx:1\t" + idA + "\nredis\tx:2\t" + idB + "\n",
		"too large":         strings.Repeat("# padding padding padding padding\n", 3000),
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Parse(strings.NewReader(text))
			assert.Error(t, err)
		})
	}
}

// FuzzParse: the catalogue is operator input; no line may panic, and an
// accepted catalogue holds only known services pinned by full digests.
func FuzzParse(f *testing.F) {
	f.Add("postgres\tforged-services/postgres:t\t" + idA + "\n")
	f.Add("redis\tr\t" + idB + "\textra\n# c\n")
	f.Add("\t\t\n")
	f.Fuzz(func(t *testing.T, text string) {
		c, err := Parse(strings.NewReader(text))
		if err != nil {
			return
		}
		for _, e := range c.Entries() {
			if _, ok := definitions[e.Service]; !ok && e.Service != Browser && e.Service != Egress {
				t.Fatalf("unknown service accepted: %q", e.Service)
			}
			if !pinnedImageID.MatchString(e.ImageID) {
				t.Fatalf("unpinned image accepted: %q", e.ImageID)
			}
		}
	})
}

type fakeImages map[string]string

func (f fakeImages) ImageID(_ context.Context, ref string) (string, bool, error) {
	if ref == "broken" {
		return "", false, errors.New("engine down")
	}
	id, ok := f[ref]
	return id, ok, nil
}

func TestVerifyRefusesWithStableCodes(t *testing.T) {
	c, err := Parse(strings.NewReader("postgres\tpg:1\t" + idA + "\nredis\tredis:1\t" + idB + "\n"))
	require.NoError(t, err)
	ok := fakeImages{"pg:1": idA, "redis:1": idB}

	got, err := c.Verify(context.Background(), ok, []string{Postgres, Redis})
	require.NoError(t, err)
	assert.Equal(t, idB, got[Redis].ImageID)

	_, err = c.Verify(context.Background(), fakeImages{"pg:1": idB}, []string{Postgres})
	assert.Equal(t, failure.SandboxServiceImageDiffers, failure.CodeOf(err))
	_, err = c.Verify(context.Background(), fakeImages{}, []string{Postgres})
	assert.Equal(t, failure.SandboxServiceUnavailable, failure.CodeOf(err))
	assert.Contains(t, err.Error(), "nothing is pulled")
	_, err = (*Catalogue)(nil).Verify(context.Background(), ok, []string{Redis})
	assert.Equal(t, failure.SandboxServiceUnavailable, failure.CodeOf(err))
	_, err = c.Verify(context.Background(), ok, []string{Browser})
	assert.Equal(t, failure.SandboxServiceUnavailable, failure.CodeOf(err), "not in this catalogue")
	_, err = c.Verify(context.Background(), ok, []string{"mysql"})
	assert.Equal(t, failure.SandboxServicesUnsupported, failure.CodeOf(err))
}

func TestCheckReportsEveryEntrysState(t *testing.T) {
	c, err := Parse(strings.NewReader("postgres\tpg:1\t" + idA + "\nredis\tbroken\t" + idB + "\n"))
	require.NoError(t, err)
	st := c.Check(context.Background(), fakeImages{"pg:1": idB})
	require.Len(t, st, 2)
	assert.Equal(t, "mismatch", st[0].State)
	assert.Equal(t, "unknown", st[1].State)
	st = c.Check(context.Background(), fakeImages{"pg:1": idA})
	assert.Equal(t, "ready", st[0].State)
}

func TestVerifyEgressChecksTheProxysPinnedImage(t *testing.T) {
	c, err := Parse(strings.NewReader("egress\tforged-services/egress:1\t" + idA + "\nredis\tredis:1\t" + idB + "\n"))
	require.NoError(t, err)
	e, err := c.VerifyEgress(context.Background(), fakeImages{"forged-services/egress:1": idA})
	require.NoError(t, err)
	assert.Equal(t, idA, e.ImageID)
	_, err = c.VerifyEgress(context.Background(), fakeImages{"forged-services/egress:1": idB})
	assert.Equal(t, failure.SandboxServiceImageDiffers, failure.CodeOf(err))
	_, err = c.VerifyEgress(context.Background(), fakeImages{})
	assert.Equal(t, failure.SandboxEgressUnsupported, failure.CodeOf(err))
	_, err = (*Catalogue)(nil).VerifyEgress(context.Background(), fakeImages{})
	assert.Equal(t, failure.SandboxEgressUnsupported, failure.CodeOf(err))
	// The proxy is no contract service.
	_, err = c.Verify(context.Background(), fakeImages{"forged-services/egress:1": idA}, []string{Egress})
	assert.Equal(t, failure.SandboxServicesUnsupported, failure.CodeOf(err))
}

// pinnedImageID is an image id as the catalogue must pin it.
var pinnedImageID = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
