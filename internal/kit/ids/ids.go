// Package ids makes the random identifiers forged mints itself (report ids,
// runner ids, the example's dispatch ids).
package ids

import "github.com/google/uuid"

// NewUUID returns a random (version 4) UUID in canonical lowercase form.
func NewUUID() string { return uuid.NewString() }
