package ids

import (
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestNewUUIDIsVersion4AndUnique(t *testing.T) {
	shape := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	seen := map[string]bool{}
	for range 1000 {
		id := NewUUID()
		if !shape.MatchString(id) || seen[id] {
			t.Fatalf("bad or repeated id %q", id)
		}
		seen[id] = true
	}
}

func TestUUIDFromHex(t *testing.T) {
	for range 100 {
		id := NewUUID()
		got, ok := UUIDFromHex(strings.ReplaceAll(id, "-", ""))
		assert.True(t, ok)
		assert.Equal(t, id, got)
	}
	got, ok := UUIDFromHex("0123456789abcdef0123456789abcdef")
	assert.True(t, ok)
	assert.Equal(t, "01234567-89ab-cdef-0123-456789abcdef", got)
	for _, bad := range []string{
		"",
		"0123456789abcdef0123456789abcde",      // 31 digits
		"0123456789abcdef0123456789abcdef0",    // 33 digits
		"0123456789ABCDEF0123456789ABCDEF",     // forged writes lowercase only
		"0123456789abcdef0123456789abcdeg",     // not hex
		"01234567-89ab-cdef-0123-456789abcdef", // already hyphenated
		"{0123456789abcdef0123456789abcde}",
	} {
		got, ok := UUIDFromHex(bad)
		assert.False(t, ok, "%q", bad)
		assert.Empty(t, got)
	}
}

func TestIsEngineID(t *testing.T) {
	full := strings.Repeat("0123456789abcdef", 4)
	for _, good := range []string{full, full[:12], full[:40]} {
		assert.True(t, IsEngineID(good), "%q", good)
	}
	for _, bad := range []string{"", full[:11], full + "0", strings.ToUpper(full), full[:63] + "g", full[:20] + "é", "sha256:" + full[:57]} {
		assert.False(t, IsEngineID(bad), "%q", bad)
	}
}
