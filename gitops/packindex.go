package gitops

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"io"

	"github.com/forgedev/forged/failure"
)

// ParsePackIndexIDs returns the object ids a version 2 pack index (.idx)
// lists, for a pack of want objects with SHA-1 ids. The index was written
// by git index-pack in the quarantine; it is still parsed defensively:
// the magic, the version, a non-decreasing fan-out whose total is want,
// and strictly increasing ids. Anything else is failure.SandboxRuntimeFailed.
func ParsePackIndexIDs(r io.Reader, want int) ([]string, error) {
	bad := func(what string) ([]string, error) {
		return nil, failure.New(failure.SandboxRuntimeFailed, "quarantine pack index: %s", what)
	}
	var hdr [8 + 256*4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return bad("truncated header")
	}
	if !bytes.Equal(hdr[:4], []byte{0xff, 't', 'O', 'c'}) || binary.BigEndian.Uint32(hdr[4:8]) != 2 {
		return bad("not a version 2 index")
	}
	var prev uint32
	for i := 0; i < 256; i++ {
		v := binary.BigEndian.Uint32(hdr[8+4*i:])
		if v < prev {
			return bad("fan-out decreases")
		}
		prev = v
	}
	if int64(prev) != int64(want) {
		return bad("object count differs from the pack's")
	}
	ids := make([]string, 0, want)
	var raw, last [20]byte
	for i := 0; i < want; i++ {
		if _, err := io.ReadFull(r, raw[:]); err != nil {
			return bad("truncated object names")
		}
		if i > 0 && bytes.Compare(raw[:], last[:]) <= 0 {
			return bad("object names out of order")
		}
		last = raw
		ids = append(ids, hex.EncodeToString(raw[:]))
	}
	return ids, nil
}
