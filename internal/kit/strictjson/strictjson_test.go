package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
)

func TestDecode(t *testing.T) {
	var v struct {
		A int `json:"a"`
	}
	if err := Decode([]byte(` {"a": 1} `), &v); err != nil || v.A != 1 {
		t.Fatalf("valid document: %v %+v", err, v)
	}
	if err := Decode([]byte(`{"a":1,"b":2}`), &v); err == nil {
		t.Fatal("unknown field accepted")
	}
	if err := Decode([]byte(`{"a":1}{}`), &v); !errors.Is(err, ErrTrailingData) {
		t.Fatalf("trailing data: %v", err)
	}
	if err := Decode([]byte(`{"a":`), &v); err == nil {
		t.Fatal("truncated document accepted")
	}
}

func TestDecodeRefusesDuplicateKeys(t *testing.T) {
	type inner struct {
		B string `json:"b"`
	}
	var v struct {
		A  int     `json:"a"`
		In inner   `json:"in"`
		L  []inner `json:"l"`
	}
	for name, doc := range map[string]string{
		"top level":      `{"a":1,"a":2}`,
		"case folded":    `{"a":1,"A":2}`,
		"nested":         `{"in":{"b":"x","b":"y"}}`,
		"in an array":    `{"l":[{"b":"x"},{"b":"y","B":"z"}]}`,
		"after a nested": `{"in":{"b":"x"},"l":[],"in":{}}`,
	} {
		err := Decode([]byte(doc), &v)
		if !errors.Is(err, ErrDuplicateKey) {
			t.Errorf("%s: %s accepted or refused for another reason: %v", name, doc, err)
		}
	}
	for name, doc := range map[string]string{
		"same key in sibling objects": `{"l":[{"b":"x"},{"b":"y"}],"in":{"b":"z"}}`,
		"key equal to a value":        `{"in":{"b":"a"},"a":1}`,
		"strings in arrays":           `{"l":[],"a":1}`,
	} {
		if err := Decode([]byte(doc), &v); err != nil {
			t.Errorf("%s: %s refused: %v", name, doc, err)
		}
	}
}

func FuzzDecode(f *testing.F) {
	for _, s := range []string{`{"a":1}`, `{"a":1,"a":2}`, `[{"a":[1,{"b":2}]}]`, `"x"`, `{"a":{"a":{"a":1}}}`, `{`, `{"a":1}{}`, `{"a":"a","b":["a","b"]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var v any
		if Decode(data, &v) != nil {
			return
		}
		// An accepted document's objects keep every key it names: the
		// keys counted in the decoded maps equal the keys in its text,
		// counted by an independent walk that alternates key and value.
		if got, want := mapKeys(v), textKeys(t, data); got != want {
			t.Fatalf("%q: %d keys decoded, %d in the text", data, got, want)
		}
	})
}

func mapKeys(x any) int {
	n := 0
	switch x := x.(type) {
	case map[string]any:
		n += len(x)
		for _, e := range x {
			n += mapKeys(e)
		}
	case []any:
		for _, e := range x {
			n += mapKeys(e)
		}
	}
	return n
}

// textKeys counts the keys of every object in data: in an object, tokens
// alternate key, value (a container value counts as one token of its
// parent, closed by its end delimiter).
func textKeys(t *testing.T, data []byte) int {
	dec := json.NewDecoder(bytes.NewReader(data))
	type frame struct{ object, wantKey bool }
	var stack []frame
	n := 0
	for {
		tok, err := dec.Token()
		if err != nil {
			return n
		}
		if len(stack) > 0 && stack[len(stack)-1].object {
			top := &stack[len(stack)-1]
			if d, ok := tok.(json.Delim); ok && d == '}' {
				stack = stack[:len(stack)-1]
				continue
			}
			if top.wantKey {
				n++
				top.wantKey = false
				continue
			}
			top.wantKey = true // this token is the value (or opens it)
		} else if d, ok := tok.(json.Delim); ok && d == ']' {
			stack = stack[:len(stack)-1]
			continue
		}
		if d, ok := tok.(json.Delim); ok {
			stack = append(stack, frame{object: d == '{', wantKey: d == '{'})
		}
	}
}
