// Package strictjson decodes the JSON documents forged does not trust
// (dispatches, start packets, manifests, ledgers): exactly one value, no
// unknown fields, nothing after it.
package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
)

// ErrTrailingData is returned when anything but whitespace follows the
// value.
var ErrTrailingData = errors.New("trailing data after the JSON value")

// Decode decodes data into v, refusing unknown fields and trailing data.
// Decoding errors are returned as encoding/json produced them.
func Decode(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return ErrTrailingData
	}
	return nil
}
