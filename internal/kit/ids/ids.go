// Package ids makes and checks the identifiers forged handles: the random
// ones it mints itself (report ids, runner ids, the example's dispatch
// ids), the hex form of an attempt id that names its directories and
// volumes, and the Docker engine's container and image ids.
package ids

import (
	"strings"

	"github.com/google/uuid"
)

// NewUUID returns a random (version 4) UUID in canonical lowercase form.
func NewUUID() string { return uuid.NewString() }

// UUIDFromHex turns the hex form of an id (a UUID without its hyphens, as
// forged names an attempt's directories and volumes) back into the id in
// canonical lowercase form. It accepts exactly 32 lowercase hex digits,
// the only form forged writes.
func UUIDFromHex(h string) (string, bool) {
	if len(h) != 32 || strings.ToLower(h) != h {
		return "", false
	}
	u, err := uuid.Parse(h)
	if err != nil {
		return "", false
	}
	return u.String(), true
}

// IsEngineID reports whether s is a Docker engine id as forged accepts
// one: 12 to 64 lowercase hex digits (a container id or its short form).
func IsEngineID(s string) bool {
	return len(s) >= 12 && len(s) <= 64 && lowerHex(s)
}

// IsImageID reports whether s is a Docker image id: "sha256:" and 64
// lowercase hex digits, the digest of the image's configuration.
func IsImageID(s string) bool {
	h, ok := strings.CutPrefix(s, "sha256:")
	return ok && len(h) == 64 && lowerHex(h)
}

func lowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
