// Package strictjson decodes the JSON documents forged does not trust
// (dispatches, start packets, manifests, ledgers): exactly one value, no
// unknown fields, no duplicate keys, nothing after it.
package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// ErrTrailingData is returned when anything but whitespace follows the
// value.
var ErrTrailingData = errors.New("trailing data after the JSON value")

// ErrDuplicateKey is returned when an object names a key twice. encoding/json
// would keep the last one (and matches keys to fields without regard to
// case), so a document with two readings is refused instead: keys that are
// equal, or equal but for case, count as duplicates.
var ErrDuplicateKey = errors.New("duplicate key in a JSON object")

// Decode decodes data into v, refusing duplicate keys, unknown fields and
// trailing data. Decoding errors are returned as encoding/json produced
// them; a duplicate key wraps ErrDuplicateKey and names the key.
func Decode(data []byte, v any) error {
	if err := checkDuplicates(data); err != nil {
		return err
	}
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

// checkDuplicates walks the first value's tokens and refuses an object
// that names a key twice. Syntax errors are left to the decoder, which
// reports them as it always has.
func checkDuplicates(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	// One entry per open container: the keys seen (nil for an array).
	var stack []map[string]bool
	expectKey := func() bool { return len(stack) > 0 && stack[len(stack)-1] != nil }
	for {
		// In an object, a string token read where a key goes is a key:
		// dec.More and the delimiters keep keys and values apart.
		inObject := expectKey()
		tok, err := dec.Token()
		if err != nil {
			return nil // io.EOF, or a syntax error the decoder reports
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{':
				stack = append(stack, map[string]bool{})
			case '[':
				stack = append(stack, nil)
			case '}', ']':
				stack = stack[:len(stack)-1]
				if len(stack) == 0 {
					return nil
				}
			}
			continue
		case string:
			if inObject {
				folded := strings.ToLower(t)
				if stack[len(stack)-1][folded] {
					return fmt.Errorf("%w: %q", ErrDuplicateKey, t)
				}
				stack[len(stack)-1][folded] = true
				// The key's value follows: read it whole, keys inside it
				// are checked by the loop as it descends.
				if err := skipValue(dec, &stack); err != nil {
					return err
				}
				continue
			}
		}
		if len(stack) == 0 {
			return nil // a scalar document
		}
	}
}

// skipValue reads the value after a key. A scalar is consumed; a container
// is opened on the stack, and the main loop walks it.
func skipValue(dec *json.Decoder, stack *[]map[string]bool) error {
	tok, err := dec.Token()
	if err != nil {
		return nil
	}
	if d, ok := tok.(json.Delim); ok {
		switch d {
		case '{':
			*stack = append(*stack, map[string]bool{})
		case '[':
			*stack = append(*stack, nil)
		}
	}
	return nil
}
